// Token text -> id (token_index.h).
#include "tokenizer/token_index.h"

#include <algorithm>
#include <bit>

namespace qevict {

TokenIndex::TokenIndex(const TokenTexts& texts,
                       const std::function<bool(TokenId)>& keep)
    : texts_(&texts) {
  // A power of two at least twice the number of tokens: probes stay short.
  const size_t size = std::bit_ceil(std::max<size_t>(2 * texts.size(), 16));
  slots_.assign(size, -1);
  mask_ = size - 1;
  for (size_t id = 0; id < texts.size(); ++id) {
    if (keep && !keep(static_cast<TokenId>(id))) continue;
    TokenId& slot = slots_[Slot(texts[id])];
    if (slot < 0) slot = static_cast<TokenId>(id);  // the first id of a repeated text stays
  }
}

size_t TokenIndex::Slot(std::string_view text) const {
  size_t i = std::hash<std::string_view>{}(text) & mask_;
  while (slots_[i] >= 0 && (*texts_)[static_cast<size_t>(slots_[i])] != text) i = (i + 1) & mask_;
  return i;
}

TokenId TokenIndex::Find(std::string_view text) const {
  if (slots_.empty()) return -1;
  return slots_[Slot(text)];
}

}  // namespace qevict
