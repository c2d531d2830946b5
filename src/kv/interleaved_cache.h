// The cache of a model with sliding-window layers (gemma3 interleaves 5 of them with every
// global layer; Mistral slides in every layer). Sliding layers go to a SlidingWindowCache (a
// ring of the window per layer, no policy); global layers go to the policy's cache (full or
// tiered), built for the global layers only. The budget counts both: a fraction is of what the
// `full` policy holds (global layers' tokens plus the rings), and the policy's cache gets what
// the rings leave (KvConfig::GlobalBudgetBytes). Stats add the rings to the fp16 tier and report
// them apart (KvStats::sliding_bytes).
#pragma once

#include <memory>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/sliding_window_cache.h"

namespace qevict {

class InterleavedCache : public KvCache {
 public:
  // sliding[l]: whether model layer l is a sliding-window layer. global: the policy's cache for
  // the other layers in order (nullptr when every layer slides); its geometry carries the rings'
  // ring_* fields. rings: the sliding layers in order.
  InterleavedCache(std::vector<bool> sliding, std::unique_ptr<KvCache> global,
                   std::unique_ptr<SlidingWindowCache> rings, const KvGeometry& geometry);
  // The same rings (copied, rotating new keys with ring_rope) in front of another global cache:
  // forks of a prefilled prompt.
  std::unique_ptr<InterleavedCache> WithGlobal(std::unique_ptr<KvCache> global,
                                               const Rope& ring_rope) const;

  void BeginRun(int64_t prompt_tokens, int64_t max_new_tokens) override;
  void ContinueRun(int64_t prompt_tokens, int64_t max_new_tokens) override;
  void Store(int layer, int n, const int32_t* pos, const float* k, const float* v) override;
  void Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
              ThreadPool& pool) override;
  void BeginBatch(BatchKind kind) override;
  void EndBatch(BatchKind kind, ThreadPool& pool) override;
  KvStats Stats() const override;
  void DropColdPageCache() const override {
    if (global_) global_->DropColdPageCache();
  }
  void SaveState(ByteWriter& out) const override;  // kv/cache_state.cc
  void LoadState(ByteReader& in) override;
  const KvGeometry& geometry() const override { return geo_; }
  int64_t n_tokens() const override { return rings_->tokens_seen(); }
  // Model layer `layer`: its ring (oldest first) or the global cache's layer.
  void DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                  std::vector<int32_t>* positions) const override;

  // External scores are the global layers' (the rings have no windows): forwarded to the
  // policy's cache, by its layer index (nothing is wanted when every layer slides).
  ExternalScoreNeed wants_external_scores() const override {
    return global_ ? global_->wants_external_scores() : ExternalScoreNeed::kNone;
  }
  ExternalScoreLayout external_score_layout(int layer) const override {
    return global_ ? global_->external_score_layout(layer) : KvCache::external_score_layout(layer);
  }
  void SetExternalScores(int layer, std::vector<float> scores) override {
    if (!global_) return KvCache::SetExternalScores(layer, std::move(scores));
    global_->SetExternalScores(layer, std::move(scores));
  }

  KvCache* global() { return global_.get(); }
  const KvCache* global() const { return global_.get(); }
  const SlidingWindowCache& rings() const { return *rings_; }

 private:
  std::vector<bool> sliding_;
  std::vector<int> index_;  // model layer -> index among the sliding or the global layers
  std::unique_ptr<KvCache> global_;
  std::unique_ptr<SlidingWindowCache> rings_;
  KvGeometry geo_;
  int64_t peak_ring_bytes_ = 0;
};

// The cache a policy's decisions apply to: the global layers' cache of an InterleavedCache
// (nullptr when every layer slides), the cache itself otherwise.
const KvCache* PolicyCacheOf(const KvCache& cache);

}  // namespace qevict
