// The `full` policy: every token's keys (after RoPE) and values in fp16, preallocated for the
// run's context. Pages are touched only as tokens arrive, so resident memory grows with use.
#pragma once

#include <memory>
#include <vector>

#include "kv/kv_cache.h"

namespace qevict {

class FullCache : public KvCache {
 public:
  FullCache(const KvGeometry& geometry, const Rope& rope);

  void BeginRun(int64_t prompt_tokens, int64_t max_new_tokens) override;
  void ContinueRun(int64_t prompt_tokens, int64_t max_new_tokens) override;
  void Store(int layer, int n, const int32_t* pos, const float* k, const float* v) override;
  void Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
              ThreadPool& pool) override;
  void EndBatch(BatchKind kind, ThreadPool& pool) override {}
  KvStats Stats() const override;
  void SaveState(ByteWriter& out) const override;  // kv/cache_state.cc
  void LoadState(ByteReader& in) override;
  const KvGeometry& geometry() const override { return geo_; }
  int64_t n_tokens() const override { return count_.back(); }
  void DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                  std::vector<int32_t>* positions) const override;

  // Appends n tokens to a layer from fp16 rows: keys already rotated, row i of head h at
  // k[(h * rows_per_head + i) * head_dim] (the block layout of the tiered cache), values alike.
  void AppendFp16Rows(int layer, int n, const int32_t* pos, const uint16_t* k, const uint16_t* v,
                      int64_t rows_per_head);

  // Read access for a cache built on this one (kv/quest_cache.h): the fp16 key (after RoPE) and
  // value rows of one layer and KV head, consecutive rows head_dim apart; positions of the
  // stored tokens; the tokens of the run as BeginRun / ContinueRun gave them (prompt + new).
  const uint16_t* key_rows(int layer, int head) const { return k_row(layer, head, 0); }
  const uint16_t* value_rows(int layer, int head) const { return v_row(layer, head, 0); }
  const int32_t* positions() const { return pos_.data(); }
  int64_t layer_tokens(int layer) const { return count_[layer]; }
  int64_t run_tokens() const { return run_tokens_; }

 private:
  uint16_t* k_row(int layer, int head, int64_t index) const;
  uint16_t* v_row(int layer, int head, int64_t index) const;

  KvGeometry geo_;
  const Rope& rope_;
  // [n_layers][n_kv_heads][max_tokens][head_dim] fp16; K holds keys after RoPE.
  std::unique_ptr<uint16_t[]> k_;
  std::unique_ptr<uint16_t[]> v_;
  std::vector<int32_t> pos_;     // [max_tokens] position of each stored token (all layers agree)
  std::vector<int64_t> count_;   // [n_layers] tokens stored per layer
  int64_t peak_tokens_ = 0;
  int64_t run_tokens_ = 0;
};

}  // namespace qevict
