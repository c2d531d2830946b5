#include "policy/snapkv_policy.h"

#include <algorithm>
#include <limits>

#include "policy/policies.h"
#include "policy/tier_fill.h"

namespace qevict {

void SnapKvPolicy::BeginRun() {
  frozen_ = false;
  scores_.clear();
  scored_limit_.clear();
}

void SnapKvPolicy::ScoreLayer(const LayerBand& band, int layer) {
  const std::span<const float> tokens = band.observation;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t half = kernel_ / 2;
  pooled_.resize(n);
  for (int64_t t = 0; t < n; ++t) {
    float m = tokens[t];
    for (int64_t u = std::max<int64_t>(0, t - half); u <= std::min(n - 1, t + half); ++u) {
      m = std::max(m, tokens[u]);
    }
    pooled_[t] = m;
  }
  const size_t resident = band.observation_offsets.size();
  const size_t in_band = band.windows.size();
  const int64_t limit = band.first_recent_index + static_cast<int64_t>(resident - in_band);
  std::vector<float>& scores = scores_[layer];
  scores.assign(limit, 0.0f);
  for (size_t j = 0; j < resident; ++j) {
    const int64_t index = j < in_band ? band.windows[j].index
                                      : band.first_recent_index + static_cast<int64_t>(j - in_band);
    const int64_t begin = band.observation_offsets[j];
    const int64_t end = j + 1 < resident ? band.observation_offsets[j + 1] : n;
    float sum = 0.0f;
    for (int64_t t = begin; t < end; ++t) sum += pooled_[t];
    scores[index] = sum;
  }
  scored_limit_[layer] = limit;
}

void SnapKvPolicy::Route(const RoutingContext& context, Plan* plan) {
  const int n_layers = static_cast<int>(context.layers.size());
  if (scores_.empty()) {
    scores_.resize(n_layers);
    scored_limit_.assign(n_layers, 0);
  }
  const bool prompt = context.trigger != BatchKind::kGenerated;
  if (!frozen_ && prompt) {
    for (int l = 0; l < n_layers; ++l) {
      if (!context.layers[l].observation.empty()) ScoreLayer(context.layers[l], l);
    }
  }
  if (context.trigger == BatchKind::kPromptEnd) frozen_ = true;
  for (int l = 0; l < n_layers; ++l) {
    const std::vector<float>& scores = scores_[l];
    const int64_t limit = scored_limit_[l];
    RankBand(context.layers[l].windows,
             [&](const BandWindow& w) {
               return w.index >= limit ? std::numeric_limits<float>::infinity() : scores[w.index];
             },
             &order_, &keys_);
    FillLayer(context, l, order_, FillRule{}, plan);
  }
}

std::unique_ptr<Policy> MakeSnapKvPolicy(const KvConfig& config) {
  return std::make_unique<SnapKvPolicy>(config);
}

}  // namespace qevict
