// Rotary position embedding in the GGUF llama convention: rotation of adjacent pairs
// (x[2i], x[2i+1]) by pos * theta_i, theta_i = freq_base^(-2i/rot_dims), with optional Llama-3
// frequency scaling. cos/sin are tabulated per position so applying RoPE at read time (to
// dequantized keys) costs a multiply-add per element.
#pragma once

#include <cstdint>
#include <vector>

namespace qevict {

struct RopeConfig {
  int rot_dims = 0;          // rotated dimensions (== head_dim for llama)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;   // linear position scaling (1 = none)
  // Llama-3 style scaling (rope_scaling.type == "llama3"); factor 0 disables it.
  float llama3_factor = 0.0f;
  float llama3_low_freq_factor = 1.0f;
  float llama3_high_freq_factor = 4.0f;
  int llama3_original_context = 8192;
  bool neox = false;  // rotate (x[i], x[i + rot_dims/2]) instead of adjacent pairs (qwen2)
  // Per-pair frequency divisors from a rope_freqs tensor (llama.cpp's Llama-3.1 files); when
  // present they replace the llama3_* computation. Empty or rot_dims/2 values.
  std::vector<float> freq_factors;
};

class Rope {
 public:
  Rope(const RopeConfig& config, int64_t max_positions);

  // Rotates n_heads vectors of head_dim floats (the first rot_dims of each) to position pos.
  void Apply(float* x, int n_heads, int head_dim, int64_t pos) const;
  // cos and sin of every rotated pair at pos: rot_dims/2 values each.
  const float* cos_at(int64_t pos) const { return &cos_[pos * half_]; }
  const float* sin_at(int64_t pos) const { return &sin_[pos * half_]; }
  const RopeConfig& config() const { return config_; }
  int64_t max_positions() const { return max_positions_; }

 private:
  RopeConfig config_;
  int64_t max_positions_;
  int half_;
  std::vector<float> cos_;  // [max_positions][rot_dims/2]
  std::vector<float> sin_;
};

}  // namespace qevict
