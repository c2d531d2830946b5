// The three-tier KV cache (docs/kv-cache.md). Per layer:
//   sinks   the first S tokens, fp16, one block;
//   windows W tokens each, in one tier at a time: fp16 (keys after RoPE, exactly what FullCache
//           stores), quantized (kv/kv_quantizer.h, keys before RoPE) or evicted (nothing);
//   recent  windows holding any of the last R tokens stay fp16 and are never routed; older
//           windows form the evictable band.
// A window's bytes live only in its current tier, in fixed-size blocks of the WindowStore
// (kv/window_store.h), which owns the memory and compacts it after every routing step so that
// freed bytes go back to the OS. Attention reads every tier in place through
// GroupedAttentionOverPrefix (bit-identical to FullCache while everything is fp16) and
// accumulates each window's attention mass in the same pass. At routing steps a Policy turns
// the band's scores and the byte budget into a Plan; only this class applies it.
//
// TieredCache orchestrates parts that are tested and read on their own:
//   window_table.h       the windows of every layer: tier, block, position, scores, invariants;
//   window_store.h       the memory: block pools per block size and the cold store;
//   byte_ledger.h        every byte figure: charged bytes, floors, the budget, peaks, KvStats;
//   observation_buffer.h the latest prompt queries the query-aware sources read;
//   score_sources.h      where routing scores come from (attention mass, query-aware,
//                        reconstruction, key norm, expected attention), behind one interface.
// Its own files hold what it does with them:
//   tiered_cache.cc      runs, storing tokens, batches;
//   tiered_attention.cc  attention over the tiers (and the mass it accumulates);
//   tiered_routing.cc    routing steps: the policy's plan, applying it, compaction;
//   tiered_fork.cc       forks of a prefix cache (one prefill, every policy);
//   tiered_state.cc      the state saved to and restored from a prompt cache file.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "kv/full_cache.h"
#include "kv/kv_cache.h"
#include "kv/kv_config.h"
#include "kv/byte_ledger.h"
#include "kv/kv_quantizer.h"
#include "kv/observation_buffer.h"
#include "kv/recall_source.h"
#include "kv/routing.h"
#include "kv/score_sources.h"
#include "kv/window_store.h"
#include "kv/window_table.h"

namespace qevict {

class TieredCache : public KvCache, private ResidentReader {
 public:
  TieredCache(const KvConfig& config, const KvGeometry& geometry, const Rope& rope,
              std::unique_ptr<Policy> policy);
  ~TieredCache() override;

  void BeginRun(int64_t prompt_tokens, int64_t max_new_tokens) override;
  void ContinueRun(int64_t prompt_tokens, int64_t max_new_tokens) override;
  void Store(int layer, int n, const int32_t* pos, const float* k, const float* v) override;
  void Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
              ThreadPool& pool) override;
  void BeginBatch(BatchKind kind) override;
  void EndBatch(BatchKind kind, ThreadPool& pool) override;
  KvStats Stats() const override {
    if (prefetch_.valid()) prefetch_.wait();
    return ledger_.Stats();
  }
  void DropColdPageCache() const override {
    if (store_.disk() != nullptr) store_.disk()->DropPageCache();
  }
  // Routing steps so far: what a per-batch caller needs, without Stats()'s work (the cold file's
  // page-cache query among it).
  int64_t routing_steps() const { return ledger_.counters().routing_steps; }
  void SaveState(ByteWriter& out) const override;  // kv/tiered_state.cc
  void LoadState(ByteReader& in) override;
  const KvGeometry& geometry() const override { return geo_; }
  int64_t n_tokens() const override { return table_.layers().back().count; }

  // Forks (one prefill, every policy and budget; src/kv/tiered_fork.cc). A cache told to keep
  // statistics for forks before BeginRun never routes and accumulates everything any policy
  // routes on (window scores, the last prompt queries) whatever its own policy and budget.
  // After a prompt, Fork() gives a cache with another policy and budget that is exactly where a
  // cache of that configuration would be had it read the prompt itself, its first routing step
  // applied; ForkFull() gives the fp16 FullCache of the same tokens. Both copy the stored bytes.
  // The fork's config must share the geometry (window, sinks, recent, bits, value group,
  // observation window, score mode); rope must outlive the fork.
  void KeepStatisticsForForks() { for_forks_ = true; }
  std::unique_ptr<TieredCache> Fork(const KvConfig& config, std::unique_ptr<Policy> policy,
                                    const Rope& rope, ThreadPool& pool,
                                    bool keep_statistics = false) const;
  std::unique_ptr<FullCache> ForkFull(const Rope& rope) const;
  // The same prefix with windows of `window` tokens (kivi's 32-token key groups), made by
  // copying the stored rows instead of reading the prompt again: stored bytes, positions,
  // observed queries and peaks are those of a prefix of that layout that read the prompt itself.
  // Window scores are not carried (a window's accumulated mass cannot be split between smaller
  // windows), so Fork() refuses policies that route on scores (forks that keep statistics, such
  // as the evaluator's shadow, never route and are allowed). batch_tokens: the prefill chunk
  // the prompt was read in (blocks are allocated in that order). policy: keep-all (the
  // registry's RelayoutPrefixCache supplies it).
  std::unique_ptr<TieredCache> WithWindow(int window, int batch_tokens,
                                          std::unique_ptr<Policy> policy, const Rope& rope) const;

  // Bytes a cache of this configuration may hold mapped beyond its ledger: per pool, at most one
  // partly filled slab after a routing step's compaction, and during a routing step the quantized
  // copies of the windows it demotes before their fp16 slabs are compacted (up to the Q tier's
  // share of the budget). For admission control (server/kv_reservation.h).
  static int64_t MappedSlackBytes(const KvConfig& config, const KvGeometry& geometry,
                                  int64_t budget_bytes, bool quantizes) {
    return ByteLedger::MappedSlackBytes(config, geometry, budget_bytes, quantizes);
  }
  // The observation buffer a policy that observes prompt ends holds (charged to the budget).
  static int64_t ObservationBytesFor(const KvConfig& config, const KvGeometry& geometry) {
    return ByteLedger::ObservationBytesFor(config, geometry);
  }
  // The most bytes a cache of this configuration (as built: PolicyLayout's window for kivi) can
  // hold from the OS over a run of prompt_tokens + new tokens (its peak Stats().reserved_bytes,
  // the sliding layers' rings excluded): the ledger's resident bytes at their largest (every
  // token in fp16 without a budget; with one, the budget or the floor, the prompt held in fp16
  // before its first routing step, a policy that never evicts holding every window quantized)
  // plus what the pools map beyond the ledger and the observation buffer. budget: the global
  // layers' budget of the run (KvConfig::GlobalBudgetBytes; nullopt: none). For admission
  // control (server/kv_reservation.h), from the same record and block sizes the ledger charges.
  static int64_t WorstReservedBytes(const KvConfig& config, const KvGeometry& geometry,
                                    const Policy& policy, int64_t prompt_tokens,
                                    int64_t run_tokens, std::optional<int64_t> budget) {
    return ByteLedger::WorstReservedBytes(config, geometry, policy, prompt_tokens, run_tokens,
                                          budget);
  }

  // Window scores computed outside the cache (reconstruction scoring: engine/reconstruction.h),
  // by window index, for the next routing step at a prompt end (LayerBand::external), which
  // consumes them. A prefix cache kept for forks never routes: its forks copy them.
  void SetExternalScores(int layer, std::vector<float> scores) override {
    external_->Accept(layer, std::move(scores));
  }
  // kReconstruction while the policy routes on reconstruction scores under a budget, the run's
  // first prompt end is still ahead and none were handed over (SetExternalScores) for it. A run
  // without a budget routes on nothing, and a prefix kept for forks never routes: they ask for
  // none (the prefix's owner may still hand it scores for its forks).
  ExternalScoreNeed wants_external_scores() const override {
    const bool wanted = policy_->wants_external_scores() &&
                        config_.score_source == ScoreSource::kReconstruction && ledger_.budget() &&
                        !for_forks_ && !clock_.first_prompt_end_done &&
                        std::all_of(external_->scores().begin(), external_->scores().end(),
                                    [](const std::vector<float>& s) { return s.empty(); });
    return wanted ? ExternalScoreNeed::kReconstruction : ExternalScoreNeed::kNone;
  }
  ExternalScoreLayout external_score_layout(int layer) const override {
    const WindowView view = View(layer);
    ExternalScoreLayout out;
    out.sink_tokens = view.sink_tokens;
    out.n_windows = static_cast<int64_t>(view.windows.size());
    for (const WindowInfo& w : view.windows) {
      if (w.tier == Tier::kEvicted) continue;
      out.resident_index.push_back(w.index);
      out.resident_tokens.push_back(w.n_tokens);
    }
    return out;
  }

  // Read-only diagnostics.
  WindowView View(int layer) const { return table_.View(layer); }
  const KvConfig& config() const { return config_; }
  // Whether the policy's evicted windows are kept on disk (a cold tier: qevict-recall).
  bool cold_tier() const { return store_.cold_tier(); }
  std::optional<int64_t> budget() const { return ledger_.budget(); }  // nullopt: no limit
  // Bytes of live blocks recounted from the allocators' own free lists, plus metadata: must
  // equal Stats().resident_bytes() (tests check it).
  int64_t AllocatorResidentBytes() const { return ledger_.AllocatorResidentBytes(); }
  int64_t resident_bytes() const { return ledger_.ResidentBytes(); }
  // The disk cold store's file descriptor (-1 without one): tests damage the file through it
  // as an outside process could.
  const WindowTable& table_for_testing() const { return table_; }
  int cold_fd_for_testing() const {
    return store_.disk() != nullptr ? store_.disk()->fd_for_testing() : -1;
  }
  // The disk cold store (nullptr without one): tests inject write faults through it.
  DiskColdStore* cold_store_for_testing() { return store_.disk(); }
  // The window table's invariants (throws std::logic_error naming the broken one).
  void CheckInvariants() const { table_.CheckInvariants(); }
  // The resident keys (after RoPE) and values of a layer in fp32 as attention sees them
  // (quantized windows dequantized by the scalar reference path), in attention order, with their
  // positions. keys/values: [tokens][n_kv_heads][head_dim]. For tests and diagnostics.
  void DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                  std::vector<int32_t>* positions) const override;

 private:
  // ResidentReader: what score sources read.
  const WindowTable& table() const override { return table_; }
  const ObservationBuffer& observation() const override { return observation_; }
  const Rope& rope() const override { return rope_; }
  void ScoreRange(int layer, int head, int64_t begin, int64_t end, const float* q, int n_q,
                  float* scores, int64_t ld, float scale) const override;

  // Storage of a token's rows (tiered_cache.cc) and reads of them (tiered_attention.cc).
  uint16_t* SinkK(const LayerWindows& l, int head) const;
  uint16_t* SinkV(const LayerWindows& l, int head) const;
  uint16_t* FpK(const WindowRecord& w, int head) const;
  uint16_t* FpV(const WindowRecord& w, int head) const;
  void AccumulateRange(int layer, int head, int64_t begin, int64_t end, const float* p, int n_q,
                       int64_t ld, float* acc) const;
  void PrefetchWindow(const LayerWindows& l, size_t k, int head, bool keys) const;

  // Whether the attention pass accumulates window mass (the policy routes on it under a
  // budget) and whether prompt queries are observed; a cache kept for forks does both.
  bool scoring() const { return for_forks_ || (policy_->wants_scores() && ledger_.budget()); }
  bool observing() const {
    return for_forks_ || (policy_->wants_observation() && ledger_.budget());
  }
  void SetBudget(int64_t prompt_tokens, int64_t max_new_tokens);
  void ReleaseWindow(WindowRecord& w);
  // A routing step or a prompt's recall that throws (a cold-store fault: disk full, disk limit,
  // a damaged or unreadable cold file) may leave the step half applied, some layers' windows
  // moved and others not. From then on the cache is dead: every later call (a new run, a
  // batch, saving it) rethrows that fault; destroying it is safe and closes its cold file.
  void ThrowIfFailed() const {
    if (failed_) std::rethrow_exception(failed_);
  }
  template <class F>
  void KillOnFault(F&& step) {
    try {
      step();
    } catch (...) {
      failed_ = std::current_exception();
      throw;
    }
  }

  // Routing (tiered_routing.cc).
  void Route(BatchKind trigger, ThreadPool& pool);
  void Apply(const Plan& plan, ThreadPool& pool);
  void CompactStore();
  void Demote(int layer, WindowRecord& w, std::vector<float>& scratch, std::vector<uint8_t>& bytes);
  // Cold tier: a band window leaves RAM for the disk store (its exact fp16 block written once,
  // its digest kept); a cold window comes back into fp16 (tiered_routing.cc).
  void ToCold(LayerWindows& l, WindowRecord& w, std::vector<uint8_t>& bytes);
  void FitDigestContext(LayerWindows& l, const WindowRecord& first, const uint8_t* fp);
  // Digest groups (KvConfig::cold_digest_group > 1): builds window `index`'s group digest from
  // every closed window of its group (fp16 blocks from RAM, the others' exact blocks from the
  // disk store; `own`, the window's block, where the caller has it) unless it covers `index`.
  void EnsureGroupDigest(LayerWindows& l, int64_t index, const uint8_t* own);
  void RecallLayer(LayerWindows& l, std::span<const int32_t> indices, std::vector<uint8_t>& bytes);
  // l's layer number (its place in the table), for the cold blocks' tags (ColdBlockTag).
  int LayerOf(const LayerWindows& l) const {
    return static_cast<int>(&l - table_.layers().data());
  }
  void RecallForPrompt(int layer, int n, const int32_t* pos, const float* q, ThreadPool& pool);
  void Promote(int layer, WindowRecord& w, std::vector<float>& scratch,
               std::vector<uint8_t>& bytes);

  KvConfig config_;
  KvGeometry geo_;
  const Rope& rope_;
  std::unique_ptr<Policy> policy_;
  const QuantLayout qlayout_;

  // The parts.
  WindowStore store_;              // the bytes of sinks and windows (and the cold store)
  WindowTable table_;              // which window is where
  ObservationBuffer observation_;  // the latest prompt queries
  ByteLedger ledger_;              // every byte figure (reads the three above)
  AttentionMassSource mass_;       // score sources
  QueryAwareSource query_;
  std::unique_ptr<WindowScoreSource> external_;
  RecallSource recall_;

  // Where the run is between routing steps (saved with the cache).
  struct RouteClock {
    bool routed = false;       // the first routing step has happened
    bool over_budget = false;  // the last routing step could not meet the budget
    // The run's first prompt end has been routed: it alone takes external scores.
    bool first_prompt_end_done = false;
    int64_t since_route = 0;      // generated tokens since the last routing step
    int64_t tokens_at_route = 0;  // tokens stored when the last routing step ran
    BatchKind last_batch = BatchKind::kGenerated;  // the kind of the last EndBatch
  };
  RouteClock clock_;
  bool for_forks_ = false;    // KeepStatisticsForForks(): score and observe, never route
  bool scores_known_ = true;  // false for a WithWindow() prefix: its window scores are zero
  bool decoding_ = false;     // the current batch is generated tokens (BeginBatch)
  bool prompt_end_batch_ = false;  // the current batch ends a prompt (BeginBatch)
  std::exception_ptr failed_;  // the fault that killed the cache (ThrowIfFailed)

  // Scratch of Attend and of routing steps, reused.
  std::vector<int64_t> visible_;
  Plan plan_;
  std::vector<std::vector<BandWindow>> band_views_;
  std::vector<LayerBand> layer_bands_;
  std::vector<double> weights_;
  std::vector<std::vector<int32_t>> recall_indices_;  // [layer] window indices to recall
  // The next layer's cold windows asked of the kernel on a thread of its own (posix_fadvise
  // submits the reads before it returns), so that this layer's scan does not wait for it; waited
  // for before the next request, by Stats() and on destruction (declared last: before the store
  // goes).
  std::vector<int32_t> prefetch_slots_;
  mutable std::future<void> prefetch_;
};

}  // namespace qevict
