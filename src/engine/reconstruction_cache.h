// The read-only view of a session's cache that a reconstruction pass (reconstruction.h) runs
// through: a KvCache whose Store keeps the pass's own keys and values in scratch (never in the
// session's cache) and whose Attend attends over the session's resident tokens (read through
// KvCache::DenseLayer, as attention sees them) followed by the scratch tokens, causally. For
// every global layer it records, per KV head and resident token of the session's cache, the
// largest softmax probability any query of the pass gave it from any query head of that KV
// head's group (KVzip's per-head score, before the reduction to windows). Nothing of the session's cache is written.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_cache.h"
#include "model/model_config.h"
#include "model/transformer_model.h"

namespace qevict {

class ReconstructionCache final : public KvCache {
 public:
  // base: the session's cache (model layer indices); geometry: its heads and head size;
  // policy_layer[l]: the index of model layer l in the policy cache (-1 for a sliding layer,
  // which is attended but not scored). ropes must cover every position of the pass.
  ReconstructionCache(const KvCache& base, const ModelConfig& config, const KvGeometry& geometry,
                      const RopeTables& ropes, std::vector<int> policy_layer);

  void BeginRun(int64_t, int64_t) override {}
  void Store(int layer, int n, const int32_t* pos, const float* k, const float* v) override;
  void Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
              ThreadPool& pool) override;
  void EndBatch(BatchKind, ThreadPool&) override {}
  KvStats Stats() const override { return {}; }
  const KvGeometry& geometry() const override { return geo_; }
  int64_t n_tokens() const override { return base_.n_tokens(); }

  // [policy layer][KV head][resident token of the base, attention order]: the max probability
  // so far, KV heads one after another (n_kv x tokens floats).
  const std::vector<std::vector<float>>& token_max() const { return token_max_; }
  // The most bytes of scratch held at once (staged tokens, one layer's context copy, the
  // per-item maxima), for the cost report.
  int64_t peak_scratch_bytes() const { return peak_bytes_; }

 private:
  const KvCache& base_;
  const ModelConfig& config_;
  KvGeometry geo_;
  const RopeTables& ropes_;
  std::vector<int> policy_layer_;
  std::vector<std::vector<float>> token_max_;
  // One layer at a time: the base's tokens per KV head, [n_kv][tokens][head_dim] fp16, and the
  // staged tokens of the pass, [n_kv][n][head_dim] fp16.
  std::vector<uint16_t> ctx_k_, ctx_v_, new_k_, new_v_;
  std::vector<float> dense_k_, dense_v_, rows_;
  std::vector<int32_t> ctx_pos_, new_pos_;
  int staged_layer_ = -1, staged_n_ = 0;
  int64_t peak_bytes_ = 0;
};

}  // namespace qevict
