// Token selection from logits: greedy at temperature 0, otherwise top-k, then top-p (nucleus),
// then temperature softmax, drawn from a seeded generator (same seed, same tokens).
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
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);
  int32_t Sample(std::span<const float> logits);
  static int32_t Argmax(std::span<const float> logits);  // lowest index wins ties

 private:
  int32_t SampleFullDistribution(std::span<const float> logits);

  SamplerOptions options_;
  std::vector<double> probs_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

}  // namespace qevict
