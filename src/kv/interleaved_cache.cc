#include "kv/interleaved_cache.h"

#include <algorithm>

#include "util/error.h"

namespace qevict {

InterleavedCache::InterleavedCache(std::vector<bool> sliding, std::unique_ptr<KvCache> global,
                                   std::unique_ptr<SlidingWindowCache> rings,
                                   const KvGeometry& geometry)
    : sliding_(std::move(sliding)),
      global_(std::move(global)),
      rings_(std::move(rings)),
      geo_(geometry) {
  QEVICT_CHECK(rings_ != nullptr);
  int n_sliding = 0, n_global = 0;
  for (bool s : sliding_) index_.push_back(s ? n_sliding++ : n_global++);
  QEVICT_CHECK(n_sliding == rings_->n_layers() && n_global == geo_.n_layers &&
               (n_global == 0) == (global_ == nullptr));
}

std::unique_ptr<InterleavedCache> InterleavedCache::WithGlobal(std::unique_ptr<KvCache> global,
                                                               const Rope& ring_rope) const {
  auto copy = std::make_unique<InterleavedCache>(
      sliding_, std::move(global), std::make_unique<SlidingWindowCache>(*rings_, ring_rope),
      geo_);
  copy->peak_ring_bytes_ = peak_ring_bytes_;
  return copy;
}

void InterleavedCache::BeginRun(int64_t prompt_tokens, int64_t max_new_tokens) {
  rings_->Reset();
  peak_ring_bytes_ = 0;
  if (global_) global_->BeginRun(prompt_tokens, max_new_tokens);
}

void InterleavedCache::ContinueRun(int64_t prompt_tokens, int64_t max_new_tokens) {
  if (global_) global_->ContinueRun(prompt_tokens, max_new_tokens);
}

void InterleavedCache::Store(int layer, int n, const int32_t* pos, const float* k,
                             const float* v) {
  if (sliding_[layer]) {
    rings_->Store(index_[layer], n, pos, k, v);
  } else {
    global_->Store(index_[layer], n, pos, k, v);
  }
}

void InterleavedCache::Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
                              ThreadPool& pool) {
  if (sliding_[layer]) {
    rings_->Attend(index_[layer], n, pos, q, out, pool);
  } else {
    global_->Attend(index_[layer], n, pos, q, out, pool);
  }
}

void InterleavedCache::BeginBatch(BatchKind kind) {
  if (global_) global_->BeginBatch(kind);
}

void InterleavedCache::EndBatch(BatchKind kind, ThreadPool& pool) {
  peak_ring_bytes_ = std::max(peak_ring_bytes_, rings_->bytes());
  if (global_) global_->EndBatch(kind, pool);
}

KvStats InterleavedCache::Stats() const {
  KvStats s = global_ ? global_->Stats() : KvStats{};
  const int64_t ring = rings_->bytes();
  const int64_t ring_reserved = rings_->reserved_bytes();
  s.tokens_seen = rings_->tokens_seen();
  if (!global_) s.tokens_resident = std::min<int64_t>(s.tokens_seen, rings_->window());
  s.sliding_bytes = ring;
  s.sliding_layers = rings_->n_layers();
  s.sliding_window = rings_->window();
  // The rings only grow (up to the window), so adding today's bytes to a peak of the global
  // layers bounds the true peak from above.
  s.fp16_bytes += ring;
  s.peak_fp16_bytes += peak_ring_bytes_;
  s.peak_bytes += peak_ring_bytes_;
  s.prefill_peak_bytes += s.prefill_peak_bytes > 0 ? peak_ring_bytes_ : 0;
  if (s.mean_resident_bytes > 0) {
    s.mean_resident_bytes += ring;
    s.mean_fp16_bytes += ring;
  }
  s.full_fp16_bytes += geo_.ring_bytes(s.tokens_seen);
  s.pool_reserved_bytes += ring_reserved;
  s.reserved_bytes += ring_reserved;
  s.peak_reserved_bytes += ring_reserved;
  if (s.routed_reserved_peak_bytes > 0) s.routed_reserved_peak_bytes += ring_reserved;
  if (s.floor_bytes >= 0) s.floor_bytes += geo_.ring_bytes(geo_.max_tokens);
  return s;
}

const KvCache* PolicyCacheOf(const KvCache& cache) {
  if (const auto* interleaved = dynamic_cast<const InterleavedCache*>(&cache)) {
    return interleaved->global();
  }
  return &cache;
}

}  // namespace qevict

namespace qevict {

void InterleavedCache::DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                                  std::vector<int32_t>* positions) const {
  if (sliding_[layer]) {
    rings_->DenseLayer(index_[layer], keys, values, positions);
  } else {
    global_->DenseLayer(index_[layer], keys, values, positions);
  }
}

}  // namespace qevict
