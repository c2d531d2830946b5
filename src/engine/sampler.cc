#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "util/error.h"

namespace qevict {

namespace {

std::string Number(float value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(value));
  return buf;
}

}  // namespace

// The messages name the CLI flag; the server checks its fields' ranges before a Sampler exists.
Sampler::Sampler(const SamplerOptions& options)
    : options_(options), rng_(options.seed), window_(options.repeat_last_n) {
  if (!(options.temperature >= 0.0f) || !std::isfinite(options.temperature)) {
    throw Error("--temp " + Number(options.temperature) +
                ": the temperature must be a number >= 0 (0 is greedy, 0.8 the default)");
  }
  if (!(options.top_p > 0.0f && options.top_p <= 1.0f)) {
    throw Error("--top-p " + Number(options.top_p) + ": must be in (0, 1] (1 turns it off)");
  }
  if (!(options.min_p >= 0.0f && options.min_p <= 1.0f)) {
    throw Error("--min-p " + Number(options.min_p) + ": must be in [0, 1] (0 turns it off)");
  }
  if (!std::isfinite(options.repeat_penalty) || options.repeat_penalty == 0.0f) {
    throw Error("--repeat-penalty " + Number(options.repeat_penalty) +
                ": must be finite and non-zero (1 turns it off; above 1 discourages repeats)");
  }
  if (options.repeat_last_n < -1) {
    throw Error("--repeat-last-n " + std::to_string(options.repeat_last_n) +
                ": must be >= 0, or -1 for every token (0 turns the penalties off)");
  }
  if (!std::isfinite(options.presence_penalty) || !std::isfinite(options.frequency_penalty)) {
    throw Error(
        "--presence-penalty / --frequency-penalty must be finite numbers (0 turns them "
        "off; OpenAI allows -2 to 2)");
  }
}

void Sampler::Accept(std::span<const int32_t> seen) { window_.PushAll(seen); }

std::span<const float> Sampler::Adjusted(std::span<const float> logits) {
  if (!options_.adjusts_logits()) return logits;
  adjusted_.assign(logits.begin(), logits.end());
  for (const auto& [token, bias] : options_.logit_bias) {
    if (token >= 0 && static_cast<size_t>(token) < adjusted_.size()) adjusted_[token] += bias;
  }
  if (!options_.penalizes()) return adjusted_;
  // llama.cpp's order: the repeat penalty scales, then presence and frequency subtract.
  for (const auto& [token, count] : window_.counts()) {
    if (token < 0 || static_cast<size_t>(token) >= adjusted_.size()) continue;
    float& l = adjusted_[token];
    l = l > 0.0f ? l / options_.repeat_penalty : l * options_.repeat_penalty;
    l -= options_.presence_penalty + options_.frequency_penalty * static_cast<float>(count);
  }
  return adjusted_;
}

int32_t Sampler::Argmax(std::span<const float> logits) {
  QEVICT_CHECK(!logits.empty());
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

// No truncation: draw from the whole softmax without sorting 49k candidates per token.
int32_t Sampler::SampleFullDistribution(std::span<const float> logits) {
  const float max = logits[Argmax(logits)];
  probs_.resize(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    probs_[i] = std::exp((logits[i] - max) / options_.temperature);
    total += probs_[i];
  }
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  for (size_t i = 0; i < logits.size(); ++i) {
    r -= probs_[i];
    if (r <= 0.0) return static_cast<int32_t>(i);
  }
  return Argmax(logits);
}

int32_t Sampler::Sample(std::span<const float> logits) {
  const int32_t token = Pick(Adjusted(logits));
  window_.Push(token);
  return token;
}

int32_t Sampler::Pick(std::span<const float> logits) {
  if (options_.temperature == 0.0f) return Argmax(logits);
  if (options_.top_k <= 0 && options_.top_p >= 1.0f && options_.min_p <= 0.0f) {
    return SampleFullDistribution(logits);
  }
  candidates_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_[i] = {logits[i], static_cast<int32_t>(i)};
  }
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < keep) {
    keep = static_cast<size_t>(options_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);
  // Softmax at temperature over the kept candidates (sorted, so [0] is the max).
  const float max = candidates_[0].first;
  double total = 0.0;
  std::vector<double> probs(keep);
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((candidates_[i].first - max) / options_.temperature);
    total += probs[i];
  }
  // Nucleus: the smallest prefix whose probability reaches top_p.
  size_t nucleus = keep;
  double cumulative = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += probs[i] / total;
    if (cumulative >= options_.top_p) {
      nucleus = i + 1;
      break;
    }
  }
  // Min-p: of the nucleus, only tokens at least min_p as likely as the most likely one.
  if (options_.min_p > 0.0f) {
    size_t kept = 1;
    while (kept < nucleus && probs[kept] >= options_.min_p * probs[0]) ++kept;
    nucleus = kept;
  }
  double nucleus_total = 0.0;
  for (size_t i = 0; i < nucleus; ++i) nucleus_total += probs[i];
  std::uniform_real_distribution<double> uniform(0.0, nucleus_total);
  double r = uniform(rng_);
  for (size_t i = 0; i < nucleus; ++i) {
    r -= probs[i];
    if (r <= 0.0) return candidates_[i].second;
  }
  return candidates_[nucleus - 1].second;
}

}  // namespace qevict
