// Shared by the AVX-512 kernels of the 32-element formats (include only from *_avx512.cc):
// block geometry and the unpacking of two blocks into one zmm register of unsigned codes.
#pragma once

#include "quant/simd_helpers_avx512.h"

namespace qevict::vec_dot::avx512::block32 {

// kOffset: the value subtracted from the unsigned code (-8 for Q4_0, -16 for Q5_0; -128 for
// Q8_0, whose signed codes are shifted by +128 to make them unsigned).
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
  static constexpr float kOffset = -128.0f;
};


// Unsigned codes of blocks b0 and (when kTwo) b0 + 1, in element order; zeros for the absent
// second block.
template <class F, bool kTwo>
inline __m512i LoadPair(const uint8_t* b0) {
  const uint8_t* b1 = b0 + F::kBlockBytes;
  __m512i v;
  if constexpr (F::kNibbles) {
    // [qs0, qs0, qs1, qs1] >> [0, 4, 0, 4] & 0x0f = [lo0, hi0, lo1, hi1].
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + F::kQsOffset));
    if constexpr (kTwo) {
      v = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(q0), 0xff00,
                                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + F::kQsOffset)));
    } else {
      v = _mm512_maskz_broadcast_i32x4(0x00ff, q0);
    }
    const __m512i shifts = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0,
                                            0x0004000400040004, 0x0004000400040004, 0, 0);
    v = _mm512_and_si512(_mm512_srlv_epi16(v, shifts), _mm512_set1_epi8(0x0f));
    if constexpr (F::kQhOffset >= 0) {
      const uint64_t bits = Load32(b0 + F::kQhOffset) | (kTwo ? static_cast<uint64_t>(Load32(b1 + F::kQhOffset)) << 32 : 0);
      v = _mm512_mask_add_epi8(v, _cvtu64_mask64(bits), v, _mm512_set1_epi8(0x10));
    }
  } else {
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + F::kQsOffset));
    const __m256i q1 = kTwo ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1 + F::kQsOffset))
                            : _mm256_setzero_si256();
    v = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1), _mm512_set1_epi8(-128));
  }
  return v;
}

// Lanes 0-7 = block 2p, lanes 8-15 = block 2p + 1 of a 16-lane vector of block scales.
static inline __m512 PairScales(__m512 d, int p) {
  const __m512i index = _mm512_add_epi32(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                         _mm512_set1_epi32(2 * p));
  return _mm512_permutexvar_ps(index, d);
}

}  // namespace qevict::vec_dot::avx512::block32
