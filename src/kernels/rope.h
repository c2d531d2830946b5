// Rotary position embedding in the GGUF llama convention: rotation of adjacent pairs
// (x[2i], x[2i+1]) by pos * theta_i, theta_i = freq_base^(-2i/rot_dims), with optional Llama-3
// frequency scaling.
//
// The cos/sin of a position are not tabulated position by position: at Gemma 3's 32k context
// such tables took 32 MiB a configuration (two configurations: 64 MiB of the process, more than
// a 0.05 budget's whole cache). They are made from two small tables by the angle addition
// cos((a + b)t) = cos(at)cos(bt) - sin(at)sin(bt), sin((a + b)t) = sin(at)cos(bt) + cos(at)sin(bt),
// with a the position rounded down to a multiple of kStride ("coarse") and b the rest ("fine"):
// (max_positions / kStride + kStride) rows instead of max_positions (1.1 MiB at 32k, rot_dims 256).
// - Row (and Apply, which uses it) composes the double tables and rounds once to float: the
//   float of the exact value, as the per-position tables gave (a different float only where the
//   value lies within about 1e-12 of a rounding boundary).
// - Kernels that rotate many keys (the 2-bit archive's reads, kv/quant_attention_hwy.cc) compose
//   the float tables in their own vectors, a few float roundings from the exact value.
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
  static constexpr int kStride = 64;  // positions per coarse row

  Rope(const RopeConfig& config, int64_t max_positions);

  // Rotates n_heads vectors of head_dim floats (the first rot_dims of each) to position pos.
  void Apply(float* x, int n_heads, int head_dim, int64_t pos) const;
  // cos and sin of every rotated pair at pos (0 <= pos < max_positions): rot_dims/2 values
  // each, into c and s.
  void Row(int64_t pos, float* c, float* s) const;
  // The float parts of Row for kernels: cos(pos t) = coarse_cos(pos)[i] * fine_cos(pos)[i] -
  // coarse_sin(pos)[i] * fine_sin(pos)[i], and sin(pos t) = coarse_sin * fine_cos + coarse_cos *
  // fine_sin (rot_dims/2 values each).
  const float* coarse_cos(int64_t pos) const { return &coarse_cos_[(pos / kStride) * half_]; }
  const float* coarse_sin(int64_t pos) const { return &coarse_sin_[(pos / kStride) * half_]; }
  const float* fine_cos(int64_t pos) const { return &fine_cos_[(pos % kStride) * half_]; }
  const float* fine_sin(int64_t pos) const { return &fine_sin_[(pos % kStride) * half_]; }
  const RopeConfig& config() const { return config_; }
  int64_t max_positions() const { return max_positions_; }
  // What the tables hold in memory.
  int64_t table_bytes() const;

 private:
  RopeConfig config_;
  int64_t max_positions_;
  int half_;
  // [rows][rot_dims/2]: coarse rows at multiples of kStride, fine rows at 0..kStride-1.
  std::vector<double> coarse_cos_d_, coarse_sin_d_, fine_cos_d_, fine_sin_d_;
  std::vector<float> coarse_cos_, coarse_sin_, fine_cos_, fine_sin_;
};

}  // namespace qevict
