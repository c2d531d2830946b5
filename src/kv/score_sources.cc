#include "kv/score_sources.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "kernels/attention.h"
#include "kv/window_priors.h"
#include "util/error.h"

namespace qevict {

// ---- attention mass -------------------------------------------------------------------------

void AttentionMassSource::Configure(const KvGeometry& geometry, int window, int64_t max_windows) {
  mass_.Configure(geometry.n_heads, geometry.n_kv_heads, window, max_windows + 1);
}

void AttentionMassSource::Accumulate(WindowTable& table, LayerWindows& l, int n,
                                     const int64_t* visible) {
  table.AddMass(l, mass_.mass(), mass_.last_mass(), n, visible);
}

void AttentionMassSource::Describe(int layer, const ResidentReader& cache,
                                   std::span<BandWindow> windows, LayerBand& band) const {
  const LayerWindows& l = cache.table().layer(layer);
  for (size_t j = 0; j < windows.size(); ++j) {
    windows[j].score = cache.table().ScoreOf(l.windows[j]);
    windows[j].last_mass = l.windows[j].last_mass;
  }
}

// ---- query-aware: the observed prompt queries' attention ----------------------------------

double QueryAwareSource::Prepare(const ScoreStep& step, const ResidentReader& cache,
                                 ThreadPool& pool) {
  active_ = ActiveAt(step, cache.observation());
  const int n_layers = cache.geometry().n_layers;
  tokens_.resize(n_layers);
  offsets_.resize(n_layers);
  const WindowTable& table = cache.table();
  for (int l = 0; l < n_layers; ++l) {
    const LayerWindows& layer = table.layer(l);
    offsets_[l].resize(active_ ? layer.windows.size() : 0);
    for (size_t j = 0; j < offsets_[l].size(); ++j) {
      offsets_[l][j] = table.SinkTokens(layer) + static_cast<int64_t>(j) * table.window();
    }
  }
  if (active_) {
    pool.ParallelFor(n_layers, 1, [&](int64_t first, int64_t last) {
      for (int64_t l = first; l < last; ++l) ComputeLayer(static_cast<int>(l), cache);
    });
  }
  return 0.0;
}

void QueryAwareSource::ComputeLayer(int layer, const ResidentReader& cache) {
  const KvGeometry& geo = cache.geometry();
  const WindowTable& table = cache.table();
  const ObservationBuffer& obs = cache.observation();
  const LayerWindows& l = table.layer(layer);
  const int hd = geo.head_dim;
  const int group = geo.n_heads / geo.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float per_head = 1.0f / static_cast<float>(group);
  const int64_t n_tokens = table.ResidentTokens(l);
  std::vector<float>* tokens = &tokens_[layer];
  tokens->assign(static_cast<size_t>(n_tokens) * geo.n_kv_heads, 0.0f);  // [kv head][token]
  thread_local std::vector<float> scores;
  for (int s = 0; s < obs.filled(layer); ++s) {
    const int64_t visible = table.VisibleTo(l, obs.position(layer, s));
    if (visible == 0) continue;
    scores.resize(static_cast<size_t>(group) * visible);
    const float* qs = obs.query(layer, s);
    for (int h = 0; h < geo.n_kv_heads; ++h) {
      cache.ScoreRange(layer, h, 0, visible, qs + static_cast<int64_t>(h) * group * hd, group,
                       scores.data(), visible, scale);
      for (int g = 0; g < group; ++g) {
        float* row = scores.data() + static_cast<int64_t>(g) * visible;
        const float inv = per_head / ExpShiftSum(row, visible, MaxOf(row, visible));
        float* out = tokens->data() + h * n_tokens;
        for (int64_t j = 0; j < visible; ++j) out[j] += row[j] * inv;
      }
    }
  }
}

void QueryAwareSource::Describe(int layer, const ResidentReader& cache,
                                std::span<BandWindow> windows, LayerBand& band) const {
  band.observation_heads = cache.geometry().n_kv_heads;
  band.observation = active_ ? std::span<const float>(tokens_[layer]) : std::span<const float>();
  band.observation_offsets = offsets_[layer];
}

// ---- window scores by index (reconstruction, key norm, expected attention) ----------------

double WindowScoreSource::Prepare(const ScoreStep& step, const ResidentReader& cache,
                                  ThreadPool& pool) {
  // External scores are for the run's first prompt end only (reconstruction handed over before
  // it; key-norm and expected-attention priors computed here, before the observation buffer
  // they read is freed); any given later are dropped.
  if (!step.first_prompt_end) Clear();
  if (!(step.limited && step.first_prompt_end && computes())) return 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  pool.ParallelFor(cache.geometry().n_layers, 1, [&](int64_t first, int64_t last) {
    for (int64_t l = first; l < last; ++l) ComputeLayer(static_cast<int>(l), cache, &scores_[l]);
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void WindowScoreSource::Describe(int layer, const ResidentReader& cache,
                                 std::span<BandWindow> windows, LayerBand& band) const {
  band.external = scores_[layer];
}

void WindowScoreSource::Consumed(const ScoreStep& step) {
  if (step.trigger != BatchKind::kGenerated) Clear();  // consumed by this prompt's routing step
}

namespace {

// The layer's resident keys and values in fp32 and its windows (band and recent alike).
void DenseWindows(int layer, const ResidentReader& cache, std::vector<float>* keys,
                  std::vector<float>* values, std::vector<int32_t>* positions,
                  std::vector<DenseWindow>* windows) {
  cache.DenseLayer(layer, keys, values, positions);
  const WindowTable& table = cache.table();
  const LayerWindows& l = table.layer(layer);
  const int sink = table.SinkTokens(l);
  for (size_t k = 0; k < l.windows.size(); ++k) {
    windows->push_back({l.windows[k].index, sink + static_cast<int64_t>(k) * table.window(),
                        table.WindowTokens(l, l.windows[k])});
  }
}

}  // namespace

void KeyNormSource::ComputeLayer(int layer, const ResidentReader& cache,
                                 std::vector<float>* out) const {
  std::vector<float> keys, values;
  std::vector<int32_t> positions;
  std::vector<DenseWindow> windows;
  DenseWindows(layer, cache, &keys, &values, &positions, &windows);
  KeyNormWindowScores(keys, cache.geometry().n_kv_heads, cache.geometry().head_dim, windows, out);
}

void ExpectedAttentionSource::ComputeLayer(int layer, const ResidentReader& cache,
                                           std::vector<float>* out) const {
  std::vector<float> keys, values;
  std::vector<int32_t> positions;
  std::vector<DenseWindow> windows;
  DenseWindows(layer, cache, &keys, &values, &positions, &windows);
  const ObservationBuffer& obs = cache.observation();
  QEVICT_CHECK(obs.held());
  if (obs.filled(layer) == 0 || positions.empty()) {
    out->assign(windows.empty() ? 0 : windows.back().index + 1, 0.0f);
    return;
  }
  const KvGeometry& geo = cache.geometry();
  ExpectedAttentionWindowScores(keys, values, obs.queries(layer), obs.positions(layer),
                                geo.n_heads, geo.n_kv_heads, geo.head_dim, cache.rope(),
                                int64_t{positions.back()} + 1, future_, windows, out);
}

std::unique_ptr<WindowScoreSource> MakeWindowScoreSource(const KvConfig& config, int n_layers,
                                                         bool wanted) {
  switch (config.score_source) {
    case ScoreSource::kKeyNorm:
      return std::make_unique<KeyNormSource>(n_layers, wanted);
    case ScoreSource::kExpectedAttention:
      return std::make_unique<ExpectedAttentionSource>(n_layers, wanted, config.expected_future);
    default:
      return std::make_unique<ReconstructionSource>(n_layers);
  }
}

}  // namespace qevict
