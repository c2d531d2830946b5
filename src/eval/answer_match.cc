// Answer matching (answer_match.h).
#include "eval/answer_match.h"

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

double TurnScore(std::string_view output, const EvalTurn& turn) {
  if (turn.answers.empty()) return 0.0;
  const std::string normalized = NormalizeForMatch(output);
  size_t found = 0;
  for (const std::string& answer : turn.answers) found += AppearsNormalized(normalized, answer);
  switch (turn.scoring) {
    case TurnScoring::kAny: return found > 0 ? 1.0 : 0.0;
    case TurnScoring::kAll: return found == turn.answers.size() ? 1.0 : 0.0;
    case TurnScoring::kShare:
      return static_cast<double>(found) / static_cast<double>(turn.answers.size());
  }
  return 0.0;
}

bool TurnCorrect(std::string_view output, const EvalTurn& turn) {
  return TurnScore(output, turn) == 1.0;
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

}  // namespace qevict
