// Helpers for KV cache tests (header only; included by kv and policy tests): a synthetic
// "model" that produces deterministic pseudo-random queries, keys and values per (layer,
// position), and a driver that pushes batches through a KvCache exactly like the model does
// (Store then Attend per layer, then EndBatch).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "kernels/rope.h"
#include "kv/kv_cache.h"
#include "util/thread_pool.h"

namespace qevict::testing {

inline KvGeometry SmallGeometry(int n_layers = 2, int n_heads = 6, int n_kv_heads = 2,
                                int head_dim = 64, int64_t max_tokens = 2048) {
  KvGeometry g;
  g.n_layers = n_layers;
  g.n_heads = n_heads;
  g.n_kv_heads = n_kv_heads;
  g.head_dim = head_dim;
  g.max_tokens = max_tokens;
  return g;
}

inline RopeConfig TestRopeConfig(int head_dim, bool neox = false) {
  RopeConfig c;
  c.rot_dims = head_dim;
  c.freq_base = 100000.0f;
  c.neox = neox;
  return c;
}

class SyntheticModel {
 public:
  SyntheticModel(const KvGeometry& geo, uint32_t seed, float query_scale = 1.0f)
      : geo_(geo), seed_(seed), query_scale_(query_scale) {}

  // q: [n_heads][head_dim] (treated as already rotated), k and v: [n_kv_heads][head_dim].
  void Activations(int layer, int32_t pos, float* q, float* k, float* v) const {
    std::mt19937 rng(seed_ * 2654435761u + static_cast<uint32_t>(layer) * 40503u +
                     static_cast<uint32_t>(pos) * 97u);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int kv = geo_.n_kv_heads * geo_.head_dim;
    for (int i = 0; i < geo_.n_heads * geo_.head_dim; ++i) q[i] = query_scale_ * normal(rng);
    for (int i = 0; i < kv; ++i) k[i] = normal(rng);
    for (int i = 0; i < kv; ++i) v[i] = normal(rng);
    if (query_override) query_override(layer, pos, q);
    if (key_override) key_override(layer, pos, k);
  }

  // Optional: replaces the query of (layer, pos) after it is drawn.
  std::function<void(int layer, int32_t pos, float* q)> query_override;
  // Optional: replaces the keys of (layer, pos) (before RoPE) after they are drawn.
  std::function<void(int layer, int32_t pos, float* k)> key_override;

  const KvGeometry& geometry() const { return geo_; }

 private:
  KvGeometry geo_;
  uint32_t seed_;
  float query_scale_;
};

// Pushes positions [first_pos, first_pos + n) through every layer; out (if not null) receives
// the attention outputs [n_layers][n][n_heads][head_dim].
inline void RunBatch(KvCache& cache, const SyntheticModel& model, int32_t first_pos, int n,
                     BatchKind kind, ThreadPool& pool, std::vector<float>* out = nullptr,
                     const std::function<void(int layer)>& after_layer = nullptr) {
  const KvGeometry& g = model.geometry();
  const int q_row = g.n_heads * g.head_dim, kv_row = g.n_kv_heads * g.head_dim;
  std::vector<float> q(static_cast<size_t>(n) * q_row), k(static_cast<size_t>(n) * kv_row),
      v(static_cast<size_t>(n) * kv_row), o(static_cast<size_t>(n) * q_row);
  std::vector<int32_t> pos(n);
  if (out != nullptr) out->assign(static_cast<size_t>(g.n_layers) * n * q_row, 0.0f);
  cache.BeginBatch(kind);
  for (int layer = 0; layer < g.n_layers; ++layer) {
    for (int i = 0; i < n; ++i) {
      pos[i] = first_pos + i;
      model.Activations(layer, pos[i], q.data() + i * q_row, k.data() + i * kv_row,
                        v.data() + i * kv_row);
    }
    cache.Store(layer, n, pos.data(), k.data(), v.data());
    cache.Attend(layer, n, pos.data(), q.data(), o.data(), pool);
    if (out != nullptr) {
      std::copy(o.begin(), o.end(), out->begin() + static_cast<size_t>(layer) * n * q_row);
    }
    if (after_layer) after_layer(layer);
  }
  cache.EndBatch(kind, pool);
}

// A prompt of prompt_len tokens in chunks of `chunk` (0: one batch), then `generate` tokens.
inline void RunPromptAndGenerate(KvCache& cache, const SyntheticModel& model, int prompt_len,
                                 int chunk, int generate, ThreadPool& pool,
                                 const std::function<void(int32_t next_pos, BatchKind)>& after_batch =
                                     nullptr) {
  int32_t p = 0;
  if (chunk <= 0) chunk = prompt_len;
  while (p < prompt_len) {
    const int n = std::min(chunk, prompt_len - p);
    const BatchKind kind = p + n == prompt_len ? BatchKind::kPromptEnd : BatchKind::kPromptChunk;
    RunBatch(cache, model, p, n, kind, pool);
    p += n;
    if (after_batch) after_batch(p, kind);
  }
  for (int i = 0; i < generate; ++i) {
    RunBatch(cache, model, p, 1, BatchKind::kGenerated, pool);
    ++p;
    if (after_batch) after_batch(p, BatchKind::kGenerated);
  }
}

}  // namespace qevict::testing
