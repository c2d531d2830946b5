// For tests of the SIMD kernels: every way they can run on this machine, that is each SIMD
// level up to the detected one, and each compiled Highway target forced (the *_hwy.cc files
// share one target list, kernels/hwy_targets.h, and one dispatch index).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/attention_impl.h"
#include "util/cpu_features.h"

namespace qevict::testing {

struct SimdPath {
  std::string name;
  SimdLevel level;
  int64_t target;  // forced Highway target, 0 for the level's choice
};

inline std::vector<SimdPath> SimdPaths() {
  namespace hw = attention_impl::highway;
  std::vector<SimdPath> paths;
  for (int l = 0; l <= static_cast<int>(DetectedSimdLevel()); ++l) {
    const auto level = static_cast<SimdLevel>(l);
    paths.push_back({std::string("level ") + SimdLevelName(level), level, 0});
  }
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hw::ForceTargetsForTest(target);
    const bool compiled = hw::ActiveTarget() == target;  // the *_hwy.cc files skip SSSE3/SSE4
    hw::ForceTargetsForTest(0);
    if (compiled) {
      paths.push_back(
          {std::string("target ") + hwy::TargetName(target), DetectedSimdLevel(), target});
    }
  }
  return paths;
}

inline void SelectSimdPath(const SimdPath& path) {
  SetSimdLevel(path.level);
  attention_impl::highway::ForceTargetsForTest(path.target);
}

// Back to what the machine runs by default.
inline void RestoreSimdPath() {
  attention_impl::highway::ForceTargetsForTest(0);
  SetSimdLevel(DetectedSimdLevel());
}

}  // namespace qevict::testing
