// The portable reference of the quantized-window reads. The Highway kernels
// (quant_attention_hwy.cc) run instead where the SIMD level and the shape allow.
#include "kv/quant_attention.h"

namespace qevict {

void DequantizeRotatedKeys(const QuantLayout& layout, const uint8_t* block, int head, int t0,
                           int t1, const int32_t* positions, const Rope& rope, float* out) {
  DequantizeKeyRows(layout, block, head, t0, t1, out);
  for (int t = t0; t < t1; ++t) {
    rope.Apply(out + static_cast<int64_t>(t - t0) * layout.head_dim, 1, layout.head_dim,
               positions[t - t0]);
  }
}

void ScoreQuantKeys(const QuantLayout& layout, const uint8_t* block, int head, int t0, int t1,
                    const int32_t* positions, const Rope& rope, const float* q, int n_q,
                    float scale, float* scores, int64_t ld) {
  if (quant_attention_impl::highway::ScoreQuantKeys(layout, block, head, t0, t1, positions, rope,
                                                    q, n_q, scale, scores, ld)) {
    return;
  }
  const int hd = layout.head_dim;
  float row[1024];
  for (int t = t0; t < t1; ++t) {
    DequantizeRotatedKeys(layout, block, head, t, t + 1, positions + (t - t0), rope, row);
    for (int qi = 0; qi < n_q; ++qi) {
      const float* qv = q + static_cast<int64_t>(qi) * hd;
      float acc = 0.0f;
      for (int d = 0; d < hd; ++d) acc += qv[d] * row[d];
      scores[qi * ld + (t - t0)] = acc * scale;
    }
  }
}

void AccumulateQuantValues(const QuantLayout& layout, const uint8_t* block, int head, int t0,
                           int t1, const float* p, int n_q, int64_t ld, float* out) {
  if (quant_attention_impl::highway::AccumulateQuantValues(layout, block, head, t0, t1, p, n_q,
                                                           ld, out)) {
    return;
  }
  const int hd = layout.head_dim;
  float row[1024];
  for (int t = t0; t < t1; ++t) {
    DequantizeValueRows(layout, block, head, t, t + 1, row);
    for (int qi = 0; qi < n_q; ++qi) {
      const float w = p[qi * ld + (t - t0)];
      float* o = out + static_cast<int64_t>(qi) * hd;
      for (int d = 0; d < hd; ++d) o[d] += w * row[d];
    }
  }
}

}  // namespace qevict
