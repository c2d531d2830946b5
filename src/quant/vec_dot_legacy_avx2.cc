// AVX2 kernels for the 32-element formats with kQ8Block32 activations.
//
// One block (32 values) fills a ymm register. Nibble codes stay unsigned (0..15, or 0..31 with
// the fifth bit) and go through vpmaddubsw / vpmaddwd against the signed activation codes; Q8_0
// uses |w| and the activation with w's sign instead (an unsigned +128 shift could overflow the
// 16-bit pair sums). Block scales are gathered eight at a time; d_weight of block j is broadcast
// with one permute and multiplied by the activation's per-block scale (stored eight times,
// so one load). The constant part (min, or -8 / -16 times d) is added once per eight blocks as
// m * (d_act * sum of activation codes).
#include "quant/block32_avx2.h"
#include "quant/tile_passes.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot::avx2 {
namespace {

using block32::HalvesToFloat;
using block32::LoadBlock;
using block32::Q4_0Format;
using block32::Q4_1Format;
using block32::Q5_0Format;
using block32::Q5_1Format;
using block32::Q8_0Format;

template <class F, int T>
inline void RowDot(int64_t nb, const uint8_t* w, const int8_t* const qs[T], const float* const d_wide[T],
                   const float* const sums[T], float out[T]) {
  __m256 acc[T], acc_const[T];
  for (int t = 0; t < T; ++t) acc[t] = acc_const[t] = _mm256_setzero_ps();
  const __m256i block_offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(F::kBlockBytes));
  for (int64_t g = 0; g < nb; g += 8) {
    const int blocks = nb - g < 8 ? static_cast<int>(nb - g) : 8;
    const __m256i present = _mm256_cmpgt_epi32(_mm256_set1_epi32(blocks), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const uint8_t* base = w + g * F::kBlockBytes;
    const __m256i head = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), reinterpret_cast<const int*>(base),
                                                      block_offsets, present, 1);
    const __m256 d = HalvesToFloat(head, 0);
    if constexpr (F::kHasMin || F::kOffset != 0.0f) {
      const __m256 m = F::kHasMin ? HalvesToFloat(head, 16) : _mm256_mul_ps(d, _mm256_set1_ps(F::kOffset));
      for (int t = 0; t < T; ++t) {
        acc_const[t] = _mm256_fmadd_ps(m, _mm256_maskload_ps(sums[t] + g, present), acc_const[t]);
      }
    }
    for (int j = 0; j < blocks; ++j) {
      PrefetchAhead(base + j * F::kBlockBytes, F::kBlockBytes);
      const __m256i wq = LoadBlock<F>(base + j * F::kBlockBytes);
      const __m256 dw = _mm256_permutevar8x32_ps(d, _mm256_set1_epi32(j));
      const int64_t b = g + j;
      if constexpr (F::kNibbles) {
        for (int t = 0; t < T; ++t) {
          const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs[t] + 32 * b));
          const __m256 scale = _mm256_mul_ps(dw, _mm256_loadu_ps(d_wide[t] + 8 * b));
          acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DotUnsignedSigned(wq, a)), scale, acc[t]);
        }
      } else {
        const __m256i w_abs = _mm256_abs_epi8(wq);
        for (int t = 0; t < T; ++t) {
          const __m256i a = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs[t] + 32 * b)), wq);
          const __m256 scale = _mm256_mul_ps(dw, _mm256_loadu_ps(d_wide[t] + 8 * b));
          acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DotUnsignedSigned(w_abs, a)), scale, acc[t]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) out[t] = HorizontalSum(_mm256_add_ps(acc[t], acc_const[t]));
}

template <class F, int T>
void Rows(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act, size_t act_stride,
          float* out, int64_t out_stride) {
  const int8_t* qs[T];
  const float* d_wide[T];
  const float* sums[T];
  for (int t = 0; t < T; ++t) {
    const uint8_t* row = act + t * act_stride;
    qs[t] = reinterpret_cast<const int8_t*>(row);
    d_wide[t] = reinterpret_cast<const float*>(row + ActScaleOffset(n));
    sums[t] = reinterpret_cast<const float*>(row + ActSumOffset32(n));
  }
  for (int r = 0; r < n_rows; ++r) {
    float result[T];
    RowDot<F, T>(n / 32, w + r * w_stride, qs, d_wide, sums, result);
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
    case GgmlType::kQ4_0: return Tile<Q4_0Format>;
    case GgmlType::kQ4_1: return Tile<Q4_1Format>;
    case GgmlType::kQ5_0: return Tile<Q5_0Format>;
    case GgmlType::kQ5_1: return Tile<Q5_1Format>;
    case GgmlType::kQ8_0: return Tile<Q8_0Format>;
    default: return nullptr;
  }
}

}  // namespace qevict::vec_dot::avx2
