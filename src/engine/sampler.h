// Token selection from logits. First the logits are adjusted: logit bias, then the penalties on
// the last repeat_last_n tokens the model has seen, prompt and generated alike, as llama.cpp's
// penalty sampler does: a token in that window has its logit divided by repeat_penalty
// (multiplied when negative), then loses presence_penalty once and frequency_penalty per
// occurrence in the window. Then greedy at temperature 0, otherwise top-k, temperature softmax,
// top-p (nucleus) and min-p, drawn from a seeded generator (same seed, same tokens).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "engine/penalty_window.h"

namespace qevict {

struct SamplerOptions {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 40;            // <= 0: no limit
  float top_p = 0.95f;       // 1: no limit
  uint64_t seed = 0;
  float min_p = 0.0f;  // drop tokens less likely than min_p x the most likely one (0: off)
  float repeat_penalty = 1.0f;    // > 0; a seen token's logit is divided by it (x it if < 0)
  // The penalties' window: the last N tokens of prompt + generated (-1: all of them, 0: off).
  int repeat_last_n = 64;
  float presence_penalty = 0.0f;   // subtracted once from every token in the window
  float frequency_penalty = 0.0f;  // subtracted per occurrence in the window
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to a token's logit

  bool penalizes() const {
    return repeat_last_n != 0 &&
           (repeat_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
  }
  bool adjusts_logits() const { return penalizes() || !logit_bias.empty(); }
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);
  // Records tokens the model has seen before the first Sample (the prompt; in a conversation,
  // everything so far), in order: the penalties' window starts in them.
  void Accept(std::span<const int32_t> seen);
  // Picks the next token and records it (for the penalties).
  int32_t Sample(std::span<const float> logits);
  // The logits after bias and penalties, as the next Sample sees them (valid until it runs).
  std::span<const float> Adjusted(std::span<const float> logits);
  static int32_t Argmax(std::span<const float> logits);  // lowest index wins ties

 private:
  int32_t Pick(std::span<const float> logits);
  int32_t SampleFullDistribution(std::span<const float> logits);

  SamplerOptions options_;
  std::vector<double> probs_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<float> adjusted_;
  PenaltyWindow window_;
};

}  // namespace qevict
