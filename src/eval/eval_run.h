// `qevict eval`: generated tasks (eval/task_generators.h) or a user task file
// (eval/task_file.h), every policy at every budget on the same engine (eval/instance_runner.h),
// written to an output directory as it goes:
//   rows.jsonl    one row per (task instance × policy × budget × prefill mode), flushed after
//                 each row; every row names its model (the GGUF file's basename) and the --seed
//   summary.json  the command and the grid, then (format 2, eval/eval_report.h) the cells:
//                 means with 95% intervals per (model, task, prompt style, protocol, scorer,
//                 prefill mode, policy, budget), pooled and per length and depth; and the
//                 comparisons of every pair of policies on their shared instances, with a
//                 verdict
//   table.md      policies × budgets per (model, task, prompt style, protocol, scorer, prefill
//                 mode), each value with its interval (also printed)
// `qevict report` (eval/report_run.h) recomputes summary.json and table.md from saved rows with
// the same functions. Pictures and docs/results.md are rendered from these by
// scripts/plot_eval.py and scripts/render_results.py.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/instance_runner.h"
#include "eval/task_generators.h"

namespace qevict {

struct EvalOptions {
  std::string model_path;
  std::string tasks_file;    // non-empty: run these user tasks instead of generated ones
  TaskGrid grid;             // generated tasks
  EvalSettings settings;
  int threads = 0;           // 0: every core
  std::string out_dir = "eval-out";
  // When out_dir/rows.jsonl already holds rows (eval/eval_resume.h): start over (overwrite), or
  // keep them and run only the instances missing a row (resume); with neither, RunEval throws.
  bool overwrite = false;
  bool resume = false;
  std::string command_line;  // recorded in summary.json
  // The source revision of the binary (tools/build_revision.h), recorded in every row and in
  // summary.json: rows resumed across builds keep the build that made each. Empty: not recorded.
  std::string build;
  bool progress = true;
  // Shard `shard` of `shards`: only that contiguous block of the instances (after skipping those
  // that do not fit), so that a grid can run as several processes whose rows `qevict report`
  // merges. 0 of 1: every instance.
  int shard = 0, shards = 1;
  // Tokens kept free for the question, the template and the answer when a question task is
  // generated for a --lengths value: its context is filled to length - reserve.
  int64_t question_reserve = 128;
  // Score the rows already in out_dir/rows.jsonl again from their recorded outputs, against
  // this command's instances (give the run's own flags), and run nothing: rows.jsonl is
  // rewritten with the current scorer's scores (eval/turn_scores.h), summary.json's cells,
  // comparisons and table.md recomputed, and summary.json says it was ("rescored").
  bool rescore = false;
  // Non-empty: write the generated instances to this task file (task_file.h, TaskFileLine) and
  // run nothing; the file then runs here with --tasks FILE or in another tool.
  std::string export_tasks;
};

// Runs the evaluation; returns the process exit code. Throws qevict::Error for bad options.
int RunEval(const EvalOptions& options);

}  // namespace qevict
