// Scoring of generated answers (../shared/docs/evaluation.md): an answer appears in the generated
// text when it is a substring of it, compared case-insensitively (ASCII) with whitespace
// normalized (a plain substring test: "1" appears in "12345"); a turn's score in [0, 1] follows
// from which of its answers appear and its TurnScoring (any, all, share).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "eval/task.h"

namespace qevict {

// ASCII letters lowercased; every run of whitespace (space, \t, \n, \r, \f, \v) becomes one
// space; leading and trailing whitespace removed. Other bytes (UTF-8 included) are kept as is.
std::string NormalizeForMatch(std::string_view text);

// Whether the normalized answer is a substring of the normalized output. An answer that
// normalizes to nothing (empty or all whitespace) never matches.
bool AnswerAppears(std::string_view output, std::string_view answer);

// The turn's score in [0, 1]: kAny 1 when any of turn.answers appears in output (else 0); kAll 1
// when all of them do; kShare the number that appear divided by the number of answers (answers
// listed twice count twice). A turn without answers scores 0.
double TurnScore(std::string_view output, const EvalTurn& turn);

// TurnScore(output, turn) == 1.
bool TurnCorrect(std::string_view output, const EvalTurn& turn);

// "any", "all", "share" (the task-file spelling), and back; nullopt for anything else.
std::string_view TurnScoringName(TurnScoring scoring);
std::optional<TurnScoring> ParseTurnScoring(std::string_view name);

}  // namespace qevict
