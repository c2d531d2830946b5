// AVX2 kernels for Q4_K, Q5_K and Q6_K with kQ8Block256 activations.
//
// Codes are unpacked to unsigned bytes in element order, 32 per ymm; vpmaddubsw against the
// signed activation codes gives 16-bit pair sums (at most 2 * 63 * 127, no saturation), and
// vpmaddwd with the sub-block scale (one 16-bit word per pair) sums them into 32 bits, so a
// super-block is accumulated in integers before one float multiply by d_weight * d_activation.
// The mins of Q4_K/Q5_K and the -32 offset of Q6_K act on the activation sums bsums.
#include "quant/simd_helpers_avx2.h"
#include "quant/tile_passes.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot::avx2 {
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

inline __m256i Codes(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

template <bool kFive, int T>
inline void RowDotQ45K(int64_t n_super, const uint8_t* w, const ActRows act[T], float out[T]) {
  constexpr int kBlockBytes = kFive ? 176 : 144;
  constexpr int kQsOffset = kFive ? 48 : 16;
  const __m256i low_nibble = _mm256_set1_epi8(0x0f);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  __m256 acc[T], acc_min[T];
  for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < n_super; ++sb) {
    const uint8_t* blk = w + sb * kBlockBytes;
    PrefetchAhead(blk, kBlockBytes);
    uint64_t scales8, mins8;
    ScalesAndMins(blk + 4, &scales8, &mins8);
    // Scale words of all eight sub-blocks in both lanes; byte pair (2j, 2j+1) is scale j.
    const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(scales8))));
    const __m128i mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mins8)));
    const __m256i min_pairs = _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins));
    __m256i qh;
    if constexpr (kFive) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
    __m256i scale_pick = _mm256_set1_epi16(0x0100);  // bytes (0, 1): word 0
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQsOffset + 32 * k));
      __m256i lo = _mm256_and_si256(packed, low_nibble);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);
      if constexpr (kFive) {
        // Bits 2k and 2k+1 of qh[l] (qh already shifted right by 2k) become bit 4.
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), bit4));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), bit4));
        qh = _mm256_srli_epi16(qh, 2);
      }
      const __m256i scale_lo = _mm256_shuffle_epi8(scales, scale_pick);
      scale_pick = _mm256_add_epi8(scale_pick, _mm256_set1_epi8(2));
      const __m256i scale_hi = _mm256_shuffle_epi8(scales, scale_pick);
      scale_pick = _mm256_add_epi8(scale_pick, _mm256_set1_epi8(2));
      for (int t = 0; t < T; ++t) {
        const int8_t* a = act[t].qs + sb * 256 + 64 * k;
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, Codes(a)), scale_lo);
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, Codes(a + 32)), scale_hi);
        isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(p_lo, p_hi));
      }
    }
    const float d = LoadHalf(blk), dmin = LoadHalf(blk + 2);
    for (int t = 0; t < T; ++t) {
      const float da = act[t].d[sb];
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * da), acc[t]);
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[t].bsums + 16 * sb));
      acc_min[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, min_pairs)), _mm256_set1_ps(-dmin * da),
                                   acc_min[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = HorizontalSum(_mm256_add_ps(acc[t], acc_min[t]));
}

template <int T>
inline void RowDotQ6K(int64_t n_super, const uint8_t* w, const ActRows act[T], float out[T]) {
  const __m256i low_nibble = _mm256_set1_epi8(0x0f);
  const __m256i bits_4_5 = _mm256_set1_epi8(0x30);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < n_super; ++sb) {
    const uint8_t* blk = w + sb * 210;
    PrefetchAhead(blk, 210);
    const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    const __m256i scales_times_minus32 =
        _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(_mm256_cvtepi8_epi16(scales8), 5));
    __m128i group_pick = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
      const __m256i quarters[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, low_nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits_4_5)),
          _mm256_or_si256(_mm256_and_si256(ql1, low_nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits_4_5)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_nibble), _mm256_and_si256(qh, bits_4_5)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_nibble),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits_4_5)),
      };
      for (int q = 0; q < 4; ++q) {
        // Elements 128h + 32q .. +32 are scale groups 8h + 2q (words 0-7) and 8h + 2q + 1.
        const __m256i scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales8, group_pick));
        group_pick = _mm_add_epi8(group_pick, _mm_set1_epi8(2));
        for (int t = 0; t < T; ++t) {
          const __m256i a = Codes(act[t].qs + sb * 256 + 128 * h + 32 * q);
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(quarters[q], a), scale));
        }
      }
    }
    const float d = LoadHalf(blk + 208);
    for (int t = 0; t < T; ++t) {
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[t].bsums + 16 * sb));
      isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(bsums, scales_times_minus32));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * act[t].d[sb]), acc[t]);
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
  TileInPassesOfFour(act, act_stride, n_tok, out, out_stride,
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

}  // namespace qevict::vec_dot::avx2
