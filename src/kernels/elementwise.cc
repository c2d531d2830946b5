#include "kernels/elementwise.h"

#include <cmath>

namespace qevict {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float inv = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

void SiluMul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void AddInPlace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace qevict
