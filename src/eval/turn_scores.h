// The scores of a row's question turns from their recorded outputs: one function for a row just
// generated (eval/instance_runner.h) and for rows scored again (`qevict eval --rescore`, after
// the scorer changed: eval/eval_run.h), so both give the same numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/task.h"

namespace qevict {

// Sets "score" and "correct" of turn_rows[t] (an array of objects with "output") from
// task.turns[t] under `scorer` (answer_match.h) and returns the mean score, the row's accuracy.
// Throws qevict::Error when the counts differ.
double ScoreTurns(nlohmann::json& turn_rows, const EvalTask& task, AnswerScorer scorer);

struct RescoreCount {
  int64_t rows = 0;          // question rows scored again
  int64_t turns = 0;         // their turns
  int64_t changed_turns = 0; // turns whose score changed
  int64_t changed_rows = 0;  // rows whose accuracy changed
};

// Scores every question row of `rows` again with its recorded scorer ("scorer", substring when
// absent) against the task of the same id in `tasks`, in place; other rows (perplexity,
// long generation) are left as they are. Throws qevict::Error naming the id when a question
// row's task is not among `tasks` or has another number of turns.
RescoreCount RescoreRows(std::vector<nlohmann::json>& rows, const std::vector<EvalTask>& tasks);

}  // namespace qevict
