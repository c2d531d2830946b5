// Answer matching (answer_match.h).
#include "eval/answer_match.h"

#include <algorithm>
#include <array>
#include <utility>

#include "eval/squad_match.h"

namespace qevict {
namespace {

bool IsMatchSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Some occurrence of the normalized answer whose numbers are whole: a leading digit not right
// after a digit of the output, a trailing one not right before one.
bool AppearsNormalized(std::string_view normalized_output, std::string_view answer) {
  const std::string needle = NormalizeForMatch(answer);
  if (needle.empty()) return false;
  const bool digit_first = IsDigit(needle.front()), digit_last = IsDigit(needle.back());
  for (size_t at = normalized_output.find(needle); at != std::string_view::npos;
       at = normalized_output.find(needle, at + 1)) {
    const size_t end = at + needle.size();
    const bool cut_before = digit_first && at > 0 && IsDigit(normalized_output[at - 1]);
    const bool cut_after = digit_last && end < normalized_output.size() &&
                           IsDigit(normalized_output[end]);
    if (!cut_before && !cut_after) return true;
  }
  return false;
}

// The spellings of an enum's values (task files, flags, rows), the first one the default.
template <typename Enum>
using NameTable = std::array<std::pair<Enum, std::string_view>, 3>;

constexpr NameTable<TurnScoring> kScoringNames = {
    {{TurnScoring::kAny, "any"}, {TurnScoring::kAll, "all"}, {TurnScoring::kShare, "share"}}};
constexpr NameTable<AnswerScorer> kScorerNames = {{{AnswerScorer::kSubstring, "substring"},
                                                   {AnswerScorer::kExact, "exact"},
                                                   {AnswerScorer::kF1, "f1"}}};

template <typename Enum>
std::string_view NameOf(const NameTable<Enum>& table, Enum value) {
  for (const auto& [e, name] : table) {
    if (e == value) return name;
  }
  return table.front().second;
}

template <typename Enum>
std::optional<Enum> Named(const NameTable<Enum>& table, std::string_view name) {
  for (const auto& [e, spelled] : table) {
    if (spelled == name) return e;
  }
  return std::nullopt;
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

std::string_view TurnScoringName(TurnScoring scoring) { return NameOf(kScoringNames, scoring); }

std::optional<TurnScoring> ParseTurnScoring(std::string_view name) {
  return Named(kScoringNames, name);
}

std::string_view AnswerScorerName(AnswerScorer scorer) { return NameOf(kScorerNames, scorer); }

std::optional<AnswerScorer> ParseAnswerScorer(std::string_view name) {
  return Named(kScorerNames, name);
}

}  // namespace qevict
