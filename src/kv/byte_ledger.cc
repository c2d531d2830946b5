#include "kv/byte_ledger.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kv/recall_source.h"

namespace qevict {

ByteLedger::ByteLedger(const KvConfig& config, const KvGeometry& geometry,
                       const QuantLayout& qlayout, const WindowTable& table,
                       const WindowStore& store, const ObservationBuffer& observation)
    : config_(config),
      geo_(geometry),
      table_(table),
      store_(store),
      observation_(observation),
      fp_block_bytes_(WindowStore::FpBlockBytes(config, geometry)),
      sink_block_bytes_(WindowStore::SinkBlockBytes(config, geometry)),
      q_block_bytes_(qlayout.bytes) {}

// ---- sizing ---------------------------------------------------------------------------------

// The latest queries kept for policies that observe a prompt's end (snapkv, pyramidkv,
// qevict-qa): [snapkv_window][n_heads][head_dim] fp32 and their positions, per layer. Charged to
// the budget like any other state the cache holds for a policy.
int64_t ByteLedger::ObservationBytesFor(const KvConfig& config, const KvGeometry& geometry) {
  return ObservationBuffer::BytesFor(geometry.n_layers, config.snapkv_window, geometry.n_heads,
                                     geometry.head_dim);
}

int64_t ByteLedger::MappedSlackBytes(const KvConfig& config, const KvGeometry& geometry,
                                     int64_t budget_bytes, bool quantizes) {
  const int64_t slabs = WindowStore::SlabSlackBytes(config, geometry, quantizes);
  // The quantized copies a routing step makes before compaction unmaps the fp16 slabs they
  // came from: at most the Q tier's share of the budget (between prompt chunks, its prefill
  // share).
  const double q_share = std::max(config.q_share, config.prefill_q_share);
  const int64_t demoted =
      quantizes && budget_bytes > 0 ? static_cast<int64_t>(q_share * static_cast<double>(budget_bytes)) : 0;
  return slabs + demoted;
}

int64_t ByteLedger::WorstReservedBytes(const KvConfig& config, const KvGeometry& geometry,
                                       const Policy& policy, int64_t prompt_tokens,
                                       int64_t run_tokens, std::optional<int64_t> budget) {
  constexpr int64_t kRecord = kRecordBytes;
  constexpr int64_t kPosition = kPositionBytes;
  const int64_t sinks = config.sinks, window = config.window, layers = geometry.n_layers;
  const int64_t per_token = geometry.fp16_bytes_per_token();
  auto windows = [&](int64_t tokens) {
    return (std::max<int64_t>(0, tokens - sinks) + window - 1) / window;
  };
  // The first `tokens` tokens all in fp16: the sink block and whole windows with their records.
  auto fp16_blocks = [&](int64_t tokens) {
    const int64_t sink_tokens = tokens > 0 ? sinks : 0;
    return (sink_tokens + windows(tokens) * window) * per_token +
           layers * windows(tokens) * kRecord;
  };
  // Positions are kept for every token stored, resident or not (and the next one's).
  auto positions = [&](int64_t tokens) { return (tokens + 1) * kPosition; };
  prompt_tokens = std::max<int64_t>(0, prompt_tokens);
  run_tokens = std::max(run_tokens, prompt_tokens);
  const int64_t everything = fp16_blocks(run_tokens) + positions(run_tokens);
  if (!budget) return everything + MappedSlackBytes(config, geometry, 0, policy.quantizes());

  // From the first routing step on, resident bytes stay under the budget unless it is below the
  // floor kept whatever the budget: sinks, the recent region, the window being filled and the
  // one being closed.
  const int64_t recent_windows = (config.recent + window - 1) / window;
  int64_t floor = fp16_blocks(sinks + (recent_windows + 2) * window) + positions(run_tokens);
  if (policy.keeps_cold()) {  // the cold tier's RAM: every window's record, digest, liveness bit
    const DigestGeometry dg{geometry.n_kv_heads, geometry.head_dim, config.window};
    const int64_t per_window = ColdWindowCost(DigestBytes(config.cold_digest, dg), config.cold_digest_group);
    floor += layers * (windows(run_tokens) * per_window + ColdLayerBytes(config, geometry));
  }
  int64_t steady = std::max(*budget, floor);
  if (!policy.evicts()) {  // every window past the floor stays, quantized, whatever the budget
    const QuantLayout q = QuantLayout::Make(geometry.n_kv_heads, config.window,
                                            geometry.head_dim, config.bits, config.value_group);
    steady = std::max(steady, floor + layers * windows(run_tokens) * (q.bytes + kRecord));
  }
  // Before the first routing step the prompt sits in fp16: all of it (read in one chunk), or
  // one chunk on top of what the previous chunks were routed down to.
  const int64_t prefill =
      config.prefill_chunk > 0 && prompt_tokens > config.prefill_chunk
          ? steady + fp16_blocks(std::min<int64_t>(config.prefill_chunk, prompt_tokens) + window)
          : fp16_blocks(prompt_tokens) + positions(prompt_tokens);
  const int64_t mapped =
      MappedSlackBytes(config, geometry, *budget, policy.quantizes()) +
      (policy.wants_observation() ? ObservationBytesFor(config, geometry) : 0);
  return std::min(everything, std::max(steady, prefill)) + mapped;
}

// ---- what the cache holds -------------------------------------------------------------------

int64_t ByteLedger::MetaBytes() const {
  // Window records, the position of every stored token (needed for RoPE at read time), the
  // observation queries a policy keeps, and the cold tier's records, digests and liveness bits.
  return table_.ResidentRecords() * kRecordBytes + table_.stored_tokens() * kPositionBytes +
         observation_.bytes() + ColdRamBytes();
}

int64_t ByteLedger::ColdLayerBytes(const KvConfig& config, const KvGeometry& geometry) {
  const DigestGeometry dg{geometry.n_kv_heads, geometry.head_dim, config.window};
  // With digest groups, the group being filled (its digest and mask, paid once).
  const int64_t query = RecallSource::QueryBytesFor(geometry.n_heads, geometry.head_dim) +
                        (config.cold_digest_group > 1 ? DigestBytes(config.cold_digest, dg) + 8 : 0);
  if (!DigestNeedsContext(config.cold_digest)) return query;
  const int64_t n = geometry.n_kv_heads, d = geometry.head_dim;
  const int64_t r = DigestContextRank(config.cold_digest, dg);
  return query + (r == 0 ? n * d * 2 * 2 : n * (d + 2 * r * d + r) * 2);  // DigestContext::bytes()
}

int64_t ByteLedger::DigestContextCost() const {
  return table_.digest_bytes() == 0 ? 0 : ColdLayerBytes(config_, geo_);
}

int64_t ByteLedger::ColdRamBytes() const {
  if (!store_.cold_tier()) return 0;  // (exact recovery's store alone: a bit a slot, not charged)
  int64_t contexts = 0;
  for (const LayerWindows& l : table_.layers()) {
    if (l.has_digest_context) contexts += l.digest_context.bytes();
  }
  // (The last generated token's query per layer, which ranks at decoding steps, is held from
  // the cache's creation: RecallSource::Configure.)
  int64_t digests = table_.ColdRecords() * table_.digest_bytes();
  if (table_.digest_group() > 1) {
    digests = 0;
    for (const LayerWindows& l : table_.layers()) digests += WindowTable::GroupDigestRam(l);
  }
  return table_.ColdRecords() * static_cast<int64_t>(sizeof(ColdRecord)) + digests +
         store_.disk()->live_slots() * kColdSlotBytes + contexts +
         geo_.n_layers * RecallSource::QueryBytesFor(geo_.n_heads, geo_.head_dim);
}

int64_t ByteLedger::ResidentBytes() const {
  return store_.fp16_bytes() + store_.quant_bytes() + MetaBytes();
}

int64_t ByteLedger::AllocatorResidentBytes() const { return store_.CountLiveBytes() + MetaBytes(); }

int64_t ByteLedger::ReservedBytes() const {
  return store_.reserved_bytes() + observation_.bytes() + ColdRamBytes();
}

int64_t ByteLedger::FloorBytes(const LayerWindows& l) const {
  const int64_t band = static_cast<int64_t>(table_.BandSize(l));
  const int64_t recent_windows = static_cast<int64_t>(l.windows.size()) - band;
  // With a cold tier every band window may go cold and every cold window stays: their cold
  // cost is paid first, so a plan's tiers cost what they cost without one.
  return (l.sink_block != BlockPool::kNoBlock ? sink_block_bytes_ : 0) +
         recent_windows * fp_window_cost() +
         (band + static_cast<int64_t>(l.cold.size())) * cold_window_cost() +
         DigestContextCost();
}

int64_t ByteLedger::FloorsOfAllLayers() const {
  int64_t floors = table_.stored_tokens() * kPositionBytes + NextTokenGrowth() + observation_.bytes();
  for (const LayerWindows& l : table_.layers()) floors += FloorBytes(l);
  return floors;
}

int64_t ByteLedger::NextTokenGrowth() const {
  const int64_t t = table_.stored_tokens();
  const int sinks = table_.sinks(), window = table_.window();
  int64_t per_layer = 0;
  if (t == 0 && sinks > 0) {
    per_layer = sink_block_bytes_;
  } else if (t >= sinks && (t - sinks) % window == 0) {
    per_layer = fp_window_cost();
  }
  return per_layer * geo_.n_layers + kPositionBytes;
}

// (The observation buffer is freed by every routing step that follows prompt queries, before
// the budget is shared out, so it is never part of the floor.)
int64_t ByteLedger::WorstFloorBytes(int64_t from_tokens, int64_t to_tokens) const {
  const int sinks = table_.sinks(), window = table_.window(), recent = table_.recent();
  int64_t worst = 0;
  for (int64_t n = std::max<int64_t>(1, from_tokens); n <= to_tokens; ++n) {
    const int64_t windows = n > sinks ? (n - sinks + window - 1) / window : 0;
    const int64_t band = std::max<int64_t>(0, n - recent - sinks) / window;
    const bool grows = n >= sinks && (n - sinks) % window == 0;
    const int64_t per_layer = (sinks > 0 ? sink_block_bytes_ : 0) +
                              (windows - band + (grows ? 1 : 0)) * fp_window_cost() +
                              band * cold_window_cost() + DigestContextCost();
    worst = std::max(worst, per_layer * geo_.n_layers + (n + 1) * kPositionBytes);
  }
  return worst;
}

// ---- the run --------------------------------------------------------------------------------

void ByteLedger::Reset() {
  stats_ = KvStats{};
  peaks_ = Peaks{};
}

void ByteLedger::UpdatePeaks() {
  const int64_t fp16 = store_.fp16_bytes();
  const int64_t quant = store_.quant_bytes();
  const int64_t resident = fp16 + quant + MetaBytes();
  stats_.peak_bytes = std::max(stats_.peak_bytes, resident);
  stats_.peak_fp16_bytes = std::max(stats_.peak_fp16_bytes, fp16);
  stats_.peak_quant_bytes = std::max(stats_.peak_quant_bytes, quant);
  peaks_.batch_peak = std::max(peaks_.batch_peak, resident);
  peaks_.peak_reserved = std::max(peaks_.peak_reserved, ReservedBytes());
}

void ByteLedger::AfterBatch(bool routed) {
  peaks_.batch_peak = ResidentBytes();
  if (routed) {
    peaks_.sum_resident += static_cast<double>(ResidentBytes());
    peaks_.sum_fp16 += static_cast<double>(store_.fp16_bytes());
    peaks_.sum_quant += static_cast<double>(store_.quant_bytes());
    ++peaks_.samples;
  }
}

void ByteLedger::SubtractFromPeaks(int64_t bytes) {
  for (int64_t* peak : {&stats_.peak_bytes, &stats_.prefill_peak_bytes, &peaks_.batch_peak,
                        &peaks_.peak_reserved}) {
    *peak -= bytes;
  }
}

// The policy's own state is not touched (BeginRun resets it; a further turn keeps it).
void ByteLedger::SetBudget(int64_t prompt_tokens, int64_t max_new_tokens) {
  prompt_tokens_ = std::max<int64_t>(0, prompt_tokens);
  run_tokens_ = std::max<int64_t>(0, prompt_tokens) + std::max<int64_t>(0, max_new_tokens);
  budget_ = config_.GlobalBudgetBytes(run_tokens_, geo_);
  // Reported: the run's whole budget, sliding-window rings included (== budget_ without them).
  stats_.budget_bytes = config_.BudgetBytes(run_tokens_, geo_).value_or(-1);
  stats_.global_budget_bytes = budget_.value_or(-1);
  stats_.budget_scope_global = config_.budget_scope == BudgetScope::kGlobal;

  if (!budget_) {
    stats_.floor_bytes = -1;
    return;
  }
  // The largest floor of the run so far (a further turn's is never smaller).
  const int64_t floor = WorstFloorBytes(prompt_tokens, std::max(run_tokens_, int64_t{1}));
  stats_.floor_bytes = std::max(stats_.floor_bytes, floor);
  if (*budget_ >= floor || stats_.infeasible) return;
  const int64_t rings = geo_.ring_bytes(run_tokens_);
  const double fraction = config_.BudgetFractionFor(floor, run_tokens_, geo_);
  stats_.infeasible = true;
  const bool global_scope = config_.budget_scope == BudgetScope::kGlobal;
  const std::string rings_note =
      rings == 0     ? ""
      : global_scope ? " (the global layers' budget; the sliding-window layers' rings of " +
                           std::to_string(rings) + " bytes are paid on top)"
                     : " (what the sliding-window layers' rings of " + std::to_string(rings) +
                           " bytes leave of the budget; --kv-budget-scope global gives it for "
                           "the global layers alone)";
  stats_.note = "budget of " + std::to_string(*budget_) + " bytes" + rings_note +
                " is below the fp16 floor of " + std::to_string(floor) + " bytes (sinks " +
                std::to_string(table_.sinks()) + " + recent " + std::to_string(table_.recent()) +
                " tokens and one growing window in every layer, plus metadata" +
                (cold_window_cost() > 0
                     ? ", plus " + std::to_string(cold_window_cost()) +
                           " bytes of cold-tier record, digest and liveness per window"
                     : std::string()) +
                "); the cache keeps only that floor. " +
                (fraction < 1.0 ? "Raise --kv-budget to at least " + std::to_string(fraction) +
                                      " or lower --kv-sinks/--kv-recent"
                                : std::string("No --kv-budget below 1 fits this run: the floor "
                                              "exceeds the full cache; lower "
                                              "--kv-sinks/--kv-recent or drop the budget"));
}

KvStats ByteLedger::Stats() const {
  KvStats s = stats_;
  s.tokens_seen = table_.layers().back().count;
  int64_t resident_tokens = 0;
  for (const LayerWindows& l : table_.layers()) {
    resident_tokens += table_.ResidentTokens(l);
    s.evicted_windows += l.evicted;
    for (const WindowRecord& w : l.windows) {
      (w.tier == Tier::kFp16 ? s.fp16_windows : s.quant_windows) += 1;
    }
  }
  s.tokens_resident = resident_tokens / geo_.n_layers;
  s.fp16_bytes = store_.fp16_bytes();
  s.quant_bytes = store_.quant_bytes();
  s.meta_bytes = MetaBytes();
  if (const DiskColdStore* disk = store_.disk()) {
    s.cold_bytes = disk->live_bytes();
    s.cold_peak_bytes = disk->peak_bytes();
    s.cold_windows = table_.ColdRecords();
    s.cold_ram_bytes = ColdRamBytes();
    s.cold_page_cache_bytes = disk->PageCacheBytes();
    s.cold_prefetch_bytes = disk->prefetch_bytes();
    // The store's own I/O, on top of what a cache loaded from a prompt cache carried (LoadState).
    s.cold_written_bytes += disk->bytes_written();
    s.cold_read_bytes += disk->bytes_read();
  }
  s.full_fp16_bytes = s.tokens_seen * geo_.fp16_bytes_per_token();
  s.pool_reserved_bytes = store_.reserved_bytes();
  s.reserved_bytes = ReservedBytes();
  s.peak_reserved_bytes = peaks_.peak_reserved;
  if (peaks_.samples > 0) {
    s.mean_resident_bytes = static_cast<int64_t>(peaks_.sum_resident / peaks_.samples);
    s.mean_fp16_bytes = static_cast<int64_t>(peaks_.sum_fp16 / peaks_.samples);
    s.mean_quant_bytes = static_cast<int64_t>(peaks_.sum_quant / peaks_.samples);
  }
  return s;
}

}  // namespace qevict
