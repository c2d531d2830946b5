// The byte ledger of the tiered cache (docs/kv-cache.md, "Budget" and "Memory"): every byte
// figure the cache reports or checks is computed here, once -- what it is charged (the tiers'
// blocks, the window records, token positions, the observation buffer), what it holds mapped
// from the OS, the floor it cannot go under, the run's budget and whether it is feasible, peaks
// and means, and KvStats. The same sizing answers for a cache that does not exist yet (the
// server's admission control: ReservationBytes). It reads the window table, the store and the
// observation buffer and changes none of them.
#pragma once

#include <cstdint>
#include <optional>

#include "kv/kv_cache.h"
#include "kv/kv_config.h"
#include "kv/kv_quantizer.h"
#include "kv/observation_buffer.h"
#include "kv/window_store.h"
#include "kv/window_table.h"

namespace qevict {

class ByteLedger {
 public:
  static constexpr int64_t kRecordBytes = static_cast<int64_t>(sizeof(WindowRecord));
  static constexpr int64_t kPositionBytes = static_cast<int64_t>(sizeof(int32_t));

  ByteLedger(const KvConfig& config, const KvGeometry& geometry, const QuantLayout& qlayout,
             const WindowTable& table, const WindowStore& store,
             const ObservationBuffer& observation);

  // ---- sizing (no cache needed) ----
  // The observation buffer a policy that observes prompt ends holds (charged to the budget).
  static int64_t ObservationBytesFor(const KvConfig& config, const KvGeometry& geometry);
  // Bytes a cache of this configuration may hold mapped beyond its ledger: per pool, at most one
  // partly filled slab after a routing step's compaction, and during a routing step the quantized
  // copies of the windows it demotes before their fp16 slabs are compacted (up to the Q tier's
  // share of the budget).
  static int64_t MappedSlackBytes(const KvConfig& config, const KvGeometry& geometry,
                                  int64_t budget_bytes, bool quantizes);

  // The most bytes a cache of this configuration (as built: PolicyLayout's window for kivi) can
  // hold from the OS over a run (TieredCache::WorstReservedBytes says what it counts): what the
  // server's admission control reserves, from the record and block sizes this ledger charges.
  static int64_t WorstReservedBytes(const KvConfig& config, const KvGeometry& geometry,
                                    const Policy& policy, int64_t prompt_tokens,
                                    int64_t run_tokens, std::optional<int64_t> budget);

  int64_t fp_block_bytes() const { return fp_block_bytes_; }
  int64_t sink_block_bytes() const { return sink_block_bytes_; }
  int64_t fp_window_cost() const { return fp_block_bytes_ + kRecordBytes; }  // block + record
  int64_t q_window_cost() const { return q_block_bytes_ + kRecordBytes; }
  // Cold tier: RAM per cold window (its record, its share of a digest, its slot's liveness);
  // 0 without a cold tier. Every band and cold window is charged it in the floor.
  // The store's liveness bit for its slot, rounded up to a byte (its checksum is on disk).
  static constexpr int64_t kColdSlotBytes = 1;
  // With digest groups (G > 1) a window pays 1/G of its group's digest and coverage mask,
  // rounded up; a layer's group being filled is paid once more in ColdLayerBytes.
  static int64_t ColdWindowCost(int64_t digest_bytes, int group) {
    const int64_t digest = group > 1 ? (digest_bytes + 8 + group - 1) / group : digest_bytes;
    return static_cast<int64_t>(sizeof(ColdRecord)) + digest + kColdSlotBytes;
  }
  int64_t cold_window_cost() const {
    return table_.digest_bytes() > 0
               ? ColdWindowCost(table_.digest_bytes(), table_.digest_group())
               : 0;
  }
  // Per layer, what the cold tier holds whatever the windows: the last generated token's query
  // (decoding steps rank by it) and the digest context (context digests), in the floor.
  static int64_t ColdLayerBytes(const KvConfig& config, const KvGeometry& geometry);
  int64_t DigestContextCost() const;  // ColdLayerBytes, 0 without a cold tier
  // RAM the cold tier holds now: cold records and digests, and a liveness bit per disk slot.
  int64_t ColdRamBytes() const;

  // ---- what the cache holds now ----
  // Window records, token positions and the observation buffer.
  int64_t MetaBytes() const;
  // fp16 + quantized blocks + metadata: what the budget counts.
  int64_t ResidentBytes() const;
  // Live blocks recounted from the allocators' free lists, plus metadata (tests: == Resident).
  int64_t AllocatorResidentBytes() const;
  // What the cache holds from the OS for its tokens: the pools' mapped slabs and the observation
  // buffer (the window-record vectors are reserved once per cache, touched as windows are made).
  int64_t ReservedBytes() const;
  // Bytes a layer holds outside its band: sinks and the windows of the recent region.
  int64_t FloorBytes(const LayerWindows& l) const;
  // Everything outside the bands a routing step must pay first: every layer's floor, positions,
  // the observation buffer and the next token's growth.
  int64_t FloorsOfAllLayers() const;
  // Bytes the next stored token adds: a new block per layer when it starts a window (or the
  // sinks), and its position.
  int64_t NextTokenGrowth() const;
  // Largest floor (sinks + recent windows + positions + the next token's growth) the cache can
  // be forced to hold after a routing step while it stores between from_tokens and to_tokens.
  int64_t WorstFloorBytes(int64_t from_tokens, int64_t to_tokens) const;

  // ---- the run ----
  // Clears the counters, peaks and means (a new run).
  void Reset();
  // The byte budget of a run of prompt_tokens + max_new_tokens, the floor it is checked
  // against, and whether it is below that floor (said in KvStats::note).
  void SetBudget(int64_t prompt_tokens, int64_t max_new_tokens);
  const std::optional<int64_t>& budget() const { return budget_; }  // nullopt: no limit
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t run_tokens() const { return run_tokens_; }

  // Peaks after bytes changed (a stored token, an applied plan).
  void UpdatePeaks();
  // The end of a batch: the prompt-reading peak (for prompt batches), then, after any routing
  // step, the next batch's peak starts from now and routed batches are sampled for the means.
  void NotePromptBatch() {
    stats_.prefill_peak_bytes = std::max(stats_.prefill_peak_bytes, peaks_.batch_peak);
  }
  void AfterBatch(bool routed);
  // After a routing step's compaction: the steady state it leaves.
  void AfterRoutingStep() {
    stats_.routed_reserved_peak_bytes =
        std::max(stats_.routed_reserved_peak_bytes, ReservedBytes());
  }
  // Run counters (promotions, evictions, routing steps, notes) kept with the byte figures.
  KvStats& counters() { return stats_; }
  const KvStats& counters() const { return stats_; }

  // Every figure, filled from the table and the store.
  KvStats Stats() const;

  // Forks and saved state: the peaks and means of another ledger (or of a saved one).
  struct Peaks {
    int64_t batch_peak = 0, peak_reserved = 0;
    double sum_resident = 0, sum_fp16 = 0, sum_quant = 0;
    int64_t samples = 0;
  };
  const Peaks& peaks() const { return peaks_; }
  void set_peaks(const Peaks& p) { peaks_ = p; }
  void set_counters(const KvStats& s) { stats_ = s; }
  void set_run(int64_t prompt_tokens, int64_t run_tokens) {
    prompt_tokens_ = prompt_tokens, run_tokens_ = run_tokens;
  }
  // A fork that never held the observation buffer its prefix held: peaks without it.
  void SubtractFromPeaks(int64_t bytes);

 private:
  const KvConfig& config_;
  const KvGeometry& geo_;
  const WindowTable& table_;
  const WindowStore& store_;
  const ObservationBuffer& observation_;
  const int64_t fp_block_bytes_;    // [2][n_kv_heads][W][head_dim] fp16
  const int64_t sink_block_bytes_;  // [2][n_kv_heads][S][head_dim] fp16
  const int64_t q_block_bytes_;     // QuantLayout::bytes

  std::optional<int64_t> budget_;  // KvConfig::GlobalBudgetBytes of the run; nullopt: no limit
  int64_t prompt_tokens_ = 0;      // tokens fed before the current turn's generation
  int64_t run_tokens_ = 0;         // those + max_new_tokens of the current turn
  KvStats stats_;                  // counters; bytes are filled in by Stats()
  // batch_peak: max resident bytes since the last EndBatch; peak_reserved: max of
  // ReservedBytes() over the run; sums and samples of routed batches for the means.
  Peaks peaks_;
};

}  // namespace qevict
