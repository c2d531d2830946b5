// The tiered cache's state saved to and restored from a prompt cache (KvCache::SaveState):
// every layer's sinks and resident windows in their tiers (codes for quantized ones, the cold
// store's originals under exact recovery), the window scores, the observation buffer, the run's
// ledger and counters, and the policy's own state. Loading allocates fresh blocks, so the
// restored cache is compact; everything else is as it was. The loader checks every count,
// index and tier against the layout before it trusts it.
#include <algorithm>
#include <cmath>

#include "kv/cache_state.h"
#include "kv/tiered_cache.h"

namespace qevict {
namespace {

constexpr uint32_t kTieredTag = 0x54495231;  // "TIR1"

bool FiniteNonNegative(float x) { return std::isfinite(x) && x >= 0.0f; }

}  // namespace

void TieredCache::SaveState(ByteWriter& out) const {
  if (for_forks_) throw Error("a prefix cache kept for forks cannot be saved");
  const int64_t count = layers_.front().count;
  for (const LayerState& l : layers_) QEVICT_CHECK(l.count == count);
  CheckSessionPositions({pos_.data(), static_cast<size_t>(count)});
  SaveStateTag(kTieredTag, out);
  out.Pod<int64_t>(fp_block_bytes_);
  out.Pod<int64_t>(qlayout_.bytes);
  out.Pod<int64_t>(sink_block_bytes_);
  out.Pod<int64_t>(count);
  for (const LayerState& l : layers_) {
    out.Pod<int64_t>(l.evicted);
    if (l.sink_block != BlockPool::kNoBlock) {
      out.Raw(store_.data(WindowStore::Kind::kSink, l.sink_block), sink_block_bytes_);
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
      if (w.cold_slot >= 0) out.Raw(store_.cold()->data(w.cold_slot), fp_block_bytes_);
    }
    out.Pod<int32_t>(l.obs_filled);
    out.Pod<int32_t>(l.obs_next);
    out.Array<float>(l.obs_queries);
    out.Array<int32_t>(l.obs_pos);
  }
  out.Pod<int64_t>(prompt_tokens_);
  out.Pod<int64_t>(run_tokens_);
  out.Pod<uint8_t>(routed_ ? 1 : 0);
  out.Pod<uint8_t>(over_budget_ ? 1 : 0);
  out.Pod<int64_t>(since_route_);
  out.Pod<int64_t>(tokens_at_route_);
  out.Pod<uint8_t>(static_cast<uint8_t>(last_batch_));
  out.Pod<uint8_t>(obs_held_ ? 1 : 0);
  out.Pod<uint8_t>(remember_queries_ ? 1 : 0);
  out.Pod<int64_t>(batch_peak_);
  out.Pod<int64_t>(peak_reserved_);
  out.Pod<double>(sum_resident_);
  out.Pod<double>(sum_fp16_);
  out.Pod<double>(sum_quant_);
  out.Pod<int64_t>(samples_);
  SaveKvStats(stats_, out);
  policy_->SaveState(out);
}

void TieredCache::LoadState(ByteReader& in) {
  LoadStateTag(kTieredTag, "the tiered cache", in);
  if (in.Pod<int64_t>("block size") != fp_block_bytes_ ||
      in.Pod<int64_t>("block size") != qlayout_.bytes ||
      in.Pod<int64_t>("block size") != sink_block_bytes_) {
    in.Fail("saved with another window, sink, bit-width or head layout");
  }
  const int64_t count = in.Pod<int64_t>("token count");
  if (count < 0 || count > geo_.max_tokens) {
    in.Fail("holds " + std::to_string(count) + " tokens, more than this context of " +
            std::to_string(geo_.max_tokens) + ": raise --ctx-size");
  }
  BeginRun(0, 0);  // empty, the policy reset; everything below overwrites the run's state
  ReleaseObservation();
  for (int64_t t = 0; t < count; ++t) pos_[t] = static_cast<int32_t>(t);
  const int64_t total = count > sinks_ ? (count - sinks_ + window_ - 1) / window_ : 0;
  const int64_t old_tokens = count - recent_ - sinks_;
  const int64_t first_recent = old_tokens > 0 ? old_tokens / window_ : 0;
  const size_t obs_queries =
      static_cast<size_t>(config_.snapkv_window) * geo_.n_heads * geo_.head_dim;
  bool any_obs = false;
  for (LayerState& l : layers_) {
    l.count = count;
    l.evicted = in.Pod<int64_t>("evicted windows");
    if (count > 0 && sinks_ > 0) {
      l.sink_block = store_.Allocate(WindowStore::Kind::kSink);
      in.Raw(store_.data(WindowStore::Kind::kSink, l.sink_block), sink_block_bytes_, "sinks");
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
        if (store_.cold() == nullptr) in.Fail("saved with --kv-recovery exact");
        uint8_t* cold = nullptr;
        l.windows.back().cold_slot = store_.AllocateCold(&cold);
        in.Raw(cold, fp_block_bytes_, "cold window bytes");
      }
    }
    if (l.evicted != total - static_cast<int64_t>(n)) in.Fail("evicted windows miscounted");
    const int64_t recent_held =
        std::count_if(l.windows.begin(), l.windows.end(),
                      [&](const WindowRecord& w) { return w.index >= first_recent; });
    if (recent_held != std::max<int64_t>(0, total - first_recent)) {
      in.Fail("a recent window is missing");
    }
    l.obs_filled = in.Pod<int32_t>("observation");
    l.obs_next = in.Pod<int32_t>("observation");
    l.obs_queries = in.Array<float>("observation queries", obs_queries);
    l.obs_pos = in.Array<int32_t>("observation positions", config_.snapkv_window);
    const bool held = !l.obs_pos.empty() || !l.obs_queries.empty();
    if ((held && (l.obs_queries.size() != obs_queries ||
                  l.obs_pos.size() != static_cast<size_t>(config_.snapkv_window))) ||
        l.obs_filled < 0 || l.obs_filled > (held ? config_.snapkv_window : 0) || l.obs_next < 0 ||
        l.obs_next >= std::max(1, held ? config_.snapkv_window : 0)) {
      in.Fail("malformed observation buffer");
    }
    if (&l != &layers_.front() && held != any_obs) in.Fail("observation buffers differ by layer");
    any_obs = held;
  }
  prompt_tokens_ = in.Pod<int64_t>("run state");
  run_tokens_ = in.Pod<int64_t>("run state");
  routed_ = in.Bool("run state");
  over_budget_ = in.Bool("run state");
  since_route_ = in.Pod<int64_t>("run state");
  tokens_at_route_ = in.Pod<int64_t>("run state");
  const uint8_t last = in.Pod<uint8_t>("run state");
  obs_held_ = in.Bool("run state");
  remember_queries_ = in.Bool("run state");
  batch_peak_ = in.Pod<int64_t>("run state");
  peak_reserved_ = in.Pod<int64_t>("run state");
  sum_resident_ = in.Pod<double>("run state");
  sum_fp16_ = in.Pod<double>("run state");
  sum_quant_ = in.Pod<double>("run state");
  samples_ = in.Pod<int64_t>("run state");
  // (At most 2^24 new tokens: SetBudget walks the run's tokens.)
  if (prompt_tokens_ < 0 || prompt_tokens_ > count || run_tokens_ < prompt_tokens_ ||
      run_tokens_ - prompt_tokens_ > (int64_t{1} << 24) || since_route_ < 0 ||
      tokens_at_route_ < 0 || tokens_at_route_ > count ||
      last > static_cast<uint8_t>(BatchKind::kGenerated) || obs_held_ != any_obs || samples_ < 0 ||
      !std::isfinite(sum_resident_) || !std::isfinite(sum_fp16_) || !std::isfinite(sum_quant_)) {
    in.Fail("malformed run state");
  }
  last_batch_ = static_cast<BatchKind>(last);
  // A cache is saved after a prompt: once it has routed, its first prompt end (the one that
  // takes external scores) is behind it.
  priors_done_ = routed_;
  for (LayerState& l : layers_) l.external = {};
  stats_ = LoadKvStats(in);
  // The budget and what the policy needs follow from the run's tokens, as when it was saved.
  SetBudget(prompt_tokens_, run_tokens_ - prompt_tokens_);
  if (obs_held_ && !observing_) in.Fail("an observation buffer for a policy that does not observe");
  remember_queries_ = remember_queries_ && observing_;
  policy_->LoadState(in, geo_.n_layers);
}

}  // namespace qevict
