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
  const int64_t coarse_rows = (max_positions + kStride - 1) / kStride;
  const auto fill = [&](int64_t rows, int64_t step, std::vector<double>& c, std::vector<double>& sn,
                        std::vector<float>& cf, std::vector<float>& sf) {
    c.resize(static_cast<size_t>(rows) * half_);
    sn.resize(c.size());
    cf.resize(c.size());
    sf.resize(c.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int i = 0; i < half_; ++i) {
        const double angle = static_cast<double>(r * step) * theta[i];
        const size_t at = static_cast<size_t>(r) * half_ + i;
        c[at] = std::cos(angle);
        sn[at] = std::sin(angle);
        cf[at] = static_cast<float>(c[at]);
        sf[at] = static_cast<float>(sn[at]);
      }
    }
  };
  fill(coarse_rows, kStride, coarse_cos_d_, coarse_sin_d_, coarse_cos_, coarse_sin_);
  fill(kStride, 1, fine_cos_d_, fine_sin_d_, fine_cos_, fine_sin_);
}

void Rope::Row(int64_t pos, float* c, float* s) const {
  QEVICT_CHECK(pos >= 0 && pos < max_positions_);
  const double* cc = &coarse_cos_d_[static_cast<size_t>(pos / kStride) * half_];
  const double* cs = &coarse_sin_d_[static_cast<size_t>(pos / kStride) * half_];
  const double* fc = &fine_cos_d_[static_cast<size_t>(pos % kStride) * half_];
  const double* fs = &fine_sin_d_[static_cast<size_t>(pos % kStride) * half_];
  for (int i = 0; i < half_; ++i) {
    c[i] = static_cast<float>(cc[i] * fc[i] - cs[i] * fs[i]);
    s[i] = static_cast<float>(cs[i] * fc[i] + cc[i] * fs[i]);
  }
}

int64_t Rope::table_bytes() const {
  return static_cast<int64_t>((coarse_cos_d_.size() + fine_cos_d_.size()) * 2 * sizeof(double) +
                              (coarse_cos_.size() + fine_cos_.size()) * 2 * sizeof(float));
}

void Rope::Apply(float* x, int n_heads, int head_dim, int64_t pos) const {
  constexpr int kMaxHalf = 512;
  QEVICT_CHECK(half_ <= kMaxHalf);
  float c[kMaxHalf], s[kMaxHalf];
  Row(pos, c, s);
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
