// Token text -> id over a vocabulary's own texts: open addressing with linear probing, one
// 4-byte id a slot and at most half the slots used. The texts are not copied: an
// unordered_map<std::string, TokenId> keeps each text again in a node of its own (about 60 bytes
// a token more, so 15 MiB an index for Gemma 3's 262,144 tokens); this keeps 8 bytes a token.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace qevict {

class TokenIndex {
 public:
  TokenIndex() = default;
  // Indexes the ids whose keep(id) holds (every id without `keep`); a text listed twice maps to
  // its first id. `texts` must outlive the index and stay where it is.
  explicit TokenIndex(const TokenTexts& texts,
                      const std::function<bool(TokenId)>& keep = {});

  // The id of the indexed token whose text is `text`, -1 when there is none.
  TokenId Find(std::string_view text) const;

  // Bytes the index holds (its slots).
  size_t bytes() const { return slots_.capacity() * sizeof(TokenId); }

 private:
  size_t Slot(std::string_view text) const;  // where `text` is, or the empty slot it would take

  const TokenTexts* texts_ = nullptr;
  std::vector<TokenId> slots_;  // -1: empty
  size_t mask_ = 0;
};

}  // namespace qevict
