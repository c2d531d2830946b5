// Small helpers shared by the scalar quantizers.
#pragma once

#include <algorithm>
#include <cmath>

namespace qevict::quantize {

// Nearest integer (ties away from zero), clamped to [lo, hi].
inline int RoundClamp(float x, int lo, int hi) {
  const int q = static_cast<int>(std::lround(x));
  return std::clamp(q, lo, hi);
}

// 1/d, or 0 when d is 0 (an all-zero block quantizes to zeros).
inline float InverseOrZero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

// The element of largest magnitude, with its sign (first one on ties).
inline float SignedAbsMax(const float* x, int n) {
  float best = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  }
  return best;
}

}  // namespace qevict::quantize
