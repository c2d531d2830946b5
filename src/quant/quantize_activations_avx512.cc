// AVX-512 activation quantizers: the same arithmetic as the portable ones (scale max|x| / 127,
// codes x * (1 / d) rounded half away from zero, so the bytes are identical), 16 lanes wide.
#include "quant/activations_impl.h"
#include "quant/simd_helpers_avx512.h"

namespace qevict::activations {
namespace {

inline float AbsMax16(__m512 v) {
  const __m512 a = _mm512_abs_ps(v);
  const __m256 m = _mm256_max_ps(_mm512_extractf32x8_ps(a, 0), _mm512_extractf32x8_ps(a, 1));
  __m128 r = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  r = _mm_max_ps(r, _mm_movehl_ps(r, r));
  r = _mm_max_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

inline float InverseScale(float amax, float* d) {
  *d = amax / 127.0f;
  return *d != 0.0f ? 1.0f / *d : 0.0f;
}

// Codes of 16 values (as int32 lanes) for the inverse scale id.
inline __m512i Codes16(__m512 x, __m512 id) {
  const __m512 v = _mm512_mul_ps(x, id);
  const __m512 half = _mm512_or_ps(_mm512_and_ps(v, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(0.5f));
  const __m512i q = _mm512_cvttps_epi32(_mm512_add_ps(v, half));
  return _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
}

inline int Sum16(__m512i v) {
  const __m256i s = _mm256_add_epi32(_mm512_extracti64x4_epi64(v, 0), _mm512_extracti64x4_epi64(v, 1));
  __m128i r = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4e));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xb1));
  return _mm_cvtsi128_si32(r);
}

// One block of 32: codes (as 32 bytes), scale and code sum.
inline __m256i Block32(const float* x, float* d, int* sum) {
  const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
  const float amax = AbsMax16(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
  const __m512 id = _mm512_set1_ps(InverseScale(amax, d));
  const __m512i q0 = Codes16(x0, id), q1 = Codes16(x1, id);
  *sum = Sum16(_mm512_add_epi32(q0, q1));
  return _mm256_set_m128i(_mm512_cvtsepi32_epi8(q1), _mm512_cvtsepi32_epi8(q0));
}

}  // namespace

bool QuantizeRowAvx512(const ActivationLayout& layout, const float* x, uint8_t* dst) {
  const int64_t n = layout.n;
  switch (layout.format) {
    case ActivationFormat::kQ8Block32: {
      auto* d_wide = reinterpret_cast<float*>(dst + layout.scale_offset);
      auto* sums = reinterpret_cast<float*>(dst + layout.sum_offset);
      for (int64_t b = 0; b < n / 32; ++b) {
        float d;
        int sum;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * b), Block32(x + 32 * b, &d, &sum));
        _mm256_storeu_ps(d_wide + 8 * b, _mm256_set1_ps(d));
        sums[b] = d * static_cast<float>(sum);
      }
      return true;
    }
    case ActivationFormat::kQ8Block32Interleaved: {
      auto* scales = reinterpret_cast<float*>(dst + layout.scale_offset);
      auto* sums = reinterpret_cast<float*>(dst + layout.sum_offset);
      const int64_t full_blocks = n / 512 * 16;
      for (int64_t b = 0; b < n / 32; ++b) {
        float d;
        int sum;
        const __m256i codes = Block32(x + 32 * b, &d, &sum);
        if (b < full_blocks) {
          // Four codes at a time go to lane b % 16 of the 8 chunks of the group.
          alignas(32) uint32_t chunk[8];
          _mm256_store_si256(reinterpret_cast<__m256i*>(chunk), codes);
          uint8_t* group = dst + (b / 16) * 512 + 4 * (b % 16);
          for (int k = 0; k < 8; ++k) std::memcpy(group + 64 * k, &chunk[k], 4);
        } else {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * b), codes);
        }
        scales[b] = d;
        sums[b] = d * static_cast<float>(sum);
      }
      return true;
    }
    case ActivationFormat::kQ8Block256: {
      auto* scales = reinterpret_cast<float*>(dst + layout.scale_offset);
      auto* bsums = reinterpret_cast<int16_t*>(dst + layout.sum_offset);
      for (int64_t b = 0; b < n / 256; ++b) {
        const float* xb = x + 256 * b;
        __m512 m = _mm512_setzero_ps();
        for (int j = 0; j < 16; ++j) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * j)));
        float d;
        const __m512 id = _mm512_set1_ps(InverseScale(AbsMax16(m), &d));
        scales[b] = d;
        for (int j = 0; j < 16; ++j) {
          const __m512i q = Codes16(_mm512_loadu_ps(xb + 16 * j), id);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 256 * b + 16 * j), _mm512_cvtsepi32_epi8(q));
          bsums[16 * b + j] = static_cast<int16_t>(Sum16(q));
        }
      }
      return true;
    }
    default:
      return false;
  }
}

}  // namespace qevict::activations
