// Per-SIMD-level implementations behind attention.h (internal).
#pragma once

#include <cstdint>

namespace qevict::attention_impl {

#define QEVICT_ATTENTION_DECLS(ns)                                                          \
  namespace ns {                                                                            \
  void ScoreFp16Keys(const float* q, int n_q, const uint16_t* k, int64_t k_stride, int64_t n, \
                     int head_dim, float scale, float* scores, int64_t ld);                 \
  void AccumulateFp16Values(const float* p, int n_q, int64_t ld, const uint16_t* v,          \
                            int64_t v_stride, int64_t n, int head_dim, float* out);         \
  float ExpShiftSum(float* x, int64_t n, float max);                                        \
  void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n);                           \
  void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n);                           \
  }

QEVICT_ATTENTION_DECLS(portable)
QEVICT_ATTENTION_DECLS(avx2)

#undef QEVICT_ATTENTION_DECLS

}  // namespace qevict::attention_impl
