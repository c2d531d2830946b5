// Attention building blocks over one quantized window (layout in kv/kv_quantizer.h). Keys are
// dequantized and rotated to their original positions in fp32 at read time, values are
// dequantized, one row at a time in registers/L1: nothing is written back and no dense cache is
// rebuilt. The same contract as ScoreFp16Keys / AccumulateFp16Values (kernels/attention.h).
#pragma once

#include <cstdint>

#include "kernels/rope.h"
#include "kv/kv_quantizer.h"

namespace qevict {

// scores[qi * ld + j] = scale * dot(q[qi], rope(key[t0 + j], positions[j])) for j < t1 - t0.
void ScoreQuantKeys(const QuantLayout& layout, const uint8_t* block, int head, int t0, int t1,
                    const int32_t* positions, const Rope& rope, const float* q, int n_q,
                    float scale, float* scores, int64_t ld);

// out[qi] += sum_j p[qi * ld + j] * value[t0 + j] for j < t1 - t0.
void AccumulateQuantValues(const QuantLayout& layout, const uint8_t* block, int head, int t0,
                           int t1, const float* p, int n_q, int64_t ld, float* out);

// Rows [t0, t1) of one head's keys, dequantized and rotated: out[(t - t0) * head_dim + d].
void DequantizeRotatedKeys(const QuantLayout& layout, const uint8_t* block, int head, int t0,
                           int t1, const int32_t* positions, const Rope& rope, float* out);

namespace quant_attention_impl {
// Highway versions (quant_attention_hwy.cc) on the target the SIMD level picks, as for
// kernels/attention.h; false, having done nothing, when the level is portable or the shape is
// not covered (the caller then runs the portable code).
namespace highway {
bool ScoreQuantKeys(const QuantLayout& layout, const uint8_t* block, int head, int t0, int t1,
                    const int32_t* positions, const Rope& rope, const float* q, int n_q,
                    float scale, float* scores, int64_t ld);
bool AccumulateQuantValues(const QuantLayout& layout, const uint8_t* block, int head, int t0,
                           int t1, const float* p, int n_q, int64_t ld, float* out);
// The Highway target these run now (HWY_AVX2, HWY_AVX3, ...), 0 when portable.
int64_t ActiveTarget();
}  // namespace highway
}  // namespace quant_attention_impl

}  // namespace qevict
