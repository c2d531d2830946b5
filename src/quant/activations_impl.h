// Internal: the per-level activation quantizers behind QuantizeActivationRow. The SIMD ones
// return false for formats they do not handle; all of them write identical bytes.
#pragma once

#include <cstdint>

#include "quant/activations.h"

namespace qevict::activations {

void QuantizeRowPortable(const ActivationLayout& layout, const float* x, uint8_t* dst);
bool QuantizeRowAvx2(const ActivationLayout& layout, const float* x, uint8_t* dst);
bool QuantizeRowAvx512(const ActivationLayout& layout, const float* x, uint8_t* dst);

// Byte offset of element e of block b in the kQ8Block32Interleaved qs section of a row of n.
inline int64_t InterleavedOffset(int64_t n, int64_t b, int e) {
  const int64_t full_blocks = n / 512 * 16;
  if (b >= full_blocks) return full_blocks * 32 + (b - full_blocks) * 32 + e;
  return (b / 16) * 512 + 64 * (e / 4) + 4 * (b % 16) + e % 4;
}

}  // namespace qevict::activations
