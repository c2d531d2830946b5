#include "kernels/elementwise.h"

#include <cmath>


namespace qevict {
namespace elementwise_impl::highway {
// elementwise_hwy.cc: false (nothing done) when the SIMD level is portable.
bool SiluMul(float* gate, const float* up, int64_t n);
bool GeluTanhMul(float* gate, const float* up, int64_t n);
}  // namespace elementwise_impl::highway

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float inv = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

void SiluMul(float* gate, const float* up, int64_t n) {
  if (!elementwise_impl::highway::SiluMul(gate, up, n)) SiluMulPortable(gate, up, n);
}

void SiluMulPortable(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void GeluTanhMul(float* gate, const float* up, int64_t n) {
  if (!elementwise_impl::highway::GeluTanhMul(gate, up, n)) GeluTanhMulPortable(gate, up, n);
}

void GeluTanhMulPortable(float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    gate[i] = 0.5f * g * (1.0f + std::tanh(inner)) * up[i];
  }
}

void SoftCap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

void Scale(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void AddInPlace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace qevict
