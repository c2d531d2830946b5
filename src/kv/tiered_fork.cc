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
  fork->table_.layers() = table_.layers();  // the reserve of the constructor is kept by assignment
  const int64_t count = table_.stored_tokens();
  std::copy(table_.positions(), table_.positions() + count, fork->table_.mutable_positions());
  fork->observation_.CopyFrom(observation_);
  fork->external_->CopyFrom(*external_);

  // Counters of a run that has read the prompt and not routed yet.
  KvStats counters;
  counters.peak_bytes = ledger_.counters().peak_bytes;
  counters.peak_fp16_bytes = ledger_.counters().peak_fp16_bytes;
  counters.peak_quant_bytes = ledger_.counters().peak_quant_bytes;
  counters.prefill_peak_bytes = ledger_.counters().prefill_peak_bytes;
  fork->ledger_.set_counters(counters);
  fork->SetBudget(ledger_.prompt_tokens(), ledger_.run_tokens() - ledger_.prompt_tokens());
  fork->policy_->BeginRun();
  ByteLedger::Peaks peaks;
  peaks.batch_peak = ledger_.peaks().batch_peak;
  peaks.peak_reserved = ledger_.peaks().peak_reserved;
  fork->ledger_.set_peaks(peaks);
  fork->observation_.set_remembering(observation_.remembering() && fork->observing());
  if (!fork->observing() && observation_.held()) {
    // A policy that does not observe never held the buffer the prefix kept while it read the
    // prompt: its peaks are the prefix's without it.
    fork->observation_.Release();
    fork->ledger_.SubtractFromPeaks(observation_.bytes());
  }
  // The routing step that ended the prompt, now with the fork's policy and budget.
  if (count > 0) fork->EndBatch(clock_.last_batch, pool);
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
  out->BeginRun(ledger_.prompt_tokens(), ledger_.run_tokens() - ledger_.prompt_tokens());
  const int64_t count = table_.stored_tokens();
  std::copy(table_.positions(), table_.positions() + count, out->table_.mutable_positions());
  const int hd = geo_.head_dim, n_kv = geo_.n_kv_heads;
  const int sinks = config_.sinks, own_window = config_.window;
  auto copy_token = [&](const LayerWindows& from, LayerWindows& to, int64_t t) {
    if (t < sinks) {  // same sinks: the same block, copied whole with the first token
      if (t == 0) {
        to.sink_block = out->store_.Allocate(WindowStore::Kind::kSink);
        std::memcpy(out->store_.data(WindowStore::Kind::kSink, to.sink_block),
                    store_.data(WindowStore::Kind::kSink, from.sink_block),
                    ledger_.sink_block_bytes());
      }
      return;
    }
    const WindowRecord& src = from.windows[(t - sinks) / own_window];
    QEVICT_CHECK(src.tier == Tier::kFp16);
    const int64_t src_row = (t - sinks) % own_window;
    const int64_t dst_row = (t - sinks) % window;
    if (dst_row == 0) {
      to.windows.push_back(WindowRecord{out->store_.Allocate(WindowStore::Kind::kFp16), -1,
                                        static_cast<int32_t>((t - sinks) / window),
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
  for (const LayerWindows& from : table_.layers()) {
    QEVICT_CHECK(from.count == count && from.evicted == 0);
  }
  const int64_t step = std::max<int64_t>(1, batch_tokens);
  const int n_layers = table_.n_layers();
  for (int64_t begin = 0; begin < count; begin += step) {
    const int64_t end = std::min(count, begin + step);
    for (int i = 0; i < n_layers; ++i) {
      for (int64_t t = begin; t < end; ++t) copy_token(table_.layer(i), out->table_.layer(i), t);
      out->table_.layer(i).count = end;
    }
  }
  out->observation_.CopyFrom(observation_);
  out->clock_.first_prompt_end_done = clock_.first_prompt_end_done;
  out->clock_.last_batch = clock_.last_batch;
  // Nothing was ever freed: the peaks of a prefix that read the prompt are its present bytes.
  out->ledger_.UpdatePeaks();
  out->ledger_.counters().prefill_peak_bytes = out->ledger_.peaks().batch_peak;
  return out;
}

std::unique_ptr<FullCache> TieredCache::ForkFull(const Rope& rope) const {
  QEVICT_CHECK(for_forks_);
  auto full = std::make_unique<FullCache>(geo_, rope);
  full->BeginRun(ledger_.prompt_tokens(), ledger_.run_tokens() - ledger_.prompt_tokens());
  for (int layer = 0; layer < geo_.n_layers; ++layer) {
    const LayerWindows& l = table_.layer(layer);
    const int sink_tokens = table_.SinkTokens(l);
    if (sink_tokens > 0) {
      full->AppendFp16Rows(layer, sink_tokens, table_.positions(), SinkK(l, 0), SinkV(l, 0),
                           config_.sinks);
    }
    for (const WindowRecord& w : l.windows) {
      QEVICT_CHECK(w.tier == Tier::kFp16);
      const int64_t first = table_.FirstToken(w.index);
      full->AppendFp16Rows(layer, table_.WindowTokens(l, w), table_.positions() + first, FpK(w, 0),
                           FpV(w, 0), config_.window);
    }
  }
  return full;
}

}  // namespace qevict
