// AVX2 + FMA + F16C versions of the attention building blocks (head_dim a multiple of 8).
#include <immintrin.h>

#include <algorithm>

#include "kernels/attention_impl.h"
#include "kernels/simd_avx2.h"

namespace qevict::attention_impl::avx2 {

void ScoreFp16Keys(const float* q, int n_q, const uint16_t* k, int64_t k_stride, int64_t n,
                   int head_dim, float scale, float* scores, int64_t ld) {
  const int chunks = head_dim / 8;
  for (int64_t j = 0; j < n; ++j) {
    const uint16_t* row = k + j * k_stride;
    __m256 kv[32];
    for (int c = 0; c < chunks && c < 32; ++c) {
      kv[c] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 8 * c)));
    }
    for (int qi = 0; qi < n_q; ++qi) {
      const float* qv = q + static_cast<int64_t>(qi) * head_dim;
      __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
      int c = 0;
      for (; c + 1 < chunks; c += 2) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(qv + 8 * c), kv[c], acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(qv + 8 * c + 8), kv[c + 1], acc1);
      }
      if (c < chunks) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(qv + 8 * c), kv[c], acc0);
      scores[qi * ld + j] = HorizontalSum(_mm256_add_ps(acc0, acc1)) * scale;
    }
  }
}

namespace {

// Many queries (a block of prompt tokens): values are converted to fp32 once per chunk of keys
// and each query's output row stays in registers while it sweeps the chunk. Every output element
// still receives fma(p_j, v_j, .) in key order, so results equal the row-at-a-time loop's.
template <int kChunks>
void AccumulateManyQueries(const float* p, int n_q, int64_t ld, const uint16_t* v,
                           int64_t v_stride, int64_t n, float* out) {
  constexpr int kHd = 8 * kChunks;
  constexpr int64_t kKeys = 32;
  alignas(32) float staged[kKeys * kHd];
  for (int64_t j0 = 0; j0 < n; j0 += kKeys) {
    const int64_t keys = std::min(kKeys, n - j0);
    for (int64_t j = 0; j < keys; ++j) {
      const uint16_t* row = v + (j0 + j) * v_stride;
      for (int c = 0; c < kChunks; ++c) {
        _mm256_store_ps(staged + j * kHd + 8 * c,
                        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 8 * c))));
      }
    }
    for (int qi = 0; qi < n_q; ++qi) {
      float* o = out + static_cast<int64_t>(qi) * kHd;
      const float* pq = p + qi * ld + j0;
      __m256 acc[kChunks];
      for (int c = 0; c < kChunks; ++c) acc[c] = _mm256_loadu_ps(o + 8 * c);
      for (int64_t j = 0; j < keys; ++j) {
        const __m256 w = _mm256_set1_ps(pq[j]);
        for (int c = 0; c < kChunks; ++c) {
          acc[c] = _mm256_fmadd_ps(w, _mm256_load_ps(staged + j * kHd + 8 * c), acc[c]);
        }
      }
      for (int c = 0; c < kChunks; ++c) _mm256_storeu_ps(o + 8 * c, acc[c]);
    }
  }
}

}  // namespace

void AccumulateFp16Values(const float* p, int n_q, int64_t ld, const uint16_t* v,
                          int64_t v_stride, int64_t n, int head_dim, float* out) {
  if (n_q >= 4 && head_dim == 64) return AccumulateManyQueries<8>(p, n_q, ld, v, v_stride, n, out);
  if (n_q >= 4 && head_dim == 128) {
    return AccumulateManyQueries<16>(p, n_q, ld, v, v_stride, n, out);
  }
  const int chunks = head_dim / 8;
  for (int64_t j = 0; j < n; ++j) {
    const uint16_t* row = v + j * v_stride;
    __m256 vv[32];
    for (int c = 0; c < chunks && c < 32; ++c) {
      vv[c] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 8 * c)));
    }
    for (int qi = 0; qi < n_q; ++qi) {
      const __m256 w = _mm256_set1_ps(p[qi * ld + j]);
      float* o = out + static_cast<int64_t>(qi) * head_dim;
      for (int c = 0; c < chunks; ++c) {
        _mm256_storeu_ps(o + 8 * c, _mm256_fmadd_ps(w, vv[c], _mm256_loadu_ps(o + 8 * c)));
      }
    }
  }
}

float ExpShiftSum(float* x, int64_t n, float max) {
  const __m256 vmax = _mm256_set1_ps(max);
  __m256 sum = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmax));
    _mm256_storeu_ps(x + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  float total = HorizontalSum(sum);
  if (j < n) {
    alignas(32) float tail[8];
    const int64_t rest = n - j;
    for (int i = 0; i < 8; ++i) tail[i] = i < rest ? x[j + i] - max : -1000.0f;
    const __m256 e = Exp(_mm256_load_ps(tail));
    _mm256_store_ps(tail, e);
    for (int64_t i = 0; i < rest; ++i) {
      x[j + i] = tail[i];
      total += tail[i];
    }
  }
  return total;
}

void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) {
    dst[i] = static_cast<uint16_t>(
        _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(src[i]), _MM_FROUND_TO_NEAREST_INT), 0));
  }
}

void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(src[i])));
}

}  // namespace qevict::attention_impl::avx2
