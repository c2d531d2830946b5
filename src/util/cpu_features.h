// Which SIMD level kernels may use. Detected once at run time; QEVICT_SIMD=portable|avx2|avx512
// lowers it (tests use this to cover every path the machine supports). Never raised above what
// the CPU reports.
#pragma once

namespace qevict {

enum class SimdLevel { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };

SimdLevel DetectedSimdLevel();  // what the CPU supports
SimdLevel ActiveSimdLevel();    // what kernels use now
void SetSimdLevel(SimdLevel level);  // clamped to DetectedSimdLevel(); for tests and benchmarks
const char* SimdLevelName(SimdLevel level);

}  // namespace qevict
