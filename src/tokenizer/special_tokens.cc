#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace qevict {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab, bool user_defined_only) {
  for (TokenId id = 0; id < vocab.size(); ++id) {
    const TokenType type = vocab.type(id);
    const bool wanted = type == TokenType::kUserDefined ||
                        (!user_defined_only &&
                         (type == TokenType::kControl || type == TokenType::kUnknown));
    if (!wanted) continue;
    const std::string_view text = vocab.tokens[id];
    if (text.empty()) continue;
    by_first_byte_[static_cast<unsigned char>(text[0])].push_back({text, id});
    ++count_;
  }
  for (std::vector<Candidate>& candidates : by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& a, const Candidate& b) {
                       return a.text.size() > b.text.size();
                     });
  }
}

const SpecialTokenMatcher::Candidate* SpecialTokenMatcher::LongestMatchAt(std::string_view text,
                                                                          size_t pos) const {
  const std::string_view rest = text.substr(pos);
  for (const Candidate& c : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
    if (rest.starts_with(c.text)) return &c;
  }
  return nullptr;
}

void SpecialTokenMatcher::Split(std::string_view text,
                                std::vector<TextFragment>* fragments) const {
  size_t plain_begin = 0;
  for (size_t pos = 0; pos < text.size();) {
    const Candidate* match = LongestMatchAt(text, pos);
    if (match == nullptr) {
      ++pos;
      continue;
    }
    if (pos > plain_begin) fragments->push_back({text.substr(plain_begin, pos - plain_begin)});
    fragments->push_back({match->text, match->id});
    pos += match->text.size();
    plain_begin = pos;
  }
  if (plain_begin < text.size()) fragments->push_back({text.substr(plain_begin)});
}

}  // namespace qevict
