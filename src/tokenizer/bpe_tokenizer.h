// Byte-level BPE (tokenizer.ggml.model = "gpt2"): the pre-tokenizer splits text into words,
// each word's bytes become GPT-2 byte symbols, and merges are applied lowest rank first
// (leftmost first among equal ranks), as Hugging Face's BPE model does.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab_tokenizer.h"

namespace qevict {

class ByteLevelBpeTokenizer final : public VocabTokenizer {
 public:
  // `vocab` must be validated; throws Error when its pre-tokenizer is unknown.
  explicit ByteLevelBpeTokenizer(Vocab vocab);

  std::string_view pre_name() const override { return PreTokenizerName(pre_); }

  // The ids of one pre-tokenized word (exposed for tests and benchmarks).
  void EncodeWord(std::string_view word, std::vector<TokenId>* out) const;

 protected:
  void EncodeText(std::string_view text, bool starts_segment,
                  std::vector<TokenId>* out) const override;
  std::string TextPiece(TokenId id) const override;

 private:
  struct Merge {
    int32_t rank;
    TokenId merged;
  };
  static uint64_t PairKey(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  PreTokenizer pre_;
  bool ignore_merges_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank and result
  std::array<TokenId, 256> byte_tokens_;        // the token of each single byte, -1 if none
};

}  // namespace qevict
