// Score sources the tiered cache computes itself at the run's first prompt end, for policies
// that route on external window scores (qevict-zip, kvzip; KvConfig::score_source): key norm and
// expected attention (kv/window_priors.h), and the hand-over of scores computed elsewhere
// (reconstruction: engine/reconstruction.h).
#include "kv/tiered_cache.h"
#include "kv/window_priors.h"
#include "util/error.h"

namespace qevict {

void TieredCache::SetExternalScores(int layer, std::vector<float> scores) {
  QEVICT_CHECK(layer >= 0 && layer < geo_.n_layers);
  layers_[layer].external = std::move(scores);
}

void TieredCache::ComputePriors(int layer, std::vector<float>* scores) const {
  const LayerState& l = layers_[layer];
  std::vector<float> keys, values;
  std::vector<int32_t> positions;
  DenseLayer(layer, &keys, &values, &positions);
  std::vector<DenseWindow> windows;  // band and recent windows alike
  const int sink = SinkTokens(l);
  for (size_t k = 0; k < l.windows.size(); ++k) {
    windows.push_back({l.windows[k].index, sink + static_cast<int64_t>(k) * window_,
                       WindowTokens(l, l.windows[k])});
  }
  if (config_.score_source == ScoreSource::kKeyNorm) {
    KeyNormWindowScores(keys, geo_.n_kv_heads, geo_.head_dim, windows, scores);
    return;
  }
  QEVICT_CHECK(config_.score_source == ScoreSource::kExpectedAttention && obs_held_);
  if (l.obs_filled == 0 || positions.empty()) {
    scores->assign(windows.empty() ? 0 : windows.back().index + 1, 0.0f);
    return;
  }
  const int64_t q_floats = int64_t{geo_.n_heads} * geo_.head_dim;
  const std::span<const float> queries(l.obs_queries.data(), l.obs_filled * q_floats);
  const std::span<const int32_t> query_pos(l.obs_pos.data(), l.obs_filled);
  ExpectedAttentionWindowScores(keys, values, queries, query_pos, geo_.n_heads, geo_.n_kv_heads,
                                geo_.head_dim, rope_, int64_t{positions.back()} + 1,
                                config_.expected_future, windows, scores);
}

}  // namespace qevict
