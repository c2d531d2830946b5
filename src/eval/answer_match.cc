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

bool TurnCorrect(std::string_view output, const EvalTurn& turn) {
  if (turn.answers.empty()) return false;
  const std::string normalized = NormalizeForMatch(output);
  for (const std::string& answer : turn.answers) {
    const bool appears = AppearsNormalized(normalized, answer);
    if (turn.require_all && !appears) return false;
    if (!turn.require_all && appears) return true;
  }
  return turn.require_all;
}

}  // namespace qevict
