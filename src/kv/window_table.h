// The window table of the tiered cache (docs/kv-cache.md, "Windows"): per layer, the sink block
// and one record per resident window -- its tier, the block that holds its bytes, its cold copy,
// its index (hence its tokens and positions) and its scores -- plus the position of every stored
// token. It knows the layout (sinks, W-token windows, the recent region, the evictable band) and
// keeps its invariants; it owns no bytes (kv/window_store.h) and decides nothing (policies).
//
// Invariants (CheckInvariants): the records of a layer are in increasing index order; a window
// that holds any of the last R tokens (the recent region, never routed) is fp16; the resident
// records, the cold records (kept apart, no index twice) and the evicted count make every
// window created so far; positions strictly increase;
// no layer has stored more tokens than the one before it (a batch goes through layer 0 first;
// between batches all are equal).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_config.h"
#include "kv/routing.h"
#include "kv/window_digest.h"

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

// Metadata of one resident window, charged to the budget (kv/byte_ledger.h).
struct WindowRecord {
  uint32_t block;      // handle in the pool of its tier
  int32_t cold_slot;   // exact recovery: slot of its fp16 original, -1 if none
  int32_t index;       // window number within the layer
  Tier tier;
  float mass_sum;      // importance accumulator (cumulative or decayed sum)
  float observers;     // queries that could attend it (for ScoreMode::kNormalized)
  float last_mass;     // mass from the latest query
};
static_assert(sizeof(WindowRecord) == 28, "metadata charged per resident window");

// A window of the cold tier: its fp16 block on disk (kv/disk_cold_store.h) by slot. Its digest
// is LayerWindows::digests[k * digest_bytes] for cold[k], or with digest groups (G > 1) its
// group's, group_digests[(index / G) * digest_bytes]. Charged to the budget with the digest.
struct ColdRecord {
  int32_t index;  // window number within the layer
  int32_t slot;   // disk cold store slot
};
static_assert(sizeof(ColdRecord) == 8, "metadata charged per cold window");

struct LayerWindows {
  int64_t count = 0;  // tokens stored in this run
  uint32_t sink_block = BlockPool::kNoBlock;
  std::vector<WindowRecord> windows;  // resident windows, oldest first
  std::vector<ColdRecord> cold;       // cold windows, oldest first
  std::vector<uint8_t> digests;       // their digests, in the same order (G = 1)
  // Digest groups (G > 1): one digest per group of G consecutive window indices, by group, and
  // which of the group's windows it was built from (bit i - G * group). A group's digest exists
  // before any of its windows is cold, and covers every cold one.
  std::vector<uint8_t> group_digests;
  std::vector<uint64_t> group_covered;
  // Context digests (DigestNeedsContext): the layer's context, fitted once at its first window
  // that goes cold, from the fp16 band windows resident then (charged once per layer).
  DigestContext digest_context;
  bool has_digest_context = false;
  int64_t evicted = 0;                // dropped for good
};

class WindowTable {
 public:
  // max_tokens: tokens a run may store (sizes the positions and the records once).
  WindowTable(const KvConfig& config, int n_layers, int64_t max_tokens);

  int window() const { return window_; }
  int sinks() const { return sinks_; }
  int recent() const { return recent_; }
  int64_t max_windows() const { return max_windows_; }  // per layer and run
  int n_layers() const { return static_cast<int>(layers_.size()); }

  LayerWindows& layer(int l) { return layers_[l]; }
  const LayerWindows& layer(int l) const { return layers_[l]; }
  std::vector<LayerWindows>& layers() { return layers_; }
  const std::vector<LayerWindows>& layers() const { return layers_; }

  // Empties every layer (the records keep their reserve).
  void Reset();

  // Positions of stored tokens (all layers agree): layer 0 appends, the others check.
  void RecordPosition(int layer, int64_t token, int32_t pos);
  int32_t position(int64_t token) const { return pos_[token]; }
  const int32_t* positions() const { return pos_.data(); }
  int32_t* mutable_positions() { return pos_.data(); }
  int64_t stored_tokens() const { return layers_.front().count; }

  // Layout.
  int64_t FirstToken(int64_t window_index) const { return sinks_ + window_index * window_; }
  int SinkTokens(const LayerWindows& l) const;
  int WindowTokens(const LayerWindows& l, const WindowRecord& w) const;
  int64_t ResidentTokens(const LayerWindows& l) const;
  // Resident keys among the first `logical` stored tokens (a prefix of the resident order).
  int64_t ResidentPrefix(const LayerWindows& l, int64_t logical) const;
  // Resident keys a query at `pos` sees (causal).
  int64_t VisibleTo(const LayerWindows& l, int32_t pos) const;
  // Windows fully out of the recent region: the evictable band is windows[0, BandSize).
  size_t BandSize(const LayerWindows& l) const;
  // Windows created so far in the layer (resident or evicted).
  int64_t CreatedWindows(const LayerWindows& l) const;
  // First window index of the recent region for a layer of `count` tokens.
  int64_t FirstRecentIndex(int64_t count) const;
  // Resident window records of every layer (what the ledger charges metadata for).
  int64_t ResidentRecords() const;

  // Importance of a window as policies see it (ScoreMode).
  float ScoreOf(const WindowRecord& w) const;
  // Adds a batch's attention mass to the layer's window scores: mass[1 + k] and last[1 + k] for
  // resident window k (kv/window_mass.h), visible[i] the keys query i saw (normalized scores).
  void AddMass(LayerWindows& l, const float* mass, const float* last, int n,
               const int64_t* visible);

  // Drops the records a routing step evicted.
  void EraseEvicted();

  // Cold tier: bytes of one cold window's digest (0: the cache keeps no cold tier).
  void set_digest_bytes(int64_t bytes) { digest_bytes_ = bytes; }
  int64_t digest_bytes() const { return digest_bytes_; }
  const uint8_t* Digest(const LayerWindows& l, size_t k) const {
    if (digest_group_ > 1) return l.group_digests.data() + (l.cold[k].index / digest_group_) * digest_bytes_;
    return l.digests.data() + static_cast<int64_t>(k) * digest_bytes_;
  }
  // Digest groups: G windows (consecutive indices) share one digest (1: a digest per window).
  void set_digest_group(int g) { digest_group_ = g; }
  int digest_group() const { return digest_group_; }
  // Whether window `index`'s group digest was built with it (G > 1).
  bool GroupCovers(const LayerWindows& l, int64_t index) const {
    const int64_t g = index / digest_group_;
    return g < static_cast<int64_t>(l.group_covered.size()) &&
           ((l.group_covered[g] >> (index - g * digest_group_)) & 1) != 0;
  }
  // The group's digest bytes to (re)build, the groups up to it allocated; `covered` its windows.
  uint8_t* GroupDigestForWrite(LayerWindows& l, int64_t group, uint64_t covered);
  // RAM the layer's group digests hold (G > 1; 0 otherwise).
  static int64_t GroupDigestRam(const LayerWindows& l) {
    return static_cast<int64_t>(l.group_digests.size() + l.group_covered.size() * 8);
  }
  // Adds a cold window in index order: with its digest_bytes digest (G = 1), or (G > 1, digest
  // nullptr) a window its group's digest covers.
  void AddCold(LayerWindows& l, ColdRecord record, const uint8_t* digest);
  // Removes cold window k (and its digest) and returns it.
  ColdRecord TakeCold(LayerWindows& l, size_t k);
  // Inserts a resident record in index order (a recalled window).
  void InsertResident(LayerWindows& l, const WindowRecord& record);
  // Cold windows of every layer.
  int64_t ColdRecords() const;

  WindowView View(int layer) const;

  // Throws std::logic_error naming the broken invariant (tests; debug checks).
  void CheckInvariants() const;

 private:
  const int window_, sinks_, recent_;
  const ScoreMode score_;
  const double score_decay_;
  const int64_t max_windows_;
  int digest_group_ = 1;
  int64_t digest_bytes_ = 0;
  std::vector<LayerWindows> layers_;
  std::vector<int32_t> pos_;  // [max_tokens]
};

}  // namespace qevict
