// Saved state of the fp16 caches (FullCache, SlidingWindowCache, InterleavedCache) and the
// pieces every cache's state shares. The tiered cache's is in tiered_state.cc.
#include "kv/cache_state.h"

#include <algorithm>

#include "kv/full_cache.h"
#include "kv/interleaved_cache.h"
#include "kv/sliding_window_cache.h"

namespace qevict {
namespace {

// Every int64 counter of KvStats, in the order they are saved.
constexpr int64_t KvStats::*kStatsCounters[] = {
    &KvStats::tokens_seen,        &KvStats::tokens_resident,
    &KvStats::fp16_bytes,         &KvStats::quant_bytes,
    &KvStats::meta_bytes,         &KvStats::cold_bytes,
    &KvStats::peak_bytes,         &KvStats::budget_bytes,
    &KvStats::full_fp16_bytes,    &KvStats::fp16_windows,
    &KvStats::quant_windows,      &KvStats::evicted_windows,
    &KvStats::promotions,         &KvStats::demotions,
    &KvStats::evictions,          &KvStats::routing_steps,
    &KvStats::peak_fp16_bytes,    &KvStats::peak_quant_bytes,
    &KvStats::prefill_peak_bytes, &KvStats::mean_resident_bytes,
    &KvStats::mean_fp16_bytes,    &KvStats::mean_quant_bytes,
    &KvStats::cold_peak_bytes,    &KvStats::pool_reserved_bytes,
    &KvStats::reserved_bytes,     &KvStats::peak_reserved_bytes,
    &KvStats::compaction_moves,   &KvStats::routed_reserved_peak_bytes,
    &KvStats::floor_bytes,        &KvStats::sliding_bytes,
    &KvStats::sliding_window,     &KvStats::cold_written_bytes,
    &KvStats::cold_read_bytes,    &KvStats::cold_score_read_bytes,
    &KvStats::recalls,
};

constexpr uint32_t kFullTag = 0x46554c31;         // "FUL1"
constexpr uint32_t kRingsTag = 0x52494e31;        // "RIN1"
constexpr uint32_t kInterleavedTag = 0x494e5431;  // "INT1"

}  // namespace

void SaveKvStats(const KvStats& stats, ByteWriter& out) {
  for (auto field : kStatsCounters) out.Pod<int64_t>(stats.*field);
  out.Pod<int32_t>(stats.sliding_layers);
  out.Pod<uint8_t>(stats.infeasible ? 1 : 0);
  out.String(stats.note);
}

KvStats LoadKvStats(ByteReader& in) {
  KvStats stats;
  for (auto field : kStatsCounters) stats.*field = in.Pod<int64_t>("KV statistics");
  stats.sliding_layers = in.Pod<int32_t>("KV statistics");
  stats.infeasible = in.Bool("KV statistics");
  stats.note = in.String("KV statistics note", 4096);
  return stats;
}

void CheckSessionPositions(std::span<const int32_t> positions) {
  for (size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] != static_cast<int32_t>(i)) {
      throw Error("only a cache whose tokens sit at positions 0, 1, ... can be saved");
    }
  }
}

void SaveStateTag(uint32_t tag, ByteWriter& out) { out.Pod<uint32_t>(tag); }

void LoadStateTag(uint32_t tag, const char* cache, ByteReader& in) {
  if (in.Pod<uint32_t>("state tag") != tag) {
    in.Fail(std::string("the saved state is not that of ") + cache +
            " (another policy or engine version wrote it)");
  }
}

// ---- FullCache ---------------------------------------------------------------------------

void FullCache::SaveState(ByteWriter& out) const {
  const int64_t count = count_.back();
  QEVICT_CHECK(std::all_of(count_.begin(), count_.end(), [&](int64_t c) { return c == count; }));
  CheckSessionPositions({pos_.data(), static_cast<size_t>(count)});
  SaveStateTag(kFullTag, out);
  out.Pod<int64_t>(count);
  out.Pod<int64_t>(peak_tokens_);
  const size_t row = static_cast<size_t>(geo_.head_dim) * sizeof(uint16_t);
  for (int layer = 0; layer < geo_.n_layers; ++layer) {
    for (int h = 0; h < geo_.n_kv_heads; ++h) {
      out.Raw(k_row(layer, h, 0), row * count);
      out.Raw(v_row(layer, h, 0), row * count);
    }
  }
}

void FullCache::LoadState(ByteReader& in) {
  LoadStateTag(kFullTag, "the full cache", in);
  const int64_t count = in.Pod<int64_t>("token count");
  const int64_t peak = in.Pod<int64_t>("peak tokens");
  if (count < 0 || count > geo_.max_tokens) {
    in.Fail("holds " + std::to_string(count) + " tokens, more than this context of " +
            std::to_string(geo_.max_tokens) + ": raise --ctx-size");
  }
  if (peak < count || peak > geo_.max_tokens) in.Fail("peak tokens out of range");
  const size_t row = static_cast<size_t>(geo_.head_dim) * sizeof(uint16_t);
  for (int layer = 0; layer < geo_.n_layers; ++layer) {
    for (int h = 0; h < geo_.n_kv_heads; ++h) {
      in.Raw(k_row(layer, h, 0), row * count, "keys");
      in.Raw(v_row(layer, h, 0), row * count, "values");
    }
  }
  for (int64_t t = 0; t < count; ++t) pos_[t] = static_cast<int32_t>(t);
  std::fill(count_.begin(), count_.end(), count);
  peak_tokens_ = peak;
}

// ---- SlidingWindowCache ------------------------------------------------------------------

void SlidingWindowCache::SaveState(ByteWriter& out) const {
  QEVICT_CHECK(stage_layer_ == -1);
  SaveStateTag(kRingsTag, out);
  out.Pod<int32_t>(window_);
  const int hd = geo_.head_dim;
  for (const Ring& r : layers_) {
    out.Pod<int64_t>(r.count);
    const int64_t held = Held(r);
    for (int64_t j = 0; j < held; ++j) {
      const int64_t t = r.count - held + j;  // oldest first
      const int64_t slot = t % window_;
      if (r.pos[slot] != t) throw Error("only rings of positions 0, 1, ... can be saved");
      for (int h = 0; h < geo_.n_kv_heads; ++h) {
        const size_t at = (static_cast<size_t>(h) * slots_ + slot) * hd;
        out.Raw(&r.k[at], hd * sizeof(uint16_t));
        out.Raw(&r.v[at], hd * sizeof(uint16_t));
      }
    }
  }
}

void SlidingWindowCache::LoadState(ByteReader& in) {
  LoadStateTag(kRingsTag, "the sliding-window rings", in);
  if (in.Pod<int32_t>("ring window") != window_) in.Fail("saved with another sliding window");
  Reset();
  const int hd = geo_.head_dim;
  int64_t count0 = -1;
  for (Ring& r : layers_) {
    const int64_t count = in.Pod<int64_t>("ring token count");
    if (count < 0 || count > geo_.max_tokens) {
      in.Fail("a ring holds " + std::to_string(count) + " tokens, more than this context of " +
              std::to_string(geo_.max_tokens) + ": raise --ctx-size");
    }
    if (count0 >= 0 && count != count0) in.Fail("the rings disagree on the token count");
    count0 = count;
    r.count = count;
    const int64_t held = Held(r);
    for (int64_t j = 0; j < held; ++j) {
      const int64_t t = count - held + j;
      const int64_t slot = t % window_;
      for (int h = 0; h < geo_.n_kv_heads; ++h) {
        const size_t at = (static_cast<size_t>(h) * slots_ + slot) * hd;
        in.Raw(&r.k[at], hd * sizeof(uint16_t), "ring keys");
        in.Raw(&r.v[at], hd * sizeof(uint16_t), "ring values");
      }
      r.pos[slot] = static_cast<int32_t>(t);
    }
  }
}

// ---- InterleavedCache --------------------------------------------------------------------

void InterleavedCache::SaveState(ByteWriter& out) const {
  SaveStateTag(kInterleavedTag, out);
  out.Pod<int64_t>(peak_ring_bytes_);
  rings_->SaveState(out);
  if (global_) global_->SaveState(out);
}

void InterleavedCache::LoadState(ByteReader& in) {
  LoadStateTag(kInterleavedTag, "a cache with sliding-window layers", in);
  const int64_t peak = in.Pod<int64_t>("peak ring bytes");
  rings_->LoadState(in);
  if (peak < rings_->bytes()) in.Fail("peak ring bytes below the rings' bytes");
  peak_ring_bytes_ = peak;
  if (global_) {
    global_->LoadState(in);
    if (global_->n_tokens() != rings_->tokens_seen()) {
      in.Fail("the sliding and global layers disagree on the token count");
    }
  }
}

}  // namespace qevict
