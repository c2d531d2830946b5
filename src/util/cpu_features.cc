#include "util/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace qevict {
namespace {

#if defined(__x86_64__)
// F16C is CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does not know "f16c").
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & (1u << 29)) != 0;
}
#endif

SimdLevel Detect() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    HasF16c() && __builtin_cpu_supports("bmi2");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
  if (avx512) return SimdLevel::kAvx512;
  if (avx2) return SimdLevel::kAvx2;
#endif
  return SimdLevel::kPortable;
}

SimdLevel Initial() {
  SimdLevel level = Detect();
  if (const char* env = std::getenv("QEVICT_SIMD")) {
    SimdLevel wanted = level;
    if (std::strcmp(env, "portable") == 0) wanted = SimdLevel::kPortable;
    if (std::strcmp(env, "avx2") == 0) wanted = SimdLevel::kAvx2;
    if (std::strcmp(env, "avx512") == 0) wanted = SimdLevel::kAvx512;
    level = std::min(level, wanted);
  }
  return level;
}

std::atomic<SimdLevel>& Active() {
  static std::atomic<SimdLevel> active{Initial()};
  return active;
}

}  // namespace

SimdLevel DetectedSimdLevel() {
  static const SimdLevel detected = Detect();
  return detected;
}

SimdLevel ActiveSimdLevel() { return Active().load(std::memory_order_relaxed); }

void SetSimdLevel(SimdLevel level) {
  Active().store(std::min(level, DetectedSimdLevel()), std::memory_order_relaxed);
}

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512: return "avx512";
    case SimdLevel::kAvx2: return "avx2";
    default: return "portable";
  }
}

}  // namespace qevict
