// Scoring of generated answers (../shared/docs/evaluation.md): a turn is correct when an accepted
// answer appears in the generated text, compared case-insensitively (ASCII) with whitespace
// normalized. A plain substring test: "1" appears in "12345".
#pragma once

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

// Any of turn.answers appears in output; all of them with turn.require_all. A turn without
// answers is never correct.
bool TurnCorrect(std::string_view output, const EvalTurn& turn);

}  // namespace qevict
