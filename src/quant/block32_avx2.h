// Shared by the AVX2 kernels of the 32-element formats (include only from *_avx2.cc): block
// geometry, the fp16 scale halves of eight blocks, and one block's codes in element order.
// Functions are static so that each kernel file keeps its own AVX2-compiled copy.
#pragma once

#include "quant/simd_helpers_avx2.h"

namespace qevict::vec_dot::avx2::block32 {

struct Q4_0Format {
  static constexpr int kBlockBytes = 18, kQsOffset = 2, kQhOffset = -1;
  static constexpr bool kHasMin = false, kNibbles = true;
  static constexpr float kOffset = -8.0f;
};
struct Q4_1Format {
  static constexpr int kBlockBytes = 20, kQsOffset = 4, kQhOffset = -1;
  static constexpr bool kHasMin = true, kNibbles = true;
  static constexpr float kOffset = 0.0f;
};
struct Q5_0Format {
  static constexpr int kBlockBytes = 22, kQsOffset = 6, kQhOffset = 2;
  static constexpr bool kHasMin = false, kNibbles = true;
  static constexpr float kOffset = -16.0f;
};
struct Q5_1Format {
  static constexpr int kBlockBytes = 24, kQsOffset = 8, kQhOffset = 4;
  static constexpr bool kHasMin = true, kNibbles = true;
  static constexpr float kOffset = 0.0f;
};
struct Q8_0Format {
  static constexpr int kBlockBytes = 34, kQsOffset = 2, kQhOffset = -1;
  static constexpr bool kHasMin = false, kNibbles = false;
  static constexpr float kOffset = 0.0f;
};

// The codes of one block in element order (unsigned for nibble formats, signed for Q8_0).
template <class F>
static inline __m256i LoadBlock(const uint8_t* blk) {
  if constexpr (F::kNibbles) {
    // [qs, qs] >> [0, 4] & 0x0f = [low nibbles, high nibbles].
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + F::kQsOffset)));
    __m256i v = _mm256_and_si256(_mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0f));
    if constexpr (F::kQhOffset >= 0) {
      // Byte i gets bit i of qh: spread qh byte k over bytes 8k..8k+7, test one bit in each.
      const __m256i spread = _mm256_shuffle_epi8(
          _mm256_set1_epi32(static_cast<int>(Load32(blk + F::kQhOffset))),
          _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
      const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
      const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
      v = _mm256_or_si256(v, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
    }
    return v;
  } else {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + F::kQsOffset));
  }
}

// fp16 halves at bit 0 (shift 0) or bit 16 (shift 16) of eight dwords, as floats.
static inline __m256 HalvesToFloat(__m256i dwords, int shift) {
  const __m256i h = shift ? _mm256_srli_epi32(dwords, 16) : _mm256_and_si256(dwords, _mm256_set1_epi32(0xffff));
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

}  // namespace qevict::vec_dot::avx2::block32
