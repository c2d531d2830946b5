// Fuzz target "task_file": arbitrary bytes as a task file for `qevict eval --tasks`
// (eval/task_file.h), parsed with the default limits and with small ones (so the limit paths are
// reached by short inputs), then the accepted answers run through the matcher
// (eval/answer_match.h). Whatever the bytes: no exception, every accepted task satisfies the
// schema and the limits, every error has a line inside the file and a short, valid UTF-8
// message, and an accepted answer is found in a text that contains it.
//
// Input: the file, as is (the seeds in fuzz/corpus/task_file/ are plain JSONL files).
//
// Links: qevict_eval
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "eval/answer_match.h"
#include "eval/squad_match.h"
#include "eval/task_file.h"
#include "fuzz/fuzz_target.h"
#include "tokenizer/unicode.h"

namespace qevict::fuzz {
namespace task_file_target {

inline bool ValidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const unicode::DecodedChar c = unicode::DecodeUtf8(s, pos);
    if (c.cp == 0xFFFD && c.length == 1) return false;
    pos += c.length;
  }
  return true;
}

inline void CheckTurnMatching(const EvalTurn& turn) {
  for (const std::string& answer : turn.answers) {
    const std::string normalized = NormalizeForMatch(answer);
    Require(NormalizeForMatch(normalized) == normalized, "NormalizeForMatch is not idempotent");
    Require(normalized.size() <= answer.size(), "normalizing made an answer longer");
    const std::string output = turn.question + "\n " + answer + "\t.";
    Require(!normalized.empty(), "a blank answer was accepted");
    Require(AnswerAppears(output, answer), "an answer is not found in a text that contains it");
    // `output` holds this answer: an any turn is correct, a share turn scores at least its
    // share (an all turn may still miss the others).
    // The SQuAD scorers: an answer on one line scores 1 against itself unless it normalizes
    // to nothing; every score is in [0, 1].
    const std::string squad = SquadNormalize(answer);
    Require(SquadNormalize(squad) == squad, "SquadNormalize is not idempotent");
    if (answer.find('\n') == std::string::npos) {
      const double self = squad.empty() ? 0.0 : 1.0;
      Require(AnswerScore(answer, answer, AnswerScorer::kExact) == self &&
                  AnswerScore(answer, answer, AnswerScorer::kF1) == self,
              "an answer does not score 1 against itself");
    }
    const double f1 = AnswerScore(output, answer, AnswerScorer::kF1);
    Require(f1 >= 0.0 && f1 <= 1.0, "F1 outside [0, 1]");
    if (turn.scoring == TurnScoring::kAny) {
      Require(TurnCorrect(output, turn), "TurnCorrect misses an answer");
    } else if (turn.scoring == TurnScoring::kShare) {
      Require(TurnScore(output, turn) * static_cast<double>(turn.answers.size()) >= 1.0 - 1e-9,
              "TurnScore misses an answer");
    }
  }
  std::string all;  // every answer: a full score in every mode
  for (const std::string& answer : turn.answers) all += answer + " | ";
  Require(TurnScore(all, turn) == 1.0 && TurnCorrect(all, turn), "a text with every answer "
          "does not score 1");
  const double none = TurnScore("", turn);
  Require(none == 0.0, "an empty output scores above 0");
}

inline void CheckResult(std::string_view bytes, const TaskFileResult& r,
                        const TaskFileLimits& limits) {
  const int64_t lines = std::count(bytes.begin(), bytes.end(), '\n') + 1;
  Require(static_cast<int64_t>(r.tasks.size() + r.errors.size()) <= lines + 1,
          "more tasks and errors than lines");
  Require(static_cast<int64_t>(r.tasks.size()) <= std::max<int64_t>(limits.max_tasks, 0),
          "more tasks than max_tasks");
  std::set<std::string_view> ids;
  for (const EvalTask& t : r.tasks) {
    Require(t.task == "file" && t.kind == TaskKind::kQuestions, "task name or kind");
    Require(!t.id.empty() && t.id.size() <= kTaskIdMaxBytes, "id empty or too long");
    Require(std::none_of(t.id.begin(), t.id.end(),
                         [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; }),
            "control character in an accepted id");
    Require(ids.insert(t.id).second, "duplicate id accepted");
    Require(ValidUtf8(t.id) && ValidUtf8(t.context), "invalid UTF-8 in id or context");
    Require(t.max_new_tokens >= 1 && t.max_new_tokens <= limits.max_new_tokens,
            "max_new_tokens outside [1, limit]");
    Require(!t.scorer || *t.scorer == AnswerScorer::kSubstring ||
                *t.scorer == AnswerScorer::kExact || *t.scorer == AnswerScorer::kF1,
            "scorer out of range");
    Require(!t.turns.empty() && static_cast<int64_t>(t.turns.size()) <= limits.max_turns,
            "turn count outside [1, max_turns]");
    for (const EvalTurn& turn : t.turns) {
      Require(!turn.question.empty() && ValidUtf8(turn.question), "bad question accepted");
      Require(turn.scoring == TurnScoring::kAny || turn.scoring == TurnScoring::kAll ||
                  turn.scoring == TurnScoring::kShare,
              "scoring out of range");
      Require(ValidUtf8(turn.answer_prefix) &&
                  static_cast<int64_t>(turn.answer_prefix.size()) <=
                      limits.max_answer_prefix_bytes,
              "bad answer_prefix accepted");
      Require(!turn.answers.empty() &&
                  static_cast<int64_t>(turn.answers.size()) <= limits.max_answers,
              "answer count outside [1, max_answers]");
      for (const std::string& a : turn.answers) {
        Require(!a.empty() && ValidUtf8(a), "bad answer accepted");
      }
      CheckTurnMatching(turn);
    }
    Require(NormalizeForMatch(t.context).size() <= t.context.size(), "normalized context grew");
  }
  int64_t previous = 0;
  for (const TaskFileError& e : r.errors) {
    Require(e.line >= previous && e.line <= lines, "error line out of order or past the file");
    previous = e.line;
    Require(!e.message.empty() && e.message.size() <= 512, "error message empty or too long");
    Require(ValidUtf8(e.message), "error message is not valid UTF-8");
    (void)nlohmann::json(e.message).dump();  // what a results file would do with it
  }
}

}  // namespace task_file_target

inline int FuzzTaskFileBytes(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const TaskFileLimits defaults;
  task_file_target::CheckResult(bytes, ParseTaskFile(bytes, defaults), defaults);
  TaskFileLimits small;
  small.max_turns = 2;
  small.max_answers = 2;
  small.max_new_tokens = 64;
  small.max_answer_prefix_bytes = 16;
  small.max_tasks = 3;
  small.max_line_bytes = 256;
  small.max_errors = 4;
  task_file_target::CheckResult(bytes, ParseTaskFile(bytes, small), small);
  return 0;
}

inline const bool kTaskFileTargetRegistered = RegisterFuzzTarget("task_file", &FuzzTaskFileBytes);

}  // namespace qevict::fuzz
