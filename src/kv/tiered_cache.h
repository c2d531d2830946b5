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
// Where each part lives:
//   tiered_cache.cc      layout of the windows, runs, storing tokens, batches, views;
//   tiered_ledger.cc     the byte ledger: charged bytes, floors, the budget, peaks, KvStats;
//   tiered_attention.cc  attention over the tiers, window mass, the observation buffer;
//   tiered_routing.cc    routing steps: the policy's plan, applying it, compaction;
//   tiered_fork.cc       forks of a prefix cache (one prefill, every policy);
//   tiered_state.cc      the state saved to and restored from a prompt cache file;
//   window_store.cc      the memory: block pools per block size and the cold store.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "kv/full_cache.h"
#include "kv/kv_cache.h"
#include "kv/kv_config.h"
#include "kv/kv_quantizer.h"
#include "kv/routing.h"
#include "kv/window_mass.h"
#include "kv/window_store.h"

namespace qevict {

// One window of one layer, for diagnostics (missed mass, FMM, tier maps).
struct WindowInfo {
  int64_t index = 0;        // window number within the layer (0 = first after the sinks)
  int64_t first_token = 0;  // index of its first token in the run (sinks + index * W)
  int32_t first_pos = 0;    // position of its first token
  int n_tokens = 0;         // W, fewer for the window still being filled
  Tier tier = Tier::kFp16;
  bool in_band = false;     // false while it holds any of the last R tokens
  float score = 0.0f;       // importance as policies see it (0 for evicted windows)
  float last_mass = 0.0f;   // attention mass from the latest query (0 for evicted windows)
};

struct WindowView {
  int layer = 0;
  int sink_tokens = 0;  // tokens before window 0
  int window = 0;       // W
  std::vector<WindowInfo> windows;  // every window created so far, evicted ones included
};

class TieredCache : public KvCache {
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
  KvStats Stats() const override;
  void SaveState(ByteWriter& out) const override;  // kv/tiered_state.cc
  void LoadState(ByteReader& in) override;
  const KvGeometry& geometry() const override { return geo_; }
  int64_t n_tokens() const override { return layers_.back().count; }

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
                                  int64_t budget_bytes, bool quantizes);
  // The observation buffer a policy that observes prompt ends holds (charged to the budget).
  static int64_t ObservationBytesFor(const KvConfig& config, const KvGeometry& geometry);
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
                                    int64_t run_tokens, std::optional<int64_t> budget);

  // Window scores computed outside the cache (reconstruction scoring: engine/reconstruction.h),
  // by window index, for the next routing step at a prompt end (LayerBand::external), which
  // consumes them. A prefix cache kept for forks never routes: its forks copy them.
  void SetExternalScores(int layer, std::vector<float> scores) override;
  // kReconstruction while the policy routes on reconstruction scores under a budget, the run's
  // first prompt end is still ahead and none were handed over (SetExternalScores) for it. A run
  // without a budget routes on nothing, and a prefix kept for forks never routes: they ask for
  // none (the prefix's owner may still hand it scores for its forks).
  ExternalScoreNeed wants_external_scores() const override {
    const bool wanted = policy_->wants_external_scores() &&
                        config_.score_source == ScoreSource::kReconstruction && budget_ &&
                        !for_forks_ && !priors_done_ &&
                        std::all_of(layers_.begin(), layers_.end(),
                                    [](const LayerState& l) { return l.external.empty(); });
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
  WindowView View(int layer) const;
  const KvConfig& config() const { return config_; }
  std::optional<int64_t> budget() const { return budget_; }  // nullopt: no limit
  // Bytes of live blocks recounted from the allocators' own free lists, plus metadata: must
  // equal Stats().resident_bytes() (tests check it).
  int64_t AllocatorResidentBytes() const;
  int64_t resident_bytes() const;
  // The resident keys (after RoPE) and values of a layer in fp32 as attention sees them
  // (quantized windows dequantized by the scalar reference path), in attention order, with their
  // positions. keys/values: [tokens][n_kv_heads][head_dim]. For tests and diagnostics.
  void DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                  std::vector<int32_t>* positions) const override;

 private:
  struct WindowRecord {     // metadata of one resident window, charged to the budget
    uint32_t block;         // handle in the pool of its tier
    int32_t cold_slot;      // exact recovery: slot of its fp16 original, -1 if none
    int32_t index;          // window number within the layer
    Tier tier;
    float mass_sum;         // importance accumulator (cumulative or decayed sum)
    float observers;        // queries that could attend it (for ScoreMode::kNormalized)
    float last_mass;        // mass from the latest query
  };
  static_assert(sizeof(WindowRecord) == 28, "metadata charged per resident window");
  struct LayerState {
    int64_t count = 0;                  // tokens stored in this run
    uint32_t sink_block = BlockPool::kNoBlock;
    std::vector<WindowRecord> windows;  // resident windows, oldest first
    int64_t evicted = 0;
    // Latest queries (after RoPE) for policies that observe the prompt's end (snapkv).
    std::vector<float> obs_queries;     // [snapkv_window][n_heads][head_dim]
    std::vector<int32_t> obs_pos;       // [snapkv_window]
    int obs_filled = 0, obs_next = 0;
    // External window scores for the next prompt-end routing step (SetExternalScores, or the
    // key-norm / expected-attention priors), by window index; empty once consumed.
    std::vector<float> external;
  };

  // Layout (tiered_cache.cc) and the byte ledger (tiered_ledger.cc).
  int SinkTokens(const LayerState& l) const;
  int64_t ResidentTokens(const LayerState& l) const;
  int64_t ResidentPrefix(const LayerState& l, int64_t logical) const;
  int WindowTokens(const LayerState& l, const WindowRecord& w) const;
  size_t BandSize(const LayerState& l) const;
  int64_t FirstToken(int64_t window_index) const { return sinks_ + window_index * window_; }
  float ScoreOf(const WindowRecord& w) const;
  void SetBudget(int64_t prompt_tokens, int64_t max_new_tokens);
  int64_t MetaBytes() const;
  int64_t ObservationBytes() const;
  int64_t ReservedBytes() const;
  int64_t FloorBytes(const LayerState& l) const;
  int64_t NextTokenGrowth() const;
  int64_t WorstFloorBytes(int64_t from_tokens, int64_t to_tokens) const;
  void UpdatePeaks();
  void ReleaseWindow(WindowRecord& w);
  uint16_t* SinkK(const LayerState& l, int head) const;
  uint16_t* SinkV(const LayerState& l, int head) const;
  uint16_t* FpK(const WindowRecord& w, int head) const;
  uint16_t* FpV(const WindowRecord& w, int head) const;

  // Attention over the tiers (tiered_attention.cc).
  void ScoreRange(int layer, int head, int64_t begin, int64_t end, const float* q, int n_q,
                  float* scores, int64_t ld, float scale) const;
  void AccumulateRange(int layer, int head, int64_t begin, int64_t end, const float* p, int n_q,
                       int64_t ld, float* acc) const;
  void PrefetchWindow(const LayerState& l, size_t k, int head, bool keys) const;
  void UpdateScores(LayerState& l, int n, const int64_t* visible);
  void RememberQueries(LayerState& l, int n, const int32_t* pos, const float* q);
  void ComputeObservation(int layer, std::vector<float>* tokens) const;
  void HoldObservation();     // allocates the observation buffers, empty
  void ReleaseObservation();  // frees them (after the prompt end's routing step used them)
  // Key-norm or expected-attention window scores of a layer (tiered_priors.cc).
  void ComputePriors(int layer, std::vector<float>* scores) const;

  // Routing (tiered_routing.cc).
  void Route(BatchKind trigger, ThreadPool& pool);
  void Apply(const Plan& plan, ThreadPool& pool);
  void CompactStore();
  void Demote(WindowRecord& w, std::vector<float>& scratch, std::vector<uint8_t>& bytes);
  void Promote(WindowRecord& w, std::vector<float>& scratch, std::vector<uint8_t>& bytes);

  KvConfig config_;
  KvGeometry geo_;
  const Rope& rope_;
  std::unique_ptr<Policy> policy_;
  const int window_, sinks_, recent_;
  const QuantLayout qlayout_;
  const int64_t fp_block_bytes_;    // [2][n_kv_heads][W][head_dim] fp16
  const int64_t sink_block_bytes_;  // [2][n_kv_heads][S][head_dim] fp16
  const int64_t max_windows_;       // per layer and run

  WindowStore store_;  // the bytes of sinks and windows (and the cold store)

  std::vector<LayerState> layers_;
  std::vector<int32_t> pos_;  // [max_tokens] position of every stored token (all layers agree)
  std::vector<int64_t> visible_;  // [n] scratch of Attend
  WindowMassObserver mass_;
  bool scoring_ = false;      // accumulate window mass (policy wants it and a budget applies)
  bool observing_ = false;    // keep the latest queries for observation
  // The observation buffers are allocated (from a prompt's first batch until the routing step
  // that ends it consumed them) and the current batch's queries go into them.
  bool obs_held_ = false;
  bool remember_queries_ = false;
  bool for_forks_ = false;    // KeepStatisticsForForks(): score and observe, never route
  bool scores_known_ = true;  // false for a WithWindow() prefix: its window scores are zero
  // The run's first prompt end has been routed: it alone takes external scores (handed over or
  // computed as key-norm / expected-attention priors).
  bool priors_done_ = false;
  BatchKind last_batch_ = BatchKind::kGenerated;  // the kind of the last EndBatch

  // Run state.
  std::optional<int64_t> budget_;  // KvConfig::BudgetBytes of the run; nullopt: no limit
  int64_t prompt_tokens_ = 0;  // tokens fed before the current turn's generation
  int64_t run_tokens_ = 0;     // those + max_new_tokens of the current turn
  bool routed_ = false;        // the first routing step has happened
  bool over_budget_ = false;   // the last routing step could not meet the budget
  int64_t since_route_ = 0;    // generated tokens since the last routing step
  int64_t tokens_at_route_ = 0;  // tokens stored when the last routing step ran
  KvStats stats_;              // counters; bytes are filled in by Stats()
  int64_t batch_peak_ = 0;     // max resident bytes since the last EndBatch
  int64_t peak_reserved_ = 0;  // max of ReservedBytes() over the run
  double sum_resident_ = 0, sum_fp16_ = 0, sum_quant_ = 0;
  int64_t samples_ = 0;

  // Routing scratch, reused across steps.
  Plan plan_;
  std::vector<std::vector<BandWindow>> band_views_;
  std::vector<std::vector<float>> observation_;
  std::vector<std::vector<int64_t>> observation_offsets_;
  std::vector<LayerBand> layer_bands_;
  std::vector<double> weights_;
};

}  // namespace qevict
