// SQuAD-style normalization, exact match and token F1 (squad_match.h).
#include "eval/squad_match.h"

#include <map>

namespace qevict {
namespace {

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool IsAsciiPunctuation(char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
         (c >= '{' && c <= '~');
}

bool IsArticle(std::string_view word) { return word == "a" || word == "an" || word == "the"; }

}  // namespace

std::vector<std::string> SquadWords(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  auto finish = [&] {
    if (!word.empty() && !IsArticle(word)) words.push_back(word);
    word.clear();
  };
  for (const char c : text) {
    if (IsAsciiSpace(c)) {
      finish();
    } else if (!IsAsciiPunctuation(c)) {
      word += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    }
  }
  finish();
  return words;
}

std::string SquadNormalize(std::string_view text) {
  std::string out;
  for (const std::string& word : SquadWords(text)) {
    if (!out.empty()) out += ' ';
    out += word;
  }
  return out;
}

std::string_view FirstNonBlankLine(std::string_view text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    for (const char c : line) {
      if (!IsAsciiSpace(c)) return line;
    }
    start = end + 1;
  }
  return {};
}

bool SquadExactMatch(std::string_view output, std::string_view answer) {
  const std::string normalized = SquadNormalize(answer);
  return !normalized.empty() && SquadNormalize(output) == normalized;
}

double SquadTokenF1(std::string_view output, std::string_view answer) {
  const std::vector<std::string> predicted = SquadWords(output), expected = SquadWords(answer);
  if (predicted.empty() || expected.empty()) return 0.0;
  std::map<std::string_view, int> left;  // expected words not matched yet
  for (const std::string& w : expected) ++left[w];
  size_t shared = 0;
  for (const std::string& w : predicted) {
    const auto it = left.find(w);
    if (it != left.end() && it->second > 0) {
      --it->second;
      ++shared;
    }
  }
  return 2.0 * static_cast<double>(shared) /
         static_cast<double>(predicted.size() + expected.size());
}

}  // namespace qevict
