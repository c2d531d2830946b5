// Forks of a tiered cache after a prompt (tiered_cache.h, "Forks"): the evaluator prefills a
// prompt once into a cache that keeps statistics for forks, then gives every policy and budget
// its own copy, routed exactly as a cache of that configuration would have been routed after
// reading the prompt itself.
#include <algorithm>
#include <cstring>

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
  // A fork that keeps statistics never routes (the evaluator's shadow): it needs no scores.
  if (!scores_known_ && !keep_statistics &&
      (policy->wants_scores() || policy->wants_external_scores())) {
    throw Error("policy '" + config.policy + "' routes on window scores, which a prefix "
                "re-windowed from another layout does not have: read the prompt into a prefix "
                "of this layout");
  }
  auto fork = std::make_unique<TieredCache>(config, geo_, rope, std::move(policy));
  fork->for_forks_ = keep_statistics;
  fork->scores_known_ = scores_known_;
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

std::unique_ptr<TieredCache> TieredCache::WithWindow(int window, int batch_tokens,
                                                     std::unique_ptr<Policy> policy,
                                                     const Rope& rope) const {
  QEVICT_CHECK(for_forks_);
  KvConfig config = config_;
  config.window = window;
  config.Validate();
  auto out = std::make_unique<TieredCache>(config, geo_, rope, std::move(policy));
  out->for_forks_ = true;
  out->scores_known_ = false;
  out->BeginRun(prompt_tokens_, run_tokens_ - prompt_tokens_);
  const int64_t count = layers_.front().count;
  std::copy(pos_.begin(), pos_.begin() + count, out->pos_.begin());
  const int hd = geo_.head_dim, n_kv = geo_.n_kv_heads;
  auto copy_token = [&](const LayerState& from, LayerState& to, int64_t t) {
    if (t < sinks_) {  // same sinks: the same block, copied whole with the first token
      if (t == 0) {
        to.sink_block = out->store_.Allocate(WindowStore::Kind::kSink);
        std::memcpy(out->store_.data(WindowStore::Kind::kSink, to.sink_block),
                    store_.data(WindowStore::Kind::kSink, from.sink_block), sink_block_bytes_);
      }
      return;
    }
    const WindowRecord& src = from.windows[(t - sinks_) / window_];
    QEVICT_CHECK(src.tier == Tier::kFp16);
    const int64_t src_row = (t - sinks_) % window_;
    const int64_t dst_row = (t - sinks_) % window;
    if (dst_row == 0) {
      to.windows.push_back(WindowRecord{out->store_.Allocate(WindowStore::Kind::kFp16), -1,
                                        static_cast<int32_t>((t - sinks_) / window),
                                        Tier::kFp16, 0.0f, 0.0f, 0.0f});
    }
    const WindowRecord& dst = to.windows.back();
    for (int h = 0; h < n_kv; ++h) {
      std::memcpy(out->FpK(dst, h) + dst_row * hd, FpK(src, h) + src_row * hd,
                  hd * sizeof(uint16_t));
      std::memcpy(out->FpV(dst, h) + dst_row * hd, FpV(src, h) + src_row * hd,
                  hd * sizeof(uint16_t));
    }
  };
  // Blocks are taken in the order a prefill of `batch_tokens`-token chunks takes them (chunk by
  // chunk, layer by layer), so the slabs, and what a routing step's compaction frees, are the
  // same as in a prefix that read the prompt.
  for (const LayerState& from : layers_) QEVICT_CHECK(from.count == count && from.evicted == 0);
  const int64_t step = std::max<int64_t>(1, batch_tokens);
  for (int64_t begin = 0; begin < count; begin += step) {
    const int64_t end = std::min(count, begin + step);
    for (size_t i = 0; i < layers_.size(); ++i) {
      for (int64_t t = begin; t < end; ++t) copy_token(layers_[i], out->layers_[i], t);
      out->layers_[i].count = end;
    }
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerState& from = layers_[i];
    LayerState& to = out->layers_[i];
    to.obs_queries = from.obs_queries;
    to.obs_pos = from.obs_pos;
    to.obs_filled = from.obs_filled;
    to.obs_next = from.obs_next;
  }
  out->obs_held_ = obs_held_;
  out->remember_queries_ = remember_queries_;
  out->priors_done_ = priors_done_;
  out->last_batch_ = last_batch_;
  // Nothing was ever freed: the peaks of a prefix that read the prompt are its present bytes.
  out->UpdatePeaks();
  out->stats_.prefill_peak_bytes = out->batch_peak_;
  return out;
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
