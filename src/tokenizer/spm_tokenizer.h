// SentencePiece-style BPE (tokenizer.ggml.model = "llama", e.g. Llama 2, TinyLlama): spaces
// become U+2581 '▁' (with one prepended to each text segment when add_space_prefix), the text
// starts as one symbol per character, and the adjacent pair whose concatenation is the
// highest-scoring vocabulary piece is merged until none is left (leftmost first on ties).
// Characters without a piece fall back to <0xNN> byte tokens, or to the unknown token.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab_tokenizer.h"

namespace qevict {

class SentencePieceTokenizer final : public VocabTokenizer {
 public:
  // `vocab` must be validated; throws Error when it has no scores.
  explicit SentencePieceTokenizer(Vocab vocab);

  std::string_view pre_name() const override { return "spm"; }

 protected:
  void EncodeText(std::string_view text, bool starts_segment,
                  std::vector<TokenId>* out) const override;
  std::string TextPiece(TokenId id) const override;
  bool DecodeStripsLeadingSpace() const override { return add_space_prefix_; }

 private:
  // Appends the ids of one final symbol: its piece, else its bytes, else the unknown token.
  void EmitSymbol(std::string_view symbol, std::vector<TokenId>* out) const;

  bool add_space_prefix_;
  TokenIndex pieces_;                   // tokens BPE may produce: normal and user-defined
  std::array<TokenId, 256> byte_tokens_;  // <0xNN> tokens, -1 if absent
};

}  // namespace qevict
