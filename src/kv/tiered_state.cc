// The tiered cache's state saved to and restored from a prompt cache (KvCache::SaveState):
// every layer's sinks and resident windows in their tiers (codes for quantized ones, the cold
// store's originals under exact recovery or a cold tier), the cold tier's windows (their exact
// blocks read back from disk; their digests are rebuilt from them on loading), the window scores, the observation buffer, the run's
// ledger and counters, and the policy's own state. Loading allocates fresh blocks, so the
// restored cache is compact; everything else is as it was. The loader checks every count,
// index and tier against the layout before it trusts it.
#include <algorithm>
#include <cmath>

#include "kv/cache_state.h"
#include "kv/tiered_cache.h"

namespace qevict {
namespace {

constexpr uint32_t kTieredTag = 0x54495233;  // "TIR3": the cold tier and its counters

bool FiniteNonNegative(float x) { return std::isfinite(x) && x >= 0.0f; }

}  // namespace

void TieredCache::SaveState(ByteWriter& out) const {
  ThrowIfFailed();
  if (for_forks_) throw Error("a prefix cache kept for forks cannot be saved");
  // The counters as Stats() reports them before this save reads the cold blocks back: the cold
  // tier's I/O is the store's own (plus what a loaded cache carried), saved with the rest, so a
  // cache loaded from the file reports the run's figures, and saving it again gives the same
  // bytes.
  KvStats counters = ledger_.counters();
  if (store_.disk() != nullptr) {
    const KvStats now = ledger_.Stats();
    counters.cold_written_bytes = now.cold_written_bytes;
    counters.cold_read_bytes = now.cold_read_bytes;
  }
  const int64_t count = table_.stored_tokens();
  for (const LayerWindows& l : table_.layers()) QEVICT_CHECK(l.count == count);
  CheckSessionPositions({table_.positions(), static_cast<size_t>(count)});
  SaveStateTag(kTieredTag, out);
  out.Pod<int64_t>(ledger_.fp_block_bytes());
  out.Pod<int64_t>(qlayout_.bytes);
  out.Pod<int64_t>(ledger_.sink_block_bytes());
  out.Pod<int64_t>(count);
  std::vector<uint8_t> block(static_cast<size_t>(ledger_.fp_block_bytes()));
  for (int li = 0; li < table_.n_layers(); ++li) {
    const LayerWindows& l = table_.layer(li);
    out.Pod<int64_t>(l.evicted);
    if (l.sink_block != BlockPool::kNoBlock) {
      out.Raw(store_.data(WindowStore::Kind::kSink, l.sink_block), ledger_.sink_block_bytes());
    }
    out.Pod<uint64_t>(l.windows.size());
    for (const WindowRecord& w : l.windows) {
      out.Pod<int32_t>(w.index);
      out.Pod<uint8_t>(static_cast<uint8_t>(w.tier));
      out.Pod<float>(w.mass_sum);
      out.Pod<float>(w.observers);
      out.Pod<float>(w.last_mass);
      const WindowStore::Kind kind = WindowStore::KindOf(w.tier);
      out.Raw(store_.data(kind, w.block), store_.block_bytes(kind));
      out.Pod<uint8_t>(w.cold_slot >= 0 ? 1 : 0);
      if (w.cold_slot >= 0) {
        store_.disk()->Read(w.cold_slot, ColdBlockTag(li, w.index), block.data());
        out.Raw(block.data(), ledger_.fp_block_bytes());
      }
    }
    out.Pod<uint8_t>(l.has_digest_context ? 1 : 0);
    if (l.has_digest_context) l.digest_context.Write(out);
    out.Pod<uint64_t>(l.cold.size());
    for (const ColdRecord& c : l.cold) {
      out.Pod<int32_t>(c.index);
      store_.disk()->Read(c.slot, ColdBlockTag(li, c.index), block.data());
      out.Raw(block.data(), ledger_.fp_block_bytes());
    }
    observation_.SaveLayer(li, out);
  }
  const ByteLedger::Peaks& peaks = ledger_.peaks();
  out.Pod<int64_t>(ledger_.prompt_tokens());
  out.Pod<int64_t>(ledger_.run_tokens());
  out.Pod<uint8_t>(clock_.routed ? 1 : 0);
  out.Pod<uint8_t>(clock_.over_budget ? 1 : 0);
  out.Pod<int64_t>(clock_.since_route);
  out.Pod<int64_t>(clock_.tokens_at_route);
  out.Pod<uint8_t>(static_cast<uint8_t>(clock_.last_batch));
  out.Pod<uint8_t>(observation_.held() ? 1 : 0);
  out.Pod<uint8_t>(observation_.remembering() ? 1 : 0);
  out.Pod<int64_t>(peaks.batch_peak);
  out.Pod<int64_t>(peaks.peak_reserved);
  out.Pod<double>(peaks.sum_resident);
  out.Pod<double>(peaks.sum_fp16);
  out.Pod<double>(peaks.sum_quant);
  out.Pod<int64_t>(peaks.samples);
  SaveKvStats(counters, out);
  policy_->SaveState(out);
}

void TieredCache::LoadState(ByteReader& in) {
  LoadStateTag(kTieredTag, "the tiered cache", in);
  if (in.Pod<int64_t>("block size") != ledger_.fp_block_bytes() ||
      in.Pod<int64_t>("block size") != qlayout_.bytes ||
      in.Pod<int64_t>("block size") != ledger_.sink_block_bytes()) {
    in.Fail("saved with another window, sink, bit-width or head layout");
  }
  const int64_t count = in.Pod<int64_t>("token count");
  if (count < 0 || count > geo_.max_tokens) {
    in.Fail("holds " + std::to_string(count) + " tokens, more than this context of " +
            std::to_string(geo_.max_tokens) + ": raise --ctx-size");
  }
  BeginRun(0, 0);  // empty, the policy reset; everything below overwrites the run's state
  observation_.Release();
  int32_t* positions = table_.mutable_positions();
  for (int64_t t = 0; t < count; ++t) positions[t] = static_cast<int32_t>(t);
  const int sinks = config_.sinks;
  const int64_t first_recent = table_.FirstRecentIndex(count);
  bool any_obs = false;
  std::vector<uint8_t> block(static_cast<size_t>(ledger_.fp_block_bytes()));
  for (int li = 0; li < table_.n_layers(); ++li) {
    LayerWindows& l = table_.layer(li);
    l.count = count;
    const int64_t total = table_.CreatedWindows(l);
    l.evicted = in.Pod<int64_t>("evicted windows");
    if (count > 0 && sinks > 0) {
      l.sink_block = store_.Allocate(WindowStore::Kind::kSink);
      in.Raw(store_.data(WindowStore::Kind::kSink, l.sink_block), ledger_.sink_block_bytes(),
             "sinks");
    }
    const uint64_t n = in.Pod<uint64_t>("window count");
    if (n > static_cast<uint64_t>(total)) in.Fail("more windows than its tokens make");
    int64_t previous = -1;
    for (uint64_t j = 0; j < n; ++j) {
      WindowRecord w{BlockPool::kNoBlock,
                     -1,
                     in.Pod<int32_t>("window index"),
                     Tier::kEvicted,
                     0.0f,
                     0.0f,
                     0.0f};
      const uint8_t tier = in.Pod<uint8_t>("window tier");
      w.mass_sum = in.Pod<float>("window score");
      w.observers = in.Pod<float>("window score");
      w.last_mass = in.Pod<float>("window score");
      if (w.index <= previous || w.index >= total) in.Fail("window indices out of order");
      if (tier > static_cast<uint8_t>(Tier::kQuant)) in.Fail("a resident window has no tier");
      if (!FiniteNonNegative(w.mass_sum) || !FiniteNonNegative(w.observers) ||
          !FiniteNonNegative(w.last_mass)) {
        in.Fail("a window score is negative or not finite");
      }
      w.tier = static_cast<Tier>(tier);
      // The recent windows (the one being filled among them) are fp16, always.
      if (w.index >= first_recent && w.tier != Tier::kFp16) in.Fail("a recent window is quantized");
      previous = w.index;
      const WindowStore::Kind kind = WindowStore::KindOf(w.tier);
      w.block = store_.Allocate(kind);
      l.windows.push_back(w);  // owned by the layer from here: BeginRun frees it on failure
      in.Raw(store_.data(kind, w.block), store_.block_bytes(kind), "window bytes");
      if (in.Bool("cold copy")) {
        if (store_.disk() == nullptr) in.Fail("saved with --kv-recovery exact");
        in.Raw(block.data(), ledger_.fp_block_bytes(), "cold window bytes");
        l.windows.back().cold_slot =
            store_.WriteDisk(block.data(), ColdBlockTag(li, l.windows.back().index));
      }
    }
    // The cold tier: each window's exact block back to this cache's disk store, its digest
    // rebuilt from the block (a file cannot hand the cache a digest that ranks it wrongly).
    if (in.Bool("digest context")) {
      if (!cold_tier() || !DigestNeedsContext(config_.cold_digest)) {
        in.Fail("a digest context for a cache whose digests take none");
      }
      l.digest_context = DigestContext::Read(
          in, DigestGeometry{geo_.n_kv_heads, geo_.head_dim, config_.window});
      l.has_digest_context = true;
    }
    const uint64_t n_cold = in.Pod<uint64_t>("cold window count");
    if (n_cold > 0 && !cold_tier()) in.Fail("cold windows for a policy without a cold tier");
    if (n_cold > static_cast<uint64_t>(total) - n) in.Fail("more windows than its tokens make");
    if (n_cold > 0 && DigestNeedsContext(config_.cold_digest) && !l.has_digest_context) {
      in.Fail("cold windows without their layer's digest context");
    }
    std::vector<uint8_t> digest(static_cast<size_t>(table_.digest_bytes()));
    int64_t previous_cold = -1;
    for (uint64_t j = 0; j < n_cold; ++j) {
      const int32_t index = in.Pod<int32_t>("cold window index");
      if (index <= previous_cold || index >= first_recent) in.Fail("cold window indices out of order");
      if (std::any_of(l.windows.begin(), l.windows.end(),
                      [&](const WindowRecord& w) { return w.index == index; })) {
        in.Fail("a window both resident and cold");
      }
      previous_cold = index;
      in.Raw(block.data(), ledger_.fp_block_bytes(), "cold window bytes");
      if (table_.digest_group() > 1) {  // its group's digest, from the group's windows so far
        EnsureGroupDigest(l, index, block.data());
        table_.AddCold(l, ColdRecord{index, store_.WriteDisk(block.data(), ColdBlockTag(li, index))},
                       nullptr);
        continue;
      }
      WindowDigest::BuildIntoFromFp16(config_.cold_digest,
                                      DigestGeometry{geo_.n_kv_heads, geo_.head_dim, config_.window},
                                      reinterpret_cast<const uint16_t*>(block.data()),
                                      digest.data(),
                                      l.has_digest_context ? &l.digest_context : nullptr);
      table_.AddCold(l, ColdRecord{index, store_.WriteDisk(block.data(), ColdBlockTag(li, index))},
                     digest.data());
    }
    if (l.evicted != total - static_cast<int64_t>(n + n_cold)) in.Fail("evicted windows miscounted");
    const int64_t recent_held =
        std::count_if(l.windows.begin(), l.windows.end(),
                      [&](const WindowRecord& w) { return w.index >= first_recent; });
    if (recent_held != std::max<int64_t>(0, total - first_recent)) {
      in.Fail("a recent window is missing");
    }
    observation_.LoadLayer(li, in);
    const bool held = observation_.LayerHeld(li);
    if (li > 0 && held != any_obs) in.Fail("observation buffers differ by layer");
    any_obs = held;
  }
  ByteLedger::Peaks peaks;
  const int64_t prompt_tokens = in.Pod<int64_t>("run state");
  const int64_t run_tokens = in.Pod<int64_t>("run state");
  clock_.routed = in.Bool("run state");
  clock_.over_budget = in.Bool("run state");
  clock_.since_route = in.Pod<int64_t>("run state");
  clock_.tokens_at_route = in.Pod<int64_t>("run state");
  const uint8_t last = in.Pod<uint8_t>("run state");
  const bool held = in.Bool("run state");
  bool remembering = in.Bool("run state");
  peaks.batch_peak = in.Pod<int64_t>("run state");
  peaks.peak_reserved = in.Pod<int64_t>("run state");
  peaks.sum_resident = in.Pod<double>("run state");
  peaks.sum_fp16 = in.Pod<double>("run state");
  peaks.sum_quant = in.Pod<double>("run state");
  peaks.samples = in.Pod<int64_t>("run state");
  // (At most 2^24 new tokens: SetBudget walks the run's tokens.)
  if (prompt_tokens < 0 || prompt_tokens > count || run_tokens < prompt_tokens ||
      run_tokens - prompt_tokens > (int64_t{1} << 24) || clock_.since_route < 0 ||
      clock_.tokens_at_route < 0 || clock_.tokens_at_route > count ||
      last > static_cast<uint8_t>(BatchKind::kGenerated) || held != any_obs ||
      peaks.samples < 0 || !std::isfinite(peaks.sum_resident) || !std::isfinite(peaks.sum_fp16) ||
      !std::isfinite(peaks.sum_quant)) {
    in.Fail("malformed run state");
  }
  clock_.last_batch = static_cast<BatchKind>(last);
  // A cache is saved after a prompt: once it has routed, its first prompt end (the one that
  // takes external scores) is behind it.
  clock_.first_prompt_end_done = clock_.routed;
  external_->Clear();
  observation_.SetHeldAfterLoad(held);
  ledger_.set_peaks(peaks);
  ledger_.set_counters(LoadKvStats(in));
  // Stats() adds this cache's own cold I/O (the blocks written above, and with digest groups the
  // blocks read back to rebuild them) to the carried figures: loading counts as neither.
  KvStats& counters = ledger_.counters();
  const int64_t written = store_.disk() != nullptr ? store_.disk()->bytes_written() : 0;
  const int64_t read = store_.disk() != nullptr ? store_.disk()->bytes_read() : 0;
  if (counters.cold_written_bytes < written || counters.cold_read_bytes < 0 ||
      counters.recalls < 0 || counters.cold_score_read_bytes < 0) {
    in.Fail("malformed cold tier counters");
  }
  counters.cold_written_bytes -= written;
  counters.cold_read_bytes -= read;
  // The budget and what the policy needs follow from the run's tokens, as when it was saved.
  SetBudget(prompt_tokens, run_tokens - prompt_tokens);
  if (held && !observing()) in.Fail("an observation buffer for a policy that does not observe");
  observation_.set_remembering(remembering && observing());
  policy_->LoadState(in, geo_.n_layers);
}

}  // namespace qevict
