// What the digest code shares between building and reading digests (kv/window_digest.cc) and
// estimating many of them at once (kv/digest_estimator.cc): the bit width of the quantized
// mean-key kinds, how their codes are packed, and the check of a layer's context.
#pragma once

#include <cstdint>

#include "kv/window_digest.h"

namespace qevict::digest_detail {

// Bits a channel of the quantized mean-key kinds; 0 for the other kinds.
int MeanKeyBits(DigestKind kind);

// Code i of `bits` bits, packed least significant bit first at bit i * bits (3-bit codes
// straddle bytes).
inline unsigned GetCode(const uint8_t* packed, int i, int bits) {
  const int at = i * bits, byte = at / 8, shift = at % 8;
  unsigned v = packed[byte] >> shift;
  if (shift + bits > 8) v |= static_cast<unsigned>(packed[byte + 1]) << (8 - shift);
  return v & ((1u << bits) - 1);
}

// The layer's context a context kind is read with: throws qevict::Error when there is none or
// it is of another geometry.
const DigestContext& NeedContext(DigestKind kind, const DigestGeometry& g, const DigestContext* ctx);

}  // namespace qevict::digest_detail
