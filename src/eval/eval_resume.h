// What `qevict eval --out DIR` does with rows an earlier run left in DIR/rows.jsonl: it refuses
// to touch them unless told to start over (--overwrite) or to resume (--resume: keep them and
// run only the instances that miss a row). An instance's rows are known by their RowKey
// (eval/eval_rows.h: model, seed, id, policy, budget, prefill mode, prompt style, protocol and
// scorer), so rows of other settings never count as done.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/instance_runner.h"
#include "eval/task.h"

namespace qevict {

// Throws qevict::Error when both are set, or when rows_path exists, is not empty and neither is
// set (the message names the file and both ways out).
void CheckEarlierRows(const std::string& rows_path, bool overwrite, bool resume);

// The rows of an earlier run, as written.
struct EarlierRows {
  std::vector<std::string> lines;  // one per row, in file order, without the line break
  std::vector<nlohmann::json> rows;
  std::unordered_set<std::string> keys;  // RowKey of every row
  // The last line was cut short (a run killed while writing it) and is not among the rows.
  bool torn_tail = false;
};

// Reads rows_path (nothing when it does not exist). A last line without a line break that is
// not a row is a torn write and is dropped; any other line that is not a row throws
// qevict::Error ("FILE:LINE: message").
EarlierRows ReadEarlierRows(const std::string& rows_path);

// The RowKey of every row RunInstance writes for the task under `settings` (prompt style
// resolved), in a run of the model named model_name with --seed seed.
std::vector<std::string> InstanceRowKeys(const EvalSettings& settings, const EvalTask& task,
                                         const std::string& model_name, uint64_t seed);

// What --resume does with a run's instances (after --shard's selection).
struct ResumePlan {
  std::vector<size_t> to_run;             // indices of the instances missing a row
  int64_t done = 0;                       // instances that have every row: skipped
  std::vector<std::string> kept_lines;    // the earlier rows kept, as written
  std::vector<nlohmann::json> kept_rows;  // the same, parsed
  // Rows of instances that run again (an instance left unfinished): dropped from the file so
  // that the new run's rows do not repeat them.
  int64_t dropped = 0;
};
ResumePlan PlanResume(const EarlierRows& earlier, const std::vector<EvalTask>& tasks,
                      const EvalSettings& settings, const std::string& model_name,
                      uint64_t seed);

// Replaces rows_path by the given lines (each followed by a line break), through a temporary
// file renamed over it. Throws qevict::Error when it cannot.
void RewriteRows(const std::string& rows_path, const std::vector<std::string>& lines);

}  // namespace qevict
