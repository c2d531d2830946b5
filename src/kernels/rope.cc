#include "kernels/rope.h"

#include <cmath>

#include "util/error.h"

namespace qevict {
namespace {

// Divisor applied to pair i's frequency by Llama-3 scaling (1 when disabled).
double Llama3Divisor(const RopeConfig& c, double freq) {
  if (c.llama3_factor <= 0.0f) return 1.0;
  const double kPi = 3.14159265358979323846;
  const double low_wavelen = c.llama3_original_context / c.llama3_low_freq_factor;
  const double high_wavelen = c.llama3_original_context / c.llama3_high_freq_factor;
  const double wavelen = 2.0 * kPi / freq;
  if (wavelen < high_wavelen) return 1.0;
  if (wavelen > low_wavelen) return c.llama3_factor;
  const double smooth = (c.llama3_original_context / wavelen - c.llama3_low_freq_factor) /
                        (c.llama3_high_freq_factor - c.llama3_low_freq_factor);
  const double scaled = (1.0 - smooth) * freq / c.llama3_factor + smooth * freq;
  return freq / scaled;
}

}  // namespace

Rope::Rope(const RopeConfig& config, int64_t max_positions)
    : config_(config), max_positions_(max_positions), half_(config.rot_dims / 2) {
  QEVICT_CHECK(config.rot_dims > 0 && config.rot_dims % 2 == 0 && max_positions > 0);
  QEVICT_CHECK(config.freq_factors.empty() ||
               static_cast<int>(config.freq_factors.size()) == half_);
  std::vector<double> theta(half_);
  for (int i = 0; i < half_; ++i) {
    double freq = std::pow(static_cast<double>(config.freq_base), -2.0 * i / config.rot_dims);
    if (!config.freq_factors.empty()) {
      freq /= config.freq_factors[i];
    } else {
      freq /= Llama3Divisor(config, freq);
    }
    theta[i] = freq * config.freq_scale;
  }
  step_cos_.resize(static_cast<size_t>(kSteps) * half_);
  step_sin_.resize(step_cos_.size());
  for (int d = 0; d < kSteps; ++d) {
    for (int i = 0; i < half_; ++i) {
      step_cos_[d * half_ + i] = static_cast<float>(std::cos(d * theta[i]));
      step_sin_[d * half_ + i] = static_cast<float>(std::sin(d * theta[i]));
    }
  }
  cos_.resize(static_cast<size_t>(max_positions) * half_);
  sin_.resize(cos_.size());
  for (int64_t p = 0; p < max_positions; ++p) {
    for (int i = 0; i < half_; ++i) {
      const double angle = static_cast<double>(p) * theta[i];
      cos_[p * half_ + i] = static_cast<float>(std::cos(angle));
      sin_[p * half_ + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void Rope::Apply(float* x, int n_heads, int head_dim, int64_t pos) const {
  QEVICT_CHECK(pos >= 0 && pos < max_positions_);
  const float* c = cos_at(pos);
  const float* s = sin_at(pos);
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    if (config_.neox) {
      for (int i = 0; i < half_; ++i) {
        const float a = v[i], b = v[i + half_];
        v[i] = a * c[i] - b * s[i];
        v[i + half_] = a * s[i] + b * c[i];
      }
    } else {
      for (int i = 0; i < half_; ++i) {
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * c[i] - b * s[i];
        v[2 * i + 1] = a * s[i] + b * c[i];
      }
    }
  }
}

}  // namespace qevict
