// Finds special tokens (control, user-defined and unknown tokens such as "<|im_start|>" or
// "<s>") written literally in text, so they can be encoded as their ids and the text between
// them tokenized normally. At each position the longest matching token wins.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace qevict {

// A piece of the input: literal text to tokenize (token == -1) or a matched special token.
struct TextFragment {
  std::string_view text;
  TokenId token = -1;
};

class SpecialTokenMatcher {
 public:
  // Every control, user-defined and unknown token; or, with user_defined_only, the user-defined
  // ones alone (llama.cpp matches those even when special tokens are not parsed: Gemma's
  // whitespace runs and HTML tags).
  explicit SpecialTokenMatcher(const Vocab& vocab, bool user_defined_only = false);
  bool empty() const { return count_ == 0; }

  // Appends the fragments of `text`: special tokens and the (non-empty) text between them.
  void Split(std::string_view text, std::vector<TextFragment>* fragments) const;

 private:
  struct Candidate {
    std::string_view text;  // points into the Vocab's token strings
    TokenId id;
  };
  // The longest special token starting at text[pos], or nullptr.
  const Candidate* LongestMatchAt(std::string_view text, size_t pos) const;

  // Candidates by first byte, longest first.
  std::array<std::vector<Candidate>, 256> by_first_byte_;
  size_t count_ = 0;
};

}  // namespace qevict
