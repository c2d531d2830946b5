// AVX2 versions of the gated activations (kernels/elementwise.h), through
// sigmoid(z) = 1 / (1 + exp(-z)) evaluated with exp of a non-positive argument only.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/simd_avx2.h"

namespace qevict::elementwise_impl::avx2 {
namespace {

// sigmoid(z) for 8 lanes: e = exp(-|z|); z >= 0 -> 1 / (1 + e), z < 0 -> e / (1 + e).
inline __m256 Sigmoid(__m256 z) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 e = Exp(_mm256_or_ps(z, sign));  // exp(-|z|)
  const __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  const __m256 negative = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
  return _mm256_blendv_ps(inv, _mm256_mul_ps(e, inv), negative);
}

float SigmoidScalar(float z) {
  const float e = std::exp(-std::fabs(z));
  return z >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

}  // namespace

void SiluMul(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_mul_ps(g, Sigmoid(g));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) gate[i] = gate[i] * SigmoidScalar(gate[i]) * up[i];
}

// gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
void GeluTanhMul(float* gate, const float* up, int64_t n) {
  constexpr float kTwoSqrt2OverPi = 2.0f * 0.7978845608028654f;
  const __m256 a = _mm256_set1_ps(kTwoSqrt2OverPi);
  const __m256 b = _mm256_set1_ps(kTwoSqrt2OverPi * 0.044715f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    const __m256 x2 = _mm256_mul_ps(x, x);
    const __m256 z = _mm256_mul_ps(x, _mm256_fmadd_ps(b, x2, a));  // 2u
    const __m256 gelu = _mm256_mul_ps(x, Sigmoid(z));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float x = gate[i];
    gate[i] = x * SigmoidScalar(x * (kTwoSqrt2OverPi + kTwoSqrt2OverPi * 0.044715f * x * x)) * up[i];
  }
}

}  // namespace qevict::elementwise_impl::avx2
