// User task files for `qevict eval --tasks FILE.jsonl` (../shared/docs/evaluation.md): one JSON
// object per line,
//   {"id": "...", "context": "...",
//    "turns": [{"question": "...", "answers": ["..."], "answer_prefix": "...",
//               "scoring": "any"}, ...],
//    "max_new_tokens": 32, "scorer": "substring"}
// parsed into EvalTasks (task "file", kind kQuestions). The file is untrusted input
// (docs/security.md): a malformed line becomes a TaskFileError with its line number and is
// skipped; nothing in the content makes the parser throw, crash or allocate more than a small
// multiple of the file's size.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "eval/task.h"

namespace qevict {

struct TaskFileError {
  int64_t line;  // from 1; 0 for the file as a whole (ParseTaskFile on bytes over max_file_bytes)
  std::string message;  // valid UTF-8, at most a few hundred bytes, names the field
};

struct TaskFileResult {
  std::vector<EvalTask> tasks;        // in file order
  std::vector<TaskFileError> errors;  // in line order
};

struct TaskFileLimits {
  int64_t max_file_bytes = 256 << 20;
  int64_t max_line_bytes = 64 << 20;
  int max_turns = 64;       // per task
  int max_answers = 64;     // per turn
  int max_new_tokens = 4096;
  int64_t max_answer_prefix_bytes = 1000;  // per turn
  int64_t max_tasks = 100000;  // the line that would add one more is an error; parsing stops
  // Errors listed one by one; the ones after that are counted in one last error.
  int64_t max_errors = 1000;
};

inline constexpr size_t kTaskIdMaxBytes = 200;

// Rules: blank lines (spaces, tabs, CR, FF, VT only) are skipped; a trailing "\r" is dropped
// (CRLF files); a UTF-8 BOM at the start of the file is skipped. A line is rejected, with an error
// naming the field, when it is over max_line_bytes, not valid JSON (invalid UTF-8 included), not
// an object, has an unknown or repeated key, misses id / context / turns, has a field of the
// wrong type or out of its limits (id: non-empty string of at most kTaskIdMaxBytes bytes, no
// control characters; context: string, may be empty; turns: 1..max_turns objects of a non-empty
// "question" string, 1..max_answers "answers" strings, each with something other than
// whitespace (a blank answer could never match), an optional "answer_prefix" string of at
// most max_answer_prefix_bytes bytes ("" or absent: none) and an optional "scoring" string,
// "any" (the default), "all" or "share" (TurnScoring); max_new_tokens: optional integer in
// [1, max_new_tokens], default 32; scorer: optional string, "substring", "exact" or "f1"
// (AnswerScorer; absent: the run's --scorer)), or repeats the id of an earlier accepted task.
// Never throws for bad content.
TaskFileResult ParseTaskFile(std::string_view bytes, const TaskFileLimits& limits = {});

// Reads the file and parses it. Throws qevict::Error when the file cannot be read, is a
// directory, or is over limits.max_file_bytes (checked before reading). Problems with the
// content are returned as errors, as by ParseTaskFile.
TaskFileResult ReadTaskFile(const std::string& path, const TaskFileLimits& limits = {});

// One line of a task file (no newline) that ParseTaskFile reads back as `task` (id, context,
// turns with their answer prefixes and scoring, max_new_tokens, scorer; the generator's name,
// length and depth are not fields of the format: the id names them). `qevict eval
// --export-tasks` writes generated instances this way, so that another tool (transformers,
// kvpress) can run the very prompts a published table used. Throws qevict::Error for a task the
// format cannot hold (longgen, ppl) or one the parser would reject (an empty id, no turns, a
// blank answer, a field over TaskFileLimits' defaults).
std::string TaskFileLine(const EvalTask& task);

}  // namespace qevict
