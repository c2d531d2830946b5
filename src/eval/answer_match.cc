// Answer matching (answer_match.h).
#include "eval/answer_match.h"

#include <algorithm>

#include "eval/squad_match.h"

namespace qevict {
namespace {

bool IsMatchSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool AppearsNormalized(std::string_view normalized_output, std::string_view answer) {
  const std::string needle = NormalizeForMatch(answer);
  return !needle.empty() && normalized_output.find(needle) != std::string_view::npos;
}

}  // namespace

std::string NormalizeForMatch(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (const char c : text) {
    if (IsMatchSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

bool AnswerAppears(std::string_view output, std::string_view answer) {
  return AppearsNormalized(NormalizeForMatch(output), answer);
}

double AnswerScore(std::string_view output, std::string_view answer, AnswerScorer scorer) {
  switch (scorer) {
    case AnswerScorer::kSubstring: return AnswerAppears(output, answer) ? 1.0 : 0.0;
    case AnswerScorer::kExact:
      return SquadExactMatch(FirstNonBlankLine(output), answer) ? 1.0 : 0.0;
    case AnswerScorer::kF1: return SquadTokenF1(FirstNonBlankLine(output), answer);
  }
  return 0.0;
}

double TurnScore(std::string_view output, const EvalTurn& turn, AnswerScorer scorer) {
  if (turn.answers.empty()) return 0.0;
  // The substring scorer normalizes the output once for every answer.
  const std::string normalized =
      scorer == AnswerScorer::kSubstring ? NormalizeForMatch(output) : std::string();
  double best = 0.0, worst = 1.0, sum = 0.0;
  for (const std::string& answer : turn.answers) {
    const double score = scorer == AnswerScorer::kSubstring
                             ? (AppearsNormalized(normalized, answer) ? 1.0 : 0.0)
                             : AnswerScore(output, answer, scorer);
    best = std::max(best, score);
    worst = std::min(worst, score);
    sum += score;
  }
  switch (turn.scoring) {
    case TurnScoring::kAny: return best;
    case TurnScoring::kAll: return worst;
    case TurnScoring::kShare: return sum / static_cast<double>(turn.answers.size());
  }
  return 0.0;
}

bool TurnCorrect(std::string_view output, const EvalTurn& turn, AnswerScorer scorer) {
  return TurnScore(output, turn, scorer) == 1.0;
}

std::string_view TurnScoringName(TurnScoring scoring) {
  switch (scoring) {
    case TurnScoring::kAny: return "any";
    case TurnScoring::kAll: return "all";
    case TurnScoring::kShare: return "share";
  }
  return "any";
}

std::optional<TurnScoring> ParseTurnScoring(std::string_view name) {
  for (const TurnScoring s : {TurnScoring::kAny, TurnScoring::kAll, TurnScoring::kShare}) {
    if (name == TurnScoringName(s)) return s;
  }
  return std::nullopt;
}

std::string_view AnswerScorerName(AnswerScorer scorer) {
  switch (scorer) {
    case AnswerScorer::kSubstring: return "substring";
    case AnswerScorer::kExact: return "exact";
    case AnswerScorer::kF1: return "f1";
  }
  return "substring";
}

std::optional<AnswerScorer> ParseAnswerScorer(std::string_view name) {
  for (const AnswerScorer s : {AnswerScorer::kSubstring, AnswerScorer::kExact, AnswerScorer::kF1}) {
    if (name == AnswerScorerName(s)) return s;
  }
  return std::nullopt;
}

}  // namespace qevict
