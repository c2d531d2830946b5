// AVX-512 kernels for F32, F16 and BF16 weights with fp32 activations: weights widened to fp32
// 16 at a time (vcvtph2ps for F16, a 16-bit shift for BF16) and fused-multiply-added with each
// activation row, so a weight vector is converted once for all tokens of the tile.
#include "quant/simd_helpers_avx512.h"
#include "quant/tile_passes.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot::avx512 {
namespace {

struct F32Weights {
  static constexpr int kBytes = 4;
  static __m512 Load(const uint8_t* w, int64_t i) { return _mm512_loadu_ps(w + 4 * i); }
  static __m512 LoadPartial(const uint8_t* w, int64_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, w + 4 * i); }
};
struct F16Weights {
  static constexpr int kBytes = 2;
  static __m512 Load(const uint8_t* w, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * i)));
  }
  static __m512 LoadPartial(const uint8_t* w, int64_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + 2 * i));
  }
};
struct BF16Weights {
  static constexpr int kBytes = 2;
  static __m512 Widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 Load(const uint8_t* w, int64_t i) {
    return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * i)));
  }
  static __m512 LoadPartial(const uint8_t* w, int64_t i, __mmask16 m) {
    return Widen(_mm256_maskz_loadu_epi16(m, w + 2 * i));
  }
};

template <class W, int T>
inline void RowDot(int64_t n, const uint8_t* w, const float* const x[T], float out[T]) {
  __m512 acc0[T], acc1[T];
  for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    PrefetchAhead(w + i * W::kBytes, 32 * W::kBytes);
    const __m512 w0 = W::Load(w, i), w1 = W::Load(w, i + 16);
    for (int t = 0; t < T; ++t) {
      acc0[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x[t] + i), acc0[t]);
      acc1[t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x[t] + i + 16), acc1[t]);
    }
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 w0 = W::LoadPartial(w, i, m);
    for (int t = 0; t < T; ++t) acc0[t] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, x[t] + i), acc0[t]);
  }
  for (int t = 0; t < T; ++t) out[t] = HorizontalSum(_mm512_add_ps(acc0[t], acc1[t]));
}

template <class W, int T>
void Rows(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act, size_t act_stride,
          float* out, int64_t out_stride) {
  const float* x[T];
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const float*>(act + t * act_stride);
  for (int r = 0; r < n_rows; ++r) {
    float result[T];
    RowDot<W, T>(n, w + r * w_stride, x, result);
    for (int t = 0; t < T; ++t) out[t * out_stride + r] = result[t];
  }
}

template <class W>
void Tile(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act, size_t act_stride,
          int n_tok, float* out, int64_t out_stride) {
  TileInPassesOfFour(act, act_stride, n_tok, out, out_stride,
                     [&](auto tokens, const uint8_t* a, float* o) {
                       Rows<W, decltype(tokens)::value>(n, w, w_stride, n_rows, a, act_stride, o,
                                                            out_stride);
                     });
}

}  // namespace

DotTileFn FloatTile(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::kF32: return Tile<F32Weights>;
    case GgmlType::kF16: return Tile<F16Weights>;
    case GgmlType::kBF16: return Tile<BF16Weights>;
    default: return nullptr;
  }
}

}  // namespace qevict::vec_dot::avx512
