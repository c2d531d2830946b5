// AVX-512 (VNNI) kernels for Q5_0, Q5_1 and Q8_0 with kQ8Block32 activations (Q4_0 and Q4_1
// have the faster interleaved kernels of vec_dot_interleaved_avx512.cc; so do Q5_0 and Q5_1
// for tiles of several tokens, while single rows (decode) of Q5_0 and Q5_1 come here:
// DotShape in vec_dot.h).
//
// Two blocks (64 values) fill a zmm register. Weight codes are made unsigned (nibbles as they
// are, Q8_0 shifted by +128) so that one vpdpbusd multiplies them with the signed activation
// codes; the lanes 0-7 of the result belong to the first block and 8-15 to the second. Each lane
// is scaled by d_weight (permuted from a vector of 16 block scales gathered once per 16 blocks)
// times d_activation (the activation row stores every block scale eight times), and the
// constant part of each block (min, or the offset -8 / -16 / -128 times d) is added once per 16
// blocks as m * (d_act * sum of activation codes).
//
// One pass handles up to four activation rows, so each weight pair is loaded and
// unpacked once for all of them.
#include <type_traits>

#include "quant/block32_avx512.h"
#include "quant/simd_helpers_avx512.h"
#include "quant/tile_passes.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot::avx512 {
namespace {

using block32::LoadPair;
using block32::PairScales;
using block32::Q5_0Format;
using block32::Q5_1Format;
using block32::Q8_0Format;

template <int T>
struct ActPointers {
  const int8_t* qs[T];
  const float* d_wide[T];
  const float* sums[T];
};

// The activation codes of the pair of blocks starting at element e (64 bytes, or 32 and zeros
// when the second block is absent) and their scales as stored (each eight times: lanes 0-7 the
// first block's, 8-15 the second's).
template <bool kTwo>
inline void LoadActPair(const int8_t* qs, const float* d_wide, int64_t e, __m512i& codes, __m512& d_act) {
  if constexpr (kTwo) {
    codes = _mm512_loadu_si512(qs + e);
    d_act = _mm512_loadu_ps(d_wide + e / 4);
  } else {
    codes = _mm512_maskz_loadu_epi8(0xffffffffu, qs + e);
    d_act = _mm512_maskz_loadu_ps(0x00ff, d_wide + e / 4);
  }
}

// acc[t] += (W_pair . A_t,pair per lane) * d_weight * d_act for the pair of blocks starting at
// element e. d_weight holds the two blocks' scales in lanes 0-7 and 8-15.
template <class F, int T, bool kTwo>
inline void PairStep(const uint8_t* blk, __m512 d_weight, const ActPointers<T>& a, int64_t e, __m512 acc[T]) {
  PrefetchAhead(blk, 2 * F::kBlockBytes);
  const __m512i wq = LoadPair<F, kTwo>(blk);
  for (int t = 0; t < T; ++t) {
    __m512i codes;
    __m512 d_act;
    LoadActPair<kTwo>(a.qs[t], a.d_wide[t], e, codes, d_act);
    const __m512i dot = _mm512_dpbusd_epi32(ZeroInt(), wq, codes);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(d_weight, d_act), acc[t]);
  }
}

// out[t] = W . A_t for one weight row with nb blocks and T activation rows.
template <class F, int T>
inline void RowDot(int64_t nb, const uint8_t* w, const ActPointers<T>& a, float out[T]) {
  __m512 acc[T], acc_const[T];
  for (int t = 0; t < T; ++t) acc[t] = acc_const[t] = _mm512_setzero_ps();
  const __m512i block_offsets = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(F::kBlockBytes));
  for (int64_t g = 0; g < nb; g += 16) {
    const int blocks = nb - g < 16 ? static_cast<int>(nb - g) : 16;
    const __mmask16 present = static_cast<__mmask16>((1u << blocks) - 1);
    const uint8_t* base = w + g * F::kBlockBytes;
    // Scale (and min) of each of the 16 blocks: 32-bit gather of the first 4 bytes.
    const __m512i head = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), present, block_offsets, base, 1);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
    __m512 m;
    if constexpr (F::kHasMin) {
      m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)));
    } else {
      m = _mm512_mul_ps(d, _mm512_set1_ps(F::kOffset));
    }
    for (int t = 0; t < T; ++t) {
      acc_const[t] = _mm512_fmadd_ps(m, _mm512_maskz_loadu_ps(present, a.sums[t] + g), acc_const[t]);
    }
    if (blocks == 16) {
#pragma GCC unroll 8
      for (int p = 0; p < 8; ++p) {
        PairStep<F, T, true>(base + 2 * p * F::kBlockBytes, PairScales(d, p), a, (g + 2 * p) * 32, acc);
      }
    } else {
      int p = 0;
      for (; 2 * p + 1 < blocks; ++p) {
        PairStep<F, T, true>(base + 2 * p * F::kBlockBytes, PairScales(d, p), a, (g + 2 * p) * 32, acc);
      }
      if (2 * p < blocks) {
        PairStep<F, T, false>(base + 2 * p * F::kBlockBytes, PairScales(d, p), a, (g + 2 * p) * 32, acc);
      }
    }
  }
  for (int t = 0; t < T; ++t) out[t] = HorizontalSum(_mm512_add_ps(acc[t], acc_const[t]));
}

// Formats without a min (Q5_0, Q8_0): the signed weight codes (Q5_0's 0..31 less 16, Q8_0's as
// stored) times the signed activation codes, as vpdpbusd's unsigned x signed product of |w| and
// the activation codes with w's sign moved onto them (activation codes are within [-127, 127],
// so negating them cannot overflow; |-128| is 128 unsigned). No constant term is left, and the
// pair's two block scales are read from the blocks themselves: no gather, whose latency the short
// rows of decode (20 blocks at 640 columns) cannot hide (Gemma 3's Q8_0 output projection:
// 12.8 -> 9.9 ms a token on one thread, docs/kernels.md).
// The signed codes of blocks b0 and (when kTwo) b0 + 1: Q8_0's bytes as stored (two loads, no
// offset taken off and put back), Q5_0's unsigned codes less 16.
template <class F, bool kTwo>
inline __m512i SignedPair(const uint8_t* b0) {
  if constexpr (F::kNibbles) {
    return _mm512_add_epi8(LoadPair<F, kTwo>(b0), _mm512_set1_epi8(static_cast<char>(F::kOffset)));
  } else {
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + F::kQsOffset));
    if constexpr (!kTwo) return _mm512_zextsi256_si512(q0);
    const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + F::kBlockBytes + F::kQsOffset));
    return _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
  }
}

// d_weight of the pair: lanes 0-7 the scale of b0, 8-15 that of b0 + 1 (0 when absent), read
// from the blocks themselves (two scalar loads and broadcasts: cheaper here than a gather, or
// than a masked vector load and a word permute).
template <class F, bool kTwo>
inline __m512 PairWeightScales(const uint8_t* b0) {
  uint16_t h0, h1 = 0;
  std::memcpy(&h0, b0, 2);
  if constexpr (kTwo) std::memcpy(&h1, b0 + F::kBlockBytes, 2);
  const __m256i halves = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(h0))),
                                                 _mm_set1_epi16(static_cast<short>(h1)), 1);
  return _mm512_cvtph_ps(halves);
}

template <class F, int T, bool kTwo>
inline void SignedPairStep(const uint8_t* b0, const ActPointers<T>& a, int64_t e, __m512 acc[T]) {
  static_assert(!F::kHasMin);
  PrefetchAhead(b0, 2 * F::kBlockBytes);
  const __m512i w = SignedPair<F, kTwo>(b0);
  const __m512i w_abs = _mm512_abs_epi8(w);
  const __mmask64 negative = _mm512_movepi8_mask(w);
  const __m512 d_weight = PairWeightScales<F, kTwo>(b0);
  for (int t = 0; t < T; ++t) {
    __m512i codes;
    __m512 d_act;
    LoadActPair<kTwo>(a.qs[t], a.d_wide[t], e, codes, d_act);
    const __m512i signed_codes = _mm512_mask_sub_epi8(codes, negative, _mm512_setzero_si512(), codes);
    const __m512i dot = _mm512_dpbusd_epi32(ZeroInt(), w_abs, signed_codes);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(d_weight, d_act), acc[t]);
  }
}

template <class F, int T>
inline void SignedRowDot(int64_t nb, const uint8_t* w, const ActPointers<T>& a, float out[T]) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) SignedPairStep<F, T, true>(w + b * F::kBlockBytes, a, b * 32, acc);
  if (b < nb) SignedPairStep<F, T, false>(w + b * F::kBlockBytes, a, b * 32, acc);
  for (int t = 0; t < T; ++t) out[t] = HorizontalSum(acc[t]);
}

template <class F, int T>
void Rows(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act, size_t act_stride,
          float* out, int64_t out_stride) {
  ActPointers<T> a;
  for (int t = 0; t < T; ++t) {
    const uint8_t* row = act + t * act_stride;
    a.qs[t] = reinterpret_cast<const int8_t*>(row);
    a.d_wide[t] = reinterpret_cast<const float*>(row + ActScaleOffset(n));
    a.sums[t] = reinterpret_cast<const float*>(row + ActSumOffset32(n));
  }
  for (int r = 0; r < n_rows; ++r) {
    float result[T];
    if constexpr (!F::kHasMin) {
      SignedRowDot<F, T>(n / 32, w + r * w_stride, a, result);
    } else {
      RowDot<F, T>(n / 32, w + r * w_stride, a, result);
    }
    for (int t = 0; t < T; ++t) out[t * out_stride + r] = result[t];
  }
}

template <class F>
void Tile(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act, size_t act_stride,
          int n_tok, float* out, int64_t out_stride) {
  TileInPassesOfFour(act, act_stride, n_tok, out, out_stride,
                     [&](auto tokens, const uint8_t* a, float* o) {
                       Rows<F, decltype(tokens)::value>(n, w, w_stride, n_rows, a, act_stride, o,
                                                            out_stride);
                     });
}

}  // namespace

DotTileFn LegacyTile(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::kQ5_0: return Tile<Q5_0Format>;
    case GgmlType::kQ5_1: return Tile<Q5_1Format>;
    case GgmlType::kQ8_0: return Tile<Q8_0Format>;
    default: return nullptr;
  }
}

}  // namespace qevict::vec_dot::avx512
