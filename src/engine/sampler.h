// Token selection from logits. First the logits are adjusted: logit bias, then the penalties on
// tokens already generated (llama.cpp's repeat penalty over the last repeat_last_n generated
// tokens; OpenAI's presence and frequency penalties over every generated token). Then greedy at
// temperature 0, otherwise top-k, temperature softmax, top-p (nucleus) and min-p, drawn from a
// seeded generator (same seed, same tokens). Penalties see only generated tokens, not the
// prompt (llama.cpp also counts the prompt's last tokens): a long document in the prompt would
// otherwise penalise every word the answer must copy from it.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace qevict {

struct SamplerOptions {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 40;            // <= 0: no limit
  float top_p = 0.95f;       // 1: no limit
  uint64_t seed = 0;
  float min_p = 0.0f;  // drop tokens less likely than min_p x the most likely one (0: off)
  float repeat_penalty = 1.0f;    // > 0; a seen token's logit is divided by it (x it if < 0)
  int repeat_last_n = 64;         // generated tokens the repeat penalty looks at (-1: all)
  float presence_penalty = 0.0f;  // subtracted once from every token generated so far
  float frequency_penalty = 0.0f;  // subtracted per occurrence
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to a token's logit

  bool adjusts_logits() const {
    return repeat_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f ||
           !logit_bias.empty();
  }
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);
  // Picks the next token and records it as generated (for the penalties).
  int32_t Sample(std::span<const float> logits);
  static int32_t Argmax(std::span<const float> logits);  // lowest index wins ties

 private:
  int32_t Pick(std::span<const float> logits);
  int32_t SampleFullDistribution(std::span<const float> logits);
  std::span<const float> Adjusted(std::span<const float> logits);

  SamplerOptions options_;
  std::vector<double> probs_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<float> adjusted_;
  std::vector<int32_t> generated_;
};

}  // namespace qevict
