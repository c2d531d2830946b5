#include "kernels/attention.h"

#include <cmath>

#include "kernels/attention_impl.h"
#include "util/fp16.h"

namespace qevict {
namespace attention_impl::portable {

void ScoreFp16Keys(const float* q, int n_q, const uint16_t* k, int64_t k_stride, int64_t n,
                   int head_dim, float scale, float* scores, int64_t ld) {
  for (int64_t j = 0; j < n; ++j) {
    const uint16_t* row = k + j * k_stride;
    for (int qi = 0; qi < n_q; ++qi) {
      const float* qv = q + static_cast<int64_t>(qi) * head_dim;
      float acc = 0.0f;
      for (int d = 0; d < head_dim; ++d) acc += qv[d] * Fp16ToFp32(row[d]);
      scores[qi * ld + j] = acc * scale;
    }
  }
}

void AccumulateFp16Values(const float* p, int n_q, int64_t ld, const uint16_t* v,
                          int64_t v_stride, int64_t n, int head_dim, float* out) {
  for (int64_t j = 0; j < n; ++j) {
    const uint16_t* row = v + j * v_stride;
    for (int qi = 0; qi < n_q; ++qi) {
      const float w = p[qi * ld + j];
      float* o = out + static_cast<int64_t>(qi) * head_dim;
      for (int d = 0; d < head_dim; ++d) o[d] += w * Fp16ToFp32(row[d]);
    }
  }
}

float ExpShiftSum(float* x, int64_t n, float max) {
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - max);
    sum += x[j];
  }
  return sum;
}

float MaxOf(const float* x, int64_t n) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp32ToFp16(src[i]);
}

void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(src[i]);
}

}  // namespace attention_impl::portable

namespace hw = attention_impl::highway;
namespace ref = attention_impl::portable;

void ScoreFp16Keys(const float* q, int n_q, const uint16_t* k, int64_t k_stride, int64_t n,
                   int head_dim, float scale, float* scores, int64_t ld) {
  if (hw::Enabled()) return hw::ScoreFp16Keys(q, n_q, k, k_stride, n, head_dim, scale, scores, ld);
  ref::ScoreFp16Keys(q, n_q, k, k_stride, n, head_dim, scale, scores, ld);
}

void AccumulateFp16Values(const float* p, int n_q, int64_t ld, const uint16_t* v,
                          int64_t v_stride, int64_t n, int head_dim, float* out) {
  if (hw::Enabled()) return hw::AccumulateFp16Values(p, n_q, ld, v, v_stride, n, head_dim, out);
  ref::AccumulateFp16Values(p, n_q, ld, v, v_stride, n, head_dim, out);
}

void ScoreFp32Keys(const float* q, int n_q, const float* k, int64_t k_stride, int64_t n,
                   int head_dim, float scale, float* scores, int64_t ld) {
  for (int64_t j = 0; j < n; ++j) {
    const float* row = k + j * k_stride;
    for (int qi = 0; qi < n_q; ++qi) {
      const float* qv = q + static_cast<int64_t>(qi) * head_dim;
      float acc = 0.0f;
      for (int d = 0; d < head_dim; ++d) acc += qv[d] * row[d];
      scores[qi * ld + j] = acc * scale;
    }
  }
}

void AccumulateFp32Values(const float* p, int n_q, int64_t ld, const float* v, int64_t v_stride,
                          int64_t n, int head_dim, float* out) {
  for (int64_t j = 0; j < n; ++j) {
    const float* row = v + j * v_stride;
    for (int qi = 0; qi < n_q; ++qi) {
      const float w = p[qi * ld + j];
      float* o = out + static_cast<int64_t>(qi) * head_dim;
      for (int d = 0; d < head_dim; ++d) o[d] += w * row[d];
    }
  }
}

float ExpShiftSum(float* x, int64_t n, float max) {
  return hw::Enabled() ? hw::ExpShiftSum(x, n, max) : ref::ExpShiftSum(x, n, max);
}

float MaxOf(const float* x, int64_t n) {
  return hw::Enabled() ? hw::MaxOf(x, n) : ref::MaxOf(x, n);
}

void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n) {
  if (hw::Enabled()) return hw::Fp32ToFp16Row(src, dst, n);
  ref::Fp32ToFp16Row(src, dst, n);
}

void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n) {
  if (hw::Enabled()) return hw::Fp16ToFp32Row(src, dst, n);
  ref::Fp16ToFp32Row(src, dst, n);
}

}  // namespace qevict
