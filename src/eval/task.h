// One evaluation task instance: a long context, the questions asked about it (in one session),
// or a long generation / a teacher-forced text. Generated tasks (eval/task_generators.h) and
// user task files (eval/task_file.h) both produce these; the runner (eval/instance_runner.h,
// driven by eval/eval_run.h) turns them into prompts, runs every policy at every budget and
// scores the answers.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qevict {

enum class TaskKind {
  kQuestions,   // context, then turns of question -> generated answer, scored against answers
  kLongGen,     // a short prompt and a long generation, scored against the full cache's output
  kPerplexity,  // context, then scored_text teacher-forced: NLL and KL to the full cache
};

// How one answer is compared with the generated text (eval/answer_match.h, AnswerScore), giving
// the answer a score in [0, 1].
enum class AnswerScorer {
  kSubstring,  // 1 when the answer appears in the output (case-insensitive, whitespace
               // normalized), else 0
  kExact,      // 1 when the output's first line equals the answer, both SQuAD-normalized, else 0
  kF1,         // SQuAD's token F1 between the output's first line and the answer
};

// How a turn's answers' scores make the turn's score (eval/answer_match.h, TurnScore). Under
// the substring scorer an answer scores 1 when it "appears" in the output.
enum class TurnScoring {
  kAny,    // the best answer's score: 1 when any accepted answer appears, else 0 (alternatives
           // of one answer)
  kAll,    // the worst answer's score: 1 when every answer appears, else 0
  kShare,  // the answers' mean score: the share of them that appear (RULER's string_match_all)
};

struct EvalTurn {
  std::string question;
  // Accepted answers, scored by `scoring`: a turn's score is in [0, 1], and the turn is correct
  // when its score is 1.
  std::vector<std::string> answers;
  TurnScoring scoring = TurnScoring::kAny;
  // Completion-style prompts only (eval/chat_turns.h, PromptStyle::kCompletion): the start of
  // the answer the prompt ends with, which the model continues ("The special magic number for
  // KEY is"); "" for none. Chat-style prompts ignore it. ({}: turns written {question, answers}
  // may leave it out without -Wmissing-field-initializers.)
  std::string answer_prefix{};
};

struct EvalTask {
  std::string task;  // generator name ("niah", ...) or "file" for --tasks
  std::string id;    // unique within a run
  TaskKind kind = TaskKind::kQuestions;
  // kQuestions: the text before the first question (the first prompt is context, a blank line,
  // then turns[0].question: eval/chat_turns.h). kLongGen: the whole prompt. kPerplexity: the
  // conditioning prefix fed as the prompt.
  std::string context;
  std::vector<EvalTurn> turns;  // kQuestions: at least one
  std::string scored_text;      // kPerplexity: the continuation that is teacher-forced and scored
  int max_new_tokens = 32;      // per turn (kLongGen: the length of the generation)
  int64_t target_tokens = 0;    // requested context length in tokens (0: not applicable)
  double depth = -1.0;          // needle depth in [0, 1] (-1: not applicable)
  // A task file's "scorer" for every turn of this task; nullopt: the run's --scorer.
  std::optional<AnswerScorer> scorer{};
};

// Token count of a text as the evaluated model's tokenizer sees it (no BOS, no template).
using TokenCounter = std::function<int64_t(std::string_view text)>;

}  // namespace qevict
