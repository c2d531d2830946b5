// Rotary position embedding in the GGUF llama convention: rotation of adjacent pairs
// (x[2i], x[2i+1]) by pos * theta_i, theta_i = freq_base^(-2i/rot_dims), with optional Llama-3
// frequency scaling. cos/sin are tabulated per position so applying RoPE at read time (to
// dequantized keys) costs a multiply-add per element. For runs of consecutive positions (the
// keys of one window) the angle-addition tables step_cos/step_sin give the rotation at b + d
// from the one at b: cos((b+d)t) = cos(bt)cos(dt) - sin(bt)sin(dt), sin((b+d)t) =
// sin(bt)cos(dt) + cos(bt)sin(dt). A reader then loads one position's row of the big tables
// (1 KiB at rot_dims 256) per run instead of one per key, with the step rows in L1: at 32k
// positions the tables are 32 MiB and a key's rows would otherwise be a cache miss each.
#pragma once

#include <cstddef>
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
  // cos and sin of every rotated pair at the offset d (0 <= d < kSteps) of a run (see above).
  static constexpr int kSteps = 8;
  const float* step_cos(int d) const { return &step_cos_[static_cast<size_t>(d) * half_]; }
  const float* step_sin(int d) const { return &step_sin_[static_cast<size_t>(d) * half_]; }
  const RopeConfig& config() const { return config_; }
  int64_t max_positions() const { return max_positions_; }

 private:
  RopeConfig config_;
  int64_t max_positions_;
  int half_;
  std::vector<float> cos_;  // [max_positions][rot_dims/2]
  std::vector<float> sin_;
  std::vector<float> step_cos_;  // [kSteps][rot_dims/2]
  std::vector<float> step_sin_;
};

}  // namespace qevict
