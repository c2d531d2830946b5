// Forks of a tiered cache after a prompt (tiered_cache.h, "Forks"): the evaluator prefills a
// prompt once into a cache that keeps statistics for forks, then gives every policy and budget
// its own copy, routed exactly as a cache of that configuration would have been routed after
// reading the prompt itself.
#include <algorithm>

#include "kv/tiered_cache.h"
#include "util/error.h"

namespace qevict {
namespace {

void CheckSameLayout(const KvConfig& a, const KvConfig& b) {
  if (a.window != b.window || a.sinks != b.sinks || a.recent != b.recent || a.bits != b.bits ||
      a.value_group != b.value_group || a.snapkv_window != b.snapkv_window ||
      a.score != b.score || a.score_decay != b.score_decay) {
    throw Error("a forked KV cache must keep the prefix cache's window, sinks, recent, bits, "
                "value group, observation window and score mode");
  }
}

}  // namespace

std::unique_ptr<TieredCache> TieredCache::Fork(const KvConfig& config,
                                               std::unique_ptr<Policy> policy, const Rope& rope,
                                               ThreadPool& pool, bool keep_statistics) const {
  QEVICT_CHECK(for_forks_);
  CheckSameLayout(config_, config);
  auto fork = std::make_unique<TieredCache>(config, geo_, rope, std::move(policy));
  fork->for_forks_ = keep_statistics;
  fork->store_.CopyFrom(store_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    LayerState& to = fork->layers_[i];
    const LayerState& from = layers_[i];
    to.count = from.count;
    to.sink_block = from.sink_block;
    to.windows = from.windows;  // the reserve of the constructor is kept by assignment
    to.evicted = from.evicted;
    to.obs_queries = from.obs_queries;
    to.obs_pos = from.obs_pos;
    to.obs_filled = from.obs_filled;
    to.obs_next = from.obs_next;
    to.external = from.external;
  }
  std::copy(pos_.begin(), pos_.begin() + layers_.front().count, fork->pos_.begin());

  // Counters of a run that has read the prompt and not routed yet.
  fork->stats_ = KvStats{};
  fork->stats_.peak_bytes = stats_.peak_bytes;
  fork->stats_.peak_fp16_bytes = stats_.peak_fp16_bytes;
  fork->stats_.peak_quant_bytes = stats_.peak_quant_bytes;
  fork->stats_.prefill_peak_bytes = stats_.prefill_peak_bytes;
  fork->SetBudget(prompt_tokens_, run_tokens_ - prompt_tokens_);
  fork->policy_->BeginRun();
  fork->batch_peak_ = batch_peak_;
  fork->peak_reserved_ = peak_reserved_;
  fork->obs_held_ = obs_held_;
  fork->remember_queries_ = remember_queries_ && fork->observing_;
  if (!fork->observing_ && obs_held_) {
    // A policy that does not observe never held the buffer the prefix kept while it read the
    // prompt: its peaks are the prefix's without it.
    fork->ReleaseObservation();
    const int64_t observation = ObservationBytes();
    for (int64_t* peak : {&fork->stats_.peak_bytes, &fork->stats_.prefill_peak_bytes,
                          &fork->batch_peak_, &fork->peak_reserved_}) {
      *peak -= observation;
    }
  }
  // The routing step that ended the prompt, now with the fork's policy and budget.
  if (layers_.front().count > 0) fork->EndBatch(last_batch_, pool);
  return fork;
}

std::unique_ptr<FullCache> TieredCache::ForkFull(const Rope& rope) const {
  QEVICT_CHECK(for_forks_);
  auto full = std::make_unique<FullCache>(geo_, rope);
  full->BeginRun(prompt_tokens_, run_tokens_ - prompt_tokens_);
  for (int layer = 0; layer < geo_.n_layers; ++layer) {
    const LayerState& l = layers_[layer];
    const int sink_tokens = SinkTokens(l);
    if (sink_tokens > 0) {
      full->AppendFp16Rows(layer, sink_tokens, pos_.data(), SinkK(l, 0), SinkV(l, 0), sinks_);
    }
    for (const WindowRecord& w : l.windows) {
      QEVICT_CHECK(w.tier == Tier::kFp16);
      const int64_t first = FirstToken(w.index);
      full->AppendFp16Rows(layer, WindowTokens(l, w), pos_.data() + first, FpK(w, 0), FpV(w, 0),
                           window_);
    }
  }
  return full;
}

}  // namespace qevict
