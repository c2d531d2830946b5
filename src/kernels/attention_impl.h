// Per-SIMD-level implementations behind attention.h (internal).
#pragma once

#include <cstddef>
#include <cstdint>

namespace qevict::attention_impl {

#define QEVICT_ATTENTION_DECLS(ns)                                                          \
  namespace ns {                                                                            \
  void ScoreFp16Keys(const float* q, int n_q, const uint16_t* k, int64_t k_stride, int64_t n, \
                     int head_dim, float scale, float* scores, int64_t ld);                 \
  void AccumulateFp16Values(const float* p, int n_q, int64_t ld, const uint16_t* v,          \
                            int64_t v_stride, int64_t n, int head_dim, float* out);         \
  float ExpShiftSum(float* x, int64_t n, float max);                                        \
  float MaxOf(const float* x, int64_t n);                                                   \
  void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n);                           \
  void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n);                           \
  }

QEVICT_ATTENTION_DECLS(portable)  // attention.cc: the reference
QEVICT_ATTENTION_DECLS(highway)   // attention_hwy.cc: the Highway target the SIMD level picks

#undef QEVICT_ATTENTION_DECLS

namespace highway {
// Whether the public functions run the Highway kernels: not at SimdLevel::kPortable on x86.
bool Enabled();
// Index into HWY_EXPORT tables of the target the kernels run now (when Enabled()); valid for
// every *_hwy.cc file, since they all include kernels/hwy_targets.h (one list of targets).
size_t DispatchIndex();
// The Highway target (HWY_AVX2, HWY_AVX3, ...) the kernels run now, 0 when portable.
int64_t ActiveTarget();
// Tests: restrict the kernels to the best of `targets` (HWY_* bits), overriding the SIMD level;
// 0 returns to the level's choice.
void ForceTargetsForTest(int64_t targets);
}  // namespace highway

}  // namespace qevict::attention_impl
