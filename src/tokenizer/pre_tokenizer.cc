#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <cstdint>

#include "tokenizer/unicode.h"

namespace qevict {
namespace {

using unicode::CharClass;

// The text decoded once: per character its byte offset, code point and class. offset has one
// extra entry, the text size, so character i spans [offset[i], offset[i + 1]).
class CharSequence {
 public:
  explicit CharSequence(std::string_view text) {
    offset_.reserve(text.size() + 1);
    cp_.reserve(text.size());
    cls_.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      const unicode::DecodedChar c = unicode::DecodeUtf8(text, pos);
      offset_.push_back(static_cast<uint32_t>(pos));
      cp_.push_back(c.cp);
      // Invalid bytes decode to U+FFFD, which is class "other" as it should be.
      cls_.push_back(unicode::ClassOf(c.cp));
      pos += c.length;
    }
    offset_.push_back(static_cast<uint32_t>(text.size()));
  }

  size_t size() const { return cp_.size(); }
  char32_t cp(size_t i) const { return cp_[i]; }
  CharClass cls(size_t i) const { return cls_[i]; }
  size_t offset(size_t i) const { return offset_[i]; }

  bool Is(size_t i, size_t end, CharClass c) const { return i < end && cls_[i] == c; }
  bool IsNewline(size_t i) const { return cp_[i] == '\r' || cp_[i] == '\n'; }

  // End of the run of class c starting at i (i itself when text[i] is not of class c).
  size_t RunEnd(size_t i, size_t end, CharClass c) const {
    while (i < end && cls_[i] == c) ++i;
    return i;
  }

 private:
  std::vector<uint32_t> offset_;
  std::vector<char32_t> cp_;
  std::vector<CharClass> cls_;
};

char32_t FoldContractionLetter(char32_t cp, bool ignore_case) {
  if (!ignore_case) return cp;
  if (cp >= 'A' && cp <= 'Z') return cp - 'A' + 'a';
  if (cp == 0x17F) return 's';  // LATIN SMALL LETTER LONG S case-folds to 's'
  return cp;
}

// Length in characters of a contraction ('s 't 're 've 'm 'll 'd) at i, or 0.
size_t MatchContraction(const CharSequence& s, size_t i, size_t end, bool ignore_case) {
  if (s.cp(i) != '\'' || i + 1 >= end) return 0;
  const char32_t c1 = FoldContractionLetter(s.cp(i + 1), ignore_case);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (i + 2 >= end) return 0;
  const char32_t c2 = FoldContractionLetter(s.cp(i + 2), ignore_case);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

// \s+(?!\S)|\s+ at i, where text[i] is whitespace: the whole run when it ends the text, else
// the run minus its last character (which then prefixes the next word), but at least one.
size_t MatchTrailingWhitespace(const CharSequence& s, size_t i, size_t end) {
  const size_t run_end = s.RunEnd(i, end, CharClass::kWhitespace);
  if (run_end == end) return run_end;
  return run_end - i >= 2 ? run_end - 1 : i + 1;
}

// End of the GPT-2 regex match starting at character i.
size_t MatchGpt2(const CharSequence& s, size_t i, size_t end) {
  if (size_t n = MatchContraction(s, i, end, /*ignore_case=*/false)) return i + n;
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one class.
  const size_t first = (s.cp(i) == ' ' && i + 1 < end) ? i + 1 : i;
  const CharClass c = s.cls(first);
  if (c != CharClass::kWhitespace) return s.RunEnd(first, end, c);
  return MatchTrailingWhitespace(s, i, end);
}

// End of the Llama-3 (max_digits 3) or Qwen2 (max_digits 1) regex match starting at i.
size_t MatchLlama3(const CharSequence& s, size_t i, size_t end, size_t max_digits) {
  if (size_t n = MatchContraction(s, i, end, /*ignore_case=*/true)) return i + n;
  const CharClass c = s.cls(i);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c == CharClass::kLetter) return s.RunEnd(i, end, CharClass::kLetter);
  if (c != CharClass::kNumber && !s.IsNewline(i) && s.Is(i + 1, end, CharClass::kLetter)) {
    return s.RunEnd(i + 1, end, CharClass::kLetter);
  }
  // \p{N}{1,max_digits}
  if (c == CharClass::kNumber) {
    return std::min(s.RunEnd(i, end, CharClass::kNumber), i + max_digits);
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  const size_t first = (s.cp(i) == ' ' && s.Is(i + 1, end, CharClass::kOther)) ? i + 1 : i;
  if (s.cls(first) == CharClass::kOther) {
    size_t k = s.RunEnd(first, end, CharClass::kOther);
    while (k < end && s.IsNewline(k)) ++k;
    return k;
  }
  // `\s*[\r\n]+`: whitespace up to and including the run's last newline.
  const size_t run_end = s.RunEnd(i, end, CharClass::kWhitespace);
  for (size_t k = run_end; k > i; --k) {
    if (s.IsNewline(k - 1)) return k;
  }
  return MatchTrailingWhitespace(s, i, end);
}

// Splits characters [begin, end) with `match` and appends the words.
template <typename Matcher>
void SplitRange(const CharSequence& s, std::string_view text, size_t begin, size_t end,
                Matcher match, std::vector<std::string_view>* words) {
  for (size_t i = begin; i < end;) {
    const size_t next = match(s, i, end);
    words->push_back(text.substr(s.offset(i), s.offset(next) - s.offset(i)));
    i = next;
  }
}

void SplitSmolLm(const CharSequence& s, std::string_view text,
                 std::vector<std::string_view>* words) {
  size_t begin = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i < s.size() && s.cls(i) != CharClass::kNumber) continue;
    SplitRange(s, text, begin, i, MatchGpt2, words);
    if (i < s.size()) words->push_back(text.substr(s.offset(i), s.offset(i + 1) - s.offset(i)));
    begin = i + 1;
  }
}

}  // namespace

std::optional<PreTokenizer> PreTokenizerFromName(std::string_view name) {
  if (name == "default" || name == "gpt2" || name == "gpt-2") return PreTokenizer::kGpt2;
  if (name == "llama-bpe" || name == "llama3") return PreTokenizer::kLlama3;
  if (name == "qwen2") return PreTokenizer::kQwen2;
  if (name == "smollm") return PreTokenizer::kSmolLm;
  return std::nullopt;
}

const char* PreTokenizerName(PreTokenizer pre) {
  switch (pre) {
    case PreTokenizer::kGpt2:
      return "gpt2";
    case PreTokenizer::kLlama3:
      return "llama-bpe";
    case PreTokenizer::kQwen2:
      return "qwen2";
    case PreTokenizer::kSmolLm:
      return "smollm";
  }
  return "?";
}

void SplitWords(PreTokenizer pre, std::string_view text, std::vector<std::string_view>* words) {
  if (text.empty()) return;
  const CharSequence s(text);
  switch (pre) {
    case PreTokenizer::kGpt2:
      SplitRange(s, text, 0, s.size(), MatchGpt2, words);
      break;
    case PreTokenizer::kLlama3:
      SplitRange(s, text, 0, s.size(),
                 [](const CharSequence& cs, size_t i, size_t end) {
                   return MatchLlama3(cs, i, end, 3);
                 },
                 words);
      break;
    case PreTokenizer::kQwen2:
      SplitRange(s, text, 0, s.size(),
                 [](const CharSequence& cs, size_t i, size_t end) {
                   return MatchLlama3(cs, i, end, 1);
                 },
                 words);
      break;
    case PreTokenizer::kSmolLm:
      SplitSmolLm(s, text, words);
      break;
  }
}

}  // namespace qevict
