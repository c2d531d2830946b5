// Row-wise operations of the transformer block (fp32).
#pragma once

#include <cstdint>

namespace qevict {

// out = x / rms(x) * weight over n elements (out may alias x).
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);
// gate[i] = silu(gate[i]) * up[i].
void SiluMul(float* gate, const float* up, int64_t n);
// gate[i] = gelu(gate[i]) * up[i], GELU with the tanh approximation (GeGLU, gemma).
void GeluTanhMul(float* gate, const float* up, int64_t n);
// The scalar reference versions (tests compare the dispatched SIMD kernels with them).
void SiluMulPortable(float* gate, const float* up, int64_t n);
void GeluTanhMulPortable(float* gate, const float* up, int64_t n);
// x[i] = cap * tanh(x[i] / cap) (gemma's logit soft-capping).
void SoftCap(float* x, int64_t n, float cap);
// x[i] *= s.
void Scale(float* x, int64_t n, float s);
// x[i] += y[i].
void AddInPlace(float* x, const float* y, int64_t n);

}  // namespace qevict
