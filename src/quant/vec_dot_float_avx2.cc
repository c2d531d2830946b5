// AVX2 kernels for F32, F16 and BF16 weights with fp32 activations: weights widened to fp32
// eight at a time (vcvtph2ps for F16, a 16-bit shift for BF16) and fused-multiply-added with
// each activation row, so a weight vector is converted once for all tokens of the tile.
#include "quant/simd_helpers_avx2.h"
#include "quant/tile_passes.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot::avx2 {
namespace {

struct F32Weights {
  static constexpr int kBytes = 4;
  static __m256 Load(const uint8_t* w, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + i); }
  static float LoadOne(const uint8_t* w, int64_t i) {
    float v;
    std::memcpy(&v, w + 4 * i, 4);
    return v;
  }
};
struct F16Weights {
  static constexpr int kBytes = 2;
  static __m256 Load(const uint8_t* w, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
  }
  static float LoadOne(const uint8_t* w, int64_t i) { return LoadHalf(w + 2 * i); }
};
struct BF16Weights {
  static constexpr int kBytes = 2;
  static __m256 Load(const uint8_t* w, int64_t i) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float LoadOne(const uint8_t* w, int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
};

template <class W, int T>
inline void RowDot(int64_t n, const uint8_t* w, const float* const x[T], float out[T]) {
  __m256 acc0[T], acc1[T];
  for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    if (W::kBytes * 16 >= 64 || (i & 31) == 0) PrefetchAhead(w + i * W::kBytes, 64);
    const __m256 w0 = W::Load(w, i), w1 = W::Load(w, i + 8);
    for (int t = 0; t < T; ++t) {
      acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[t] + i), acc0[t]);
      acc1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[t] + i + 8), acc1[t]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 w0 = W::Load(w, i);
    for (int t = 0; t < T; ++t) acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[t] + i), acc0[t]);
  }
  for (int t = 0; t < T; ++t) {
    float sum = HorizontalSum(_mm256_add_ps(acc0[t], acc1[t]));
    for (int64_t j = i; j < n; ++j) sum += W::LoadOne(w, j) * x[t][j];
    out[t] = sum;
  }
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

}  // namespace qevict::vec_dot::avx2
