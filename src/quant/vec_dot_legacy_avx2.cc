// AVX2 kernels for the 32-element formats with kQ8Block32 activations.
//
// One block (32 values) fills a ymm register. Nibble codes stay unsigned (0..15, or 0..31 with
// the fifth bit) and go through vpmaddubsw / vpmaddwd against the signed activation codes; Q8_0
// uses |w| and the activation with w's sign instead (an unsigned +128 shift could overflow the
// 16-bit pair sums). Block scales are gathered eight at a time; d_weight of block j is broadcast
// with one permute and multiplied by the activation's per-block scale (stored eight times,
// so one load). The constant part (min, or -8 / -16 times d) is added once per eight blocks as
// m * (d_act * sum of activation codes).
#include "quant/simd_helpers_avx2.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot::avx2 {
namespace {

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
inline __m256i LoadBlock(const uint8_t* blk) {
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
inline __m256 HalvesToFloat(__m256i dwords, int shift) {
  const __m256i h = shift ? _mm256_srli_epi32(dwords, 16) : _mm256_and_si256(dwords, _mm256_set1_epi32(0xffff));
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

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
  // At most four tokens per pass (register budget); larger tiles are done in two passes.
  for (int t0 = 0; t0 < n_tok; t0 += 4) {
    const uint8_t* a = act + t0 * act_stride;
    float* o = out + t0 * out_stride;
    switch (n_tok - t0) {
      case 1: Rows<F, 1>(n, w, w_stride, n_rows, a, act_stride, o, out_stride); break;
      case 2: Rows<F, 2>(n, w, w_stride, n_rows, a, act_stride, o, out_stride); break;
      case 3: Rows<F, 3>(n, w, w_stride, n_rows, a, act_stride, o, out_stride); break;
      default: Rows<F, 4>(n, w, w_stride, n_rows, a, act_stride, o, out_stride); break;
    }
  }
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
