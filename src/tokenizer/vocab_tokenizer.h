// What the byte-level BPE and SentencePiece tokenizers share: the validated vocabulary, special
// ids, end-of-generation tokens, special-token splitting and rendering of non-text tokens.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tokenizer/special_tokens.h"
#include "tokenizer/token_index.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace qevict {

class VocabTokenizer : public Tokenizer {
 public:
  // `vocab` must already be validated.
  VocabTokenizer(Vocab vocab, bool default_add_bos);
  // The indexes point into vocab_: neither copied nor moved.
  VocabTokenizer(const VocabTokenizer&) = delete;
  VocabTokenizer& operator=(const VocabTokenizer&) = delete;

  std::vector<TokenId> Encode(std::string_view text, bool add_bos,
                              bool parse_special) const override;
  std::string TokenToPiece(TokenId id, bool render_special = false) const override;

  int vocab_size() const override { return vocab_.size(); }
  TokenId bos() const override { return vocab_.bos; }
  TokenId eos() const override { return vocab_.eos; }
  bool add_bos() const override { return add_bos_; }
  bool IsEndOfGeneration(TokenId id) const override { return end_of_generation_.contains(id); }
  std::string_view model_name() const override { return vocab_.model; }

  const Vocab& vocab() const { return vocab_; }

 protected:
  // Appends the ids of plain text (no special tokens in it). `starts_segment` is true for text
  // at the start of the input or right after a special token.
  virtual void EncodeText(std::string_view text, bool starts_segment,
                          std::vector<TokenId>* out) const = 0;
  // The bytes of a token that stands for text (normal, byte and unused tokens).
  virtual std::string TextPiece(TokenId id) const = 0;

  // First id of each distinct token text.
  const TokenIndex& token_ids() const { return token_ids_; }

 private:
  Vocab vocab_;
  bool add_bos_;
  TokenIndex token_ids_;
  std::unordered_set<TokenId> end_of_generation_;
  SpecialTokenMatcher special_tokens_;
  SpecialTokenMatcher user_defined_tokens_;  // matched even when specials are not parsed
};

}  // namespace qevict
