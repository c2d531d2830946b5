// AVX-512 (VNNI) kernels for Q4_K, Q5_K and Q6_K with kQ8Block256 activations.
//
// Weight codes are unpacked to unsigned bytes in element order, 64 per zmm. vpmaddubsw
// multiplies them with the signed activation codes into 16-bit pair sums (at most
// 2 * 63 * 127, no saturation), and vpdpwssd multiplies those with the sub-block scales
// (expanded to one 16-bit word per pair) and accumulates in 32 bits, so a whole super-block is
// summed in integers before the one float multiply by d_weight * d_activation. The mins of
// Q4_K/Q5_K and the -32 offset of Q6_K act on the activation sums bsums, once per super-block.
#include "quant/simd_helpers_avx512.h"
#include "quant/tile_passes.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot::avx512 {
namespace {


struct ActRows {
  const int8_t* qs;
  const float* d;
  const int16_t* bsums;
};

// The eight 6-bit scales and mins of a Q4_K / Q5_K super-block, as bytes.
inline void ScalesAndMins(const uint8_t* packed, uint64_t* scales, uint64_t* mins) {
  const uint32_t u0 = Load32(packed), u1 = Load32(packed + 4), u2 = Load32(packed + 8);
  const uint32_t scale_lo = u0 & 0x3f3f3f3f, min_lo = u1 & 0x3f3f3f3f;
  const uint32_t scale_hi = (u2 & 0x0f0f0f0f) | ((u0 >> 2) & 0x30303030);
  const uint32_t min_hi = ((u2 >> 4) & 0x0f0f0f0f) | ((u1 >> 2) & 0x30303030);
  *scales = scale_lo | static_cast<uint64_t>(scale_hi) << 32;
  *mins = min_lo | static_cast<uint64_t>(min_hi) << 32;
}

// Q4_K (kFive = false) and Q5_K (kFive = true).
template <bool kFive, int T>
inline void RowDotQ45K(int64_t n_super, const uint8_t* w, const ActRows act[T], float out[T]) {
  constexpr int kBlockBytes = kFive ? 176 : 144;
  constexpr int kQsOffset = kFive ? 48 : 16;
  const __m512i low_nibble = _mm512_set1_epi8(0x0f);
  const __m512i nibble_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
  __m512 acc[T];
  __m256 acc_min[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm512_setzero_ps();
    acc_min[t] = _mm256_setzero_ps();
  }
  for (int64_t sb = 0; sb < n_super; ++sb) {
    const uint8_t* blk = w + sb * kBlockBytes;
    PrefetchAhead(blk, kBlockBytes);
    uint64_t scales8, mins8;
    ScalesAndMins(blk + 4, &scales8, &mins8);
    const __m512i scales = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(scales8))));
    const __m128i mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mins8)));
    const __m256i min_pairs = _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins));
    __m512i qh;
    __m512i high_bit_select;
    if constexpr (kFive) {
      qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16)));
      high_bit_select = _mm512_inserti64x4(_mm512_set1_epi8(1), _mm256_set1_epi8(2), 1);
    }
    __m512i scale_index = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
      // Sub-blocks 2k (low nibbles of qs[32k..32k+32)) and 2k+1 (high nibbles).
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQsOffset + 32 * k));
      __m512i wq = _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(packed), nibble_shift), low_nibble);
      if constexpr (kFive) {
        const __mmask64 high = _mm512_test_epi8_mask(qh, high_bit_select);
        wq = _mm512_mask_add_epi8(wq, high, wq, _mm512_set1_epi8(0x10));
        high_bit_select = _mm512_slli_epi16(high_bit_select, 2);
      }
      const __m512i scale = _mm512_permutexvar_epi16(scale_index, scales);
      scale_index = _mm512_add_epi16(scale_index, _mm512_set1_epi16(2));
      for (int t = 0; t < T; ++t) {
        const __m512i a = _mm512_loadu_si512(act[t].qs + sb * 256 + 64 * k);
        isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(wq, a), scale);
      }
    }
    const float d = LoadHalf(blk), dmin = LoadHalf(blk + 2);
    for (int t = 0; t < T; ++t) {
      const float da = act[t].d[sb];
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_set1_ps(d * da), acc[t]);
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[t].bsums + 16 * sb));
      acc_min[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, min_pairs)), _mm256_set1_ps(-dmin * da),
                                   acc_min[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = HorizontalSum(acc[t]) + HorizontalSum(acc_min[t]);
}

template <int T>
inline void RowDotQ6K(int64_t n_super, const uint8_t* w, const ActRows act[T], float out[T]) {
  const __m512i low_nibble = _mm512_set1_epi8(0x0f);
  const __m512i bits_4_5 = _mm512_set1_epi8(0x30);
  // qh bits for elements [0, 32) are bits 0-1 (shift left 4), for [32, 64) bits 2-3 (left 2);
  // for [64, 96) bits 4-5 (no shift), for [96, 128) bits 6-7 (right 2).
  const __m512i shift_left = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i shift_right = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  // Word i of a maddubs result covers elements 2i, 2i+1, i.e. scale group i / 8.
  const __m512i group_of_word = _mm512_srli_epi16(
      _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7,
                       6, 5, 4, 3, 2, 1, 0),
      3);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < n_super; ++sb) {
    const uint8_t* blk = w + sb * 210;
    PrefetchAhead(blk, 210);
    const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
    const __m512i scales = _mm512_castsi256_si512(scales16);
    const __m256i scales_times_minus32 = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(scales16, 5));
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h)));
      const __m512i lo = _mm512_and_si512(ql, low_nibble);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(ql, 4), low_nibble);
      // (qh_shifted & 0x30) | nibble
      const __m512i w0 = _mm512_ternarylogic_epi32(_mm512_sllv_epi16(qh, shift_left), bits_4_5, lo, 0xea);
      const __m512i w1 = _mm512_ternarylogic_epi32(_mm512_srlv_epi16(qh, shift_right), bits_4_5, hi, 0xea);
      const __m512i scale0 = _mm512_permutexvar_epi16(_mm512_add_epi16(group_of_word, _mm512_set1_epi16(8 * h)), scales);
      const __m512i scale1 =
          _mm512_permutexvar_epi16(_mm512_add_epi16(group_of_word, _mm512_set1_epi16(8 * h + 4)), scales);
      for (int t = 0; t < T; ++t) {
        const int8_t* a = act[t].qs + sb * 256 + 128 * h;
        isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(w0, _mm512_loadu_si512(a)), scale0);
        isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(w1, _mm512_loadu_si512(a + 64)), scale1);
      }
    }
    const float d = LoadHalf(blk + 208);
    for (int t = 0; t < T; ++t) {
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[t].bsums + 16 * sb));
      const __m256i offset = _mm256_madd_epi16(bsums, scales_times_minus32);
      isum[t] = _mm512_add_epi32(isum[t], _mm512_zextsi256_si512(offset));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_set1_ps(d * act[t].d[sb]), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = HorizontalSum(acc[t]);
}

enum class Kind { kQ4K, kQ5K, kQ6K };

template <Kind kKind, int T>
void Rows(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act, size_t act_stride,
          float* out, int64_t out_stride) {
  ActRows rows[T];
  for (int t = 0; t < T; ++t) {
    const uint8_t* row = act + t * act_stride;
    rows[t] = {reinterpret_cast<const int8_t*>(row), reinterpret_cast<const float*>(row + ActScaleOffset(n)),
               reinterpret_cast<const int16_t*>(row + ActSumOffset256(n))};
  }
  for (int r = 0; r < n_rows; ++r) {
    float result[T];
    if constexpr (kKind == Kind::kQ6K) {
      RowDotQ6K<T>(n / 256, w + r * w_stride, rows, result);
    } else {
      RowDotQ45K<kKind == Kind::kQ5K, T>(n / 256, w + r * w_stride, rows, result);
    }
    for (int t = 0; t < T; ++t) out[t * out_stride + r] = result[t];
  }
}

template <Kind kKind>
void Tile(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act, size_t act_stride,
          int n_tok, float* out, int64_t out_stride) {
  TileInPasses<8>(act, act_stride, n_tok, out, out_stride,
                  [&](auto tokens, const uint8_t* a, float* o) {
                    Rows<kKind, decltype(tokens)::value>(n, w, w_stride, n_rows, a, act_stride, o,
                                                         out_stride);
                  });
}

}  // namespace

DotTileFn KQuantTile(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::kQ4_K: return Tile<Kind::kQ4K>;
    case GgmlType::kQ5_K: return Tile<Kind::kQ5K>;
    case GgmlType::kQ6_K: return Tile<Kind::kQ6K>;
    default: return nullptr;
  }
}

}  // namespace qevict::vec_dot::avx512
