// `qevict eval`: the long-context benchmark suite (src/eval/eval_run.h, docs/results.md).
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>

#include "eval/answer_match.h"
#include "eval/eval_run.h"
#include "policy/registry.h"
#include "tools/build_revision.h"
#include "tools/commands.h"
#include "tools/kv_flags.h"
#include "util/error.h"

namespace qevict::cli {
namespace {

struct EvalFlags {
  std::string model;
  std::string tasks = "niah,drift";
  std::string policies;  // default: every policy
  std::vector<double> budgets = {0.05, 0.1, 0.2, 0.5};
  std::vector<int64_t> lengths = {2048, 4096};
  std::vector<double> depths = {0.1, 0.5, 0.9};
  int samples = 1;
  int first_sample = 0;
  uint64_t seed = 1;
  std::string shard = "0/1";
  int threads = 0;
  bool shadow = false;
  int fmm_horizon = 32;
  std::string out = "eval-out";
  bool overwrite = false;
  bool resume = false;
  bool rescore = false;
  bool no_progress = false;
  std::string export_tasks;
  std::string tag;
  std::string prefill_mode = "bounded";
  std::string prompt_style = "auto";
  std::string protocol = "question-in-prompt";
  std::string scorer = "substring";
  KvFlags kv;
};

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int Eval(const EvalFlags& f) {
  EvalOptions o;
  o.model_path = f.model;
  // --tasks is either a task file (a path that exists and is no directory — a pipe too — or a
  // name ending in .jsonl) or a list of generated task names.
  std::error_code ec;
  const bool is_path =
      std::filesystem::exists(f.tasks, ec) && !std::filesystem::is_directory(f.tasks, ec);
  if (is_path || f.tasks.ends_with(".jsonl")) {
    o.tasks_file = f.tasks;
  } else {
    o.grid.tasks = SplitList(f.tasks);
    if (o.grid.tasks.empty()) {
      throw Error("--tasks is empty: give task names (e.g. niah,drift) or a .jsonl task file");
    }
  }
  o.grid.lengths = f.lengths;
  o.grid.depths = f.depths;
  o.grid.samples = f.samples;
  o.grid.first_sample = f.first_sample;
  o.grid.seed = f.seed;
  {  // --shard K/N
    const size_t slash = f.shard.find('/');
    try {
      size_t used_k = 0, used_n = 0;
      if (slash == std::string::npos) throw std::invalid_argument("no slash");
      o.shard = std::stoi(f.shard.substr(0, slash), &used_k);
      o.shards = std::stoi(f.shard.substr(slash + 1), &used_n);
      if (used_k != slash || used_n != f.shard.size() - slash - 1) {
        throw std::invalid_argument("trailing text");
      }
    } catch (const std::exception&) {
      throw Error("--shard '" + f.shard + "': expected K/N, shard K of N (e.g. 0/2)");
    }
  }
  if (f.policies.empty()) {  // every policy but the diagnostics (recall-oracle)
    for (const std::string& name : PolicyNames()) {
      if (!IsDiagnosticPolicy(name)) o.settings.policies.push_back(name);
    }
  } else {
    o.settings.policies = SplitList(f.policies);
  }
  o.settings.budgets = f.budgets;
  KvFlags kv = f.kv;
  kv.policy = "full";
  o.settings.kv = kv.Resolve();
  o.settings.shadow = f.shadow;
  o.settings.fmm_horizon = f.fmm_horizon;
  o.settings.prefill_chunk = 256;
  o.settings.bounded = f.prefill_mode != "prompt-end";
  o.settings.prompt_end = f.prefill_mode != "bounded";
  if (o.settings.bounded && o.settings.kv.prefill_chunk <= 0) {
    throw Error("--prefill-mode " + f.prefill_mode +
                " routes between prompt chunks: give "
                "--kv-prefill-chunk > 0, or use --prefill-mode prompt-end");
  }
  o.settings.prompt_style = ParsePromptStyle(f.prompt_style);
  o.settings.protocol = ParseEvalProtocol(f.protocol);
  o.settings.scorer = ParseAnswerScorer(f.scorer).value();  // CLI11 checked the name
  o.settings.tag = f.tag;
  o.threads = f.threads;
  o.out_dir = f.out;
  o.overwrite = f.overwrite;
  o.resume = f.resume;
  o.rescore = f.rescore;
  o.command_line = CommandLine();
  o.build = BuildRevision();
  o.progress = !f.no_progress;
  o.export_tasks = f.export_tasks;
  return RunEval(o);
}

}  // namespace

std::function<int()> RegisterEval(CLI::App& app) {
  auto flags = std::make_shared<EvalFlags>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "long-context tasks for every KV policy at every budget (docs/results.md)");
  cmd->add_option("-m,--model", flags->model, "GGUF model file")->required();
  cmd->add_option("--tasks", flags->tasks,
                  "generated tasks (comma list of passkey, niah, multikey, vt, drift, longgen, "
                  "ppl, multivalue, multiquery, cwe, fwe, scbench, twofacts) or a task file "
                  "FILE.jsonl "
                  "(docs/evaluation.md, \"Task files\")")
      ->capture_default_str();
  cmd->add_option("--policies", flags->policies,
                  "comma list of policies (default: all but the recall-oracle diagnostic; full "
                  "always runs as the reference)");
  cmd->add_option("--budgets", flags->budgets, "budgets, fractions of the run's fp16 cache")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--lengths", flags->lengths, "prompt lengths in tokens (generated tasks)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--depths", flags->depths, "needle depths in [0, 1] (generated tasks)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--samples", flags->samples, "instances per (length, depth)")
      ->capture_default_str();
  cmd->add_option("--first-sample", flags->first_sample,
                  "index of the first sample (ids ...-sK): --samples N --first-sample K runs "
                  "samples K..K+N-1, more instances of a grid whose first K are run already "
                  "(each instance is the same whatever the others)")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "seed of the generated tasks")->capture_default_str();
  cmd->add_option("--shard", flags->shard,
                  "K/N: run only the K-th of N contiguous blocks of the instances (0-based), for "
                  "parallel processes; merge their rows with qevict report")
      ->capture_default_str();
  cmd->add_option("-t,--threads", flags->threads, "threads (default: all available cores)");
  cmd->add_flag("--shadow", flags->shadow,
                "measure missed attention mass and FMM against a full-cache shadow (2x decode)");
  cmd->add_option("--fmm-horizon", flags->fmm_horizon, "decode steps counted by FMM")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("-o,--out", flags->out, "output directory")->capture_default_str();
  cmd->add_flag("--overwrite", flags->overwrite,
                "start over when OUT/rows.jsonl already holds rows (they are lost); without it "
                "or --resume such a directory is refused");
  cmd->add_flag("--resume", flags->resume,
                "keep the rows already in OUT/rows.jsonl and run only the instances missing a "
                "row (same model, seed, policies, budgets, prefill modes, prompt style, protocol "
                "and scorer); the summary covers every row");
  cmd->add_flag("--rescore", flags->rescore,
                "run nothing: score the rows already in OUT/rows.jsonl again from their recorded "
                "outputs with this build's scorer (give the flags of the run that wrote them: "
                "its summary.json's command), and recompute summary.json and table.md");
  cmd->add_option("--tag", flags->tag,
                  "suffix for every row's policy name, policy[TAG] (ablation runs merged into one "
                  "report, e.g. --kv-bits 4 --tag bits4)");
  cmd->add_option("--prefill-mode", flags->prefill_mode,
                  "how compressed rows read the prompt: bounded (each row prefills in "
                  "--kv-prefill-chunk chunks, routing between them), prompt-end (one fp16 "
                  "prefill forked into every row, routed after the whole prompt, as the paper) "
                  "or both; rows say which in prefill_mode")
      ->capture_default_str()
      ->check(CLI::IsMember({"bounded", "prompt-end", "both"}));
  cmd->add_option("--prompt-style", flags->prompt_style,
                  "how questions are put to the model: chat (its chat template), completion "
                  "(raw \"Question: ...\\nAnswer: <answer prefix>\" text, for base models) or "
                  "auto (chat when the model has a chat template qevict knows); rows say which "
                  "in prompt_style")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "chat", "completion"}));
  cmd->add_option("--protocol", flags->protocol,
                  "where the cache is first compressed: question-in-prompt (after the context "
                  "and the first question) or context-only (after the context alone, every "
                  "question then asked as a later turn, as kvpress does); rows say which in "
                  "protocol")
      ->capture_default_str()
      ->check(CLI::IsMember({"question-in-prompt", "context-only"}));
  cmd->add_option("--scorer", flags->scorer,
                  "how answers are compared with the output: substring (the answer appears in "
                  "it), exact (its first line equals the answer, SQuAD-normalized) or f1 (SQuAD "
                  "token F1 of that line); a task file's \"scorer\" wins; rows say which in "
                  "scorer")
      ->capture_default_str()
      ->check(CLI::IsMember({"substring", "exact", "f1"}));
  cmd->add_flag("--no-progress", flags->no_progress, "no progress bar on stderr");
  cmd->add_option("--export-tasks", flags->export_tasks,
                  "write the generated instances (--tasks, --lengths, --depths, --samples, "
                  "--seed) to this task file (JSONL, docs/evaluation.md \"Task files\") and run "
                  "nothing: the same prompts for another tool, or for --tasks FILE");
  AddKvFlags(*cmd, flags->kv, {false, false, ""});  // policies and budgets: --policies, --budgets
  return [flags] { return Eval(*flags); };
}

}  // namespace qevict::cli
