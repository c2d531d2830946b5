// Runs one task instance for every policy and budget. The prompt is prefilled once into a prefix
// cache (policy/registry.h, CreatePrefixCache) that gives the full cache's row and, in
// prompt-end mode, a fork for each (policy, budget), so those rows share the same prompt
// computation bit for bit; in bounded mode each (policy, budget) reads the prompt itself in
// chunks, routing between them. The full cache runs first; its outputs are the reference for agreement, edit similarity and KL. With
// a shadow, every compressed run is mirrored by a never-routing fp16 fork fed the same tokens,
// which measures missed attention mass and FMM (eval/attention_miss.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/loaded_model.h"
#include "eval/chat_turns.h"
#include "eval/task.h"
#include "kv/kv_config.h"
#include "util/thread_pool.h"

namespace qevict {

struct EvalSettings {
  std::vector<std::string> policies;  // "full" is always run (first) as the reference
  std::vector<double> budgets;        // fractions of the run's fp16 cache (docs/kv-cache.md, "Budget")
  KvConfig kv;                        // geometry and policy parameters shared by every row
  bool shadow = false;                // missed attention mass and FMM against a shadow
  int fmm_horizon = 32;               // H: decode steps after a routing step counted by FMM
  int prefill_chunk = 256;  // tokens per forward pass (capped by kv.prefill_chunk when bounded)
  // How compressed rows read the prompt (docs/evaluation.md, "Prefill modes"); each row says
  // which in "prefill_mode":
  //   bounded     each (policy, budget) prefills the prompt itself, routing after every
  //               kv.prefill_chunk tokens: the memory a user with a budget gets (the default);
  //   prompt-end  the prompt is read once in fp16 and forked into every (policy, budget), whose
  //               first routing step follows the whole prompt (the paper's setting).
  bool bounded = true;
  bool prompt_end = false;
  // Appended to every row's policy name as "name[tag]" (ablation runs whose rows are merged
  // with a main run's, e.g. a run with --kv-bits 4); "" for none.
  std::string tag;
  // How questions are put to the model (eval/chat_turns.h); rows say which in "prompt_style".
  // kAuto is resolved per model (ResolvePromptStyle).
  PromptStyle prompt_style = PromptStyle::kAuto;
  // Where the first prefill ends (eval/chat_turns.h): after the first question
  // (question-in-prompt) or after the context, every question then being a later turn
  // (context-only); rows say which in "protocol".
  EvalProtocol protocol = EvalProtocol::kQuestionInPrompt;
  // How answers are compared with the output (eval/answer_match.h) in tasks that do not name
  // their own scorer (EvalTask::scorer); rows say which in "scorer".
  AnswerScorer scorer = AnswerScorer::kSubstring;
};

// One row RunInstance writes for every instance.
struct PlannedRow {
  std::string policy;        // as listed in EvalSettings::policies
  std::string name;          // as the row names it: policy, or policy[tag]
  double budget = 1.0;       // 1 for the full cache
  std::string prefill_mode;  // "full", "bounded" or "prompt-end"
  // What the budget is of (--kv-budget-scope or the variant's budget_scope): "all" or "global";
  // "all" for the full cache, which has none.
  std::string budget_scope = "all";
};
// The rows of an instance in the order RunInstance writes them: the full cache's first, then
// every bounded (policy, budget), then every prompt-end one.
std::vector<PlannedRow> PlannedRows(const EvalSettings& settings);

// Tokens an instance needs in its session (prompt + every later turn + generations): what the
// model's context must hold. Throws qevict::Error for a task that cannot be run.
int64_t InstanceTokens(const LoadedModel& model, const EvalTask& task,
                       PromptStyle style = PromptStyle::kAuto,
                       EvalProtocol protocol = EvalProtocol::kQuestionInPrompt);

// Runs every row of the instance (PlannedRows) and hands each to on_row as soon as it is done. Rows follow
// the schema of docs/evaluation.md (see eval/eval_run.cc for the key list). Throws
// qevict::Error when the instance does not fit the model's context.
void RunInstance(const LoadedModel& model, ThreadPool& pool, const EvalSettings& settings,
                 const EvalTask& task, const std::function<void(nlohmann::json)>& on_row);

}  // namespace qevict
