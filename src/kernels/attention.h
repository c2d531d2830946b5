// Building blocks of attention over fp16 key/value rows, shared by every KV cache layout.
// A GQA group (the n_q query heads that share one KV head) is processed together so each key
// and value row is read from memory once per group.
//
// attention.cc holds the portable implementations, the reference; attention_hwy.cc the same
// functions written once over Google Highway and compiled for every target (AVX2, AVX-512,
// NEON, SVE), run at the target the SIMD level allows (util/cpu_features.h; portable: the
// reference). Its header comment describes the kernels' blocking.
#pragma once

#include <cstdint>

namespace qevict {

// scores[qi * ld + j] = scale * dot(q[qi], k[j]) for qi < n_q, j < n.
// q: [n_q][head_dim] fp32; k: n rows of head_dim fp16, `k_stride` elements apart.
void ScoreFp16Keys(const float* q, int n_q, const uint16_t* k, int64_t k_stride, int64_t n,
                   int head_dim, float scale, float* scores, int64_t ld);

// out[qi] += sum_j p[qi * ld + j] * v[j] for qi < n_q, j < n. v: n rows of fp16.
void AccumulateFp16Values(const float* p, int n_q, int64_t ld, const uint16_t* v,
                          int64_t v_stride, int64_t n, int head_dim, float* out);

// Same two operations on fp32 rows (dequantized windows, reference paths).
void ScoreFp32Keys(const float* q, int n_q, const float* k, int64_t k_stride, int64_t n,
                   int head_dim, float scale, float* scores, int64_t ld);
void AccumulateFp32Values(const float* p, int n_q, int64_t ld, const float* v, int64_t v_stride,
                          int64_t n, int head_dim, float* out);

// x[j] = exp(x[j] - max) for j < n; returns the sum (fp32 accumulation).
float ExpShiftSum(float* x, int64_t n, float max);
float MaxOf(const float* x, int64_t n);

// Converts n floats to fp16 / back (bulk, SIMD where available).
void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n);
void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n);

// Online-softmax partial result of one query over a subset of keys, and how to merge them:
// for keys split across threads (decode with few heads), each part keeps its own max.
struct SoftmaxPartial {
  float max;
  float sum;  // sum of exp(score - max)
};

}  // namespace qevict
