// AVX2 activation quantizers: the same arithmetic as the portable ones (scale max|x| / 127,
// codes x * (1 / d) rounded half away from zero, so the bytes are identical), 8 lanes wide.
#include "quant/activations_impl.h"
#include "quant/simd_helpers_avx2.h"

namespace qevict::activations {
namespace {

inline __m256 Abs(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

inline float Max8(__m256 m) {
  __m128 r = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  r = _mm_max_ps(r, _mm_movehl_ps(r, r));
  r = _mm_max_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

inline float InverseScale(float amax, float* d) {
  *d = amax / 127.0f;
  return *d != 0.0f ? 1.0f / *d : 0.0f;
}

inline __m256i Codes8(__m256 x, __m256 id) {
  const __m256 v = _mm256_mul_ps(x, id);
  const __m256 half = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(0.5f));
  const __m256i q = _mm256_cvttps_epi32(_mm256_add_ps(v, half));
  return _mm256_max_epi32(_mm256_min_epi32(q, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
}

inline int Sum8(__m256i v) {
  __m128i r = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4e));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xb1));
  return _mm_cvtsi128_si32(r);
}

// 16 int32 codes (two registers) as 16 bytes in order.
inline __m128i Pack16(__m256i a, __m256i b) {
  const __m256i words = _mm256_packs_epi32(a, b);          // a0-3 b0-3 | a4-7 b4-7
  const __m256i bytes = _mm256_packs_epi16(words, words);  // per lane: a0-3 b0-3 a0-3 b0-3
  const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0));
  return _mm256_castsi256_si128(ordered);
}

// Codes of `count` (a multiple of 16) values with inverse scale id; returns their sum and
// writes the sum of every 16 into group_sums when not null.
inline int QuantizeRun(const float* x, int count, __m256 id, uint8_t* out, int16_t* group_sums) {
  int total = 0;
  for (int i = 0; i < count; i += 16) {
    const __m256i q0 = Codes8(_mm256_loadu_ps(x + i), id), q1 = Codes8(_mm256_loadu_ps(x + i + 8), id);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), Pack16(q0, q1));
    const int s = Sum8(_mm256_add_epi32(q0, q1));
    if (group_sums != nullptr) group_sums[i / 16] = static_cast<int16_t>(s);
    total += s;
  }
  return total;
}

inline float AbsMax(const float* x, int count) {
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < count; i += 8) m = _mm256_max_ps(m, Abs(_mm256_loadu_ps(x + i)));
  return Max8(m);
}

}  // namespace

bool QuantizeRowAvx2(const ActivationLayout& layout, const float* x, uint8_t* dst) {
  const int64_t n = layout.n;
  switch (layout.format) {
    case ActivationFormat::kQ8Block32: {
      auto* d_wide = reinterpret_cast<float*>(dst + layout.scale_offset);
      auto* sums = reinterpret_cast<float*>(dst + layout.sum_offset);
      for (int64_t b = 0; b < n / 32; ++b) {
        float d;
        const __m256 id = _mm256_set1_ps(InverseScale(AbsMax(x + 32 * b, 32), &d));
        const int sum = QuantizeRun(x + 32 * b, 32, id, dst + 32 * b, nullptr);
        _mm256_storeu_ps(d_wide + 8 * b, _mm256_set1_ps(d));
        sums[b] = d * static_cast<float>(sum);
      }
      return true;
    }
    case ActivationFormat::kQ8Block256: {
      auto* scales = reinterpret_cast<float*>(dst + layout.scale_offset);
      auto* bsums = reinterpret_cast<int16_t*>(dst + layout.sum_offset);
      for (int64_t b = 0; b < n / 256; ++b) {
        float d;
        const __m256 id = _mm256_set1_ps(InverseScale(AbsMax(x + 256 * b, 256), &d));
        scales[b] = d;
        QuantizeRun(x + 256 * b, 256, id, dst + 256 * b, bsums + 16 * b);
      }
      return true;
    }
    default:
      return false;
  }
}

}  // namespace qevict::activations
