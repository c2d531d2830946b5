// Scoring of generated answers (../shared/docs/evaluation.md). Each accepted answer gets a score
// in [0, 1] from the scorer (AnswerScorer):
//  - substring (the default): the answer appears in the generated text, a substring of it
//    compared case-insensitively (ASCII) with whitespace normalized, numbers whole: an answer
//    that begins (ends) with a digit does not match right after (before) another digit, so
//    "2200" does not appear in "22000" nor "38" in "381", while "melon" appears in "melons"
//    (RULER's string match with the one exception that made it count wrong numbers): 1, else 0;
//  - exact: the output's first non-blank line equals the answer once both are SQuAD-normalized
//    (squad_match.h): 1, else 0;
//  - f1: SQuAD's token F1 between that line and the answer.
// A turn's score in [0, 1] combines its answers' scores by its TurnScoring (any: the best,
// all: the worst, share: the mean).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "eval/task.h"

namespace qevict {

// ASCII letters lowercased; every run of whitespace (space, \t, \n, \r, \f, \v) becomes one
// space; leading and trailing whitespace removed. Other bytes (UTF-8 included) are kept as is.
std::string NormalizeForMatch(std::string_view text);

// Whether the normalized answer is a substring of the normalized output with its numbers whole
// (above: no digit right before a leading digit or right after a trailing one). An answer that
// normalizes to nothing (empty or all whitespace) never matches.
bool AnswerAppears(std::string_view output, std::string_view answer);

// The score in [0, 1] of one answer against the output, by `scorer` (above).
double AnswerScore(std::string_view output, std::string_view answer, AnswerScorer scorer);

// The turn's score in [0, 1] from its answers' AnswerScores: kAny the highest (substring: 1 when
// any of turn.answers appears in output, else 0), kAll the lowest (1 when all of them do), kShare
// their mean (the number that appear divided by the number of answers; answers listed twice
// count twice). A turn without answers scores 0.
double TurnScore(std::string_view output, const EvalTurn& turn,
                 AnswerScorer scorer = AnswerScorer::kSubstring);

// TurnScore(output, turn, scorer) == 1.
bool TurnCorrect(std::string_view output, const EvalTurn& turn,
                 AnswerScorer scorer = AnswerScorer::kSubstring);

// "any", "all", "share" (the task-file spelling), and back; nullopt for anything else.
std::string_view TurnScoringName(TurnScoring scoring);
std::optional<TurnScoring> ParseTurnScoring(std::string_view name);

// "substring", "exact", "f1" (--scorer and the task-file spelling), and back; nullopt for
// anything else.
std::string_view AnswerScorerName(AnswerScorer scorer);
std::optional<AnswerScorer> ParseAnswerScorer(std::string_view name);

}  // namespace qevict
