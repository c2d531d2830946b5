// "A policy decides, the cache applies." At every routing step the tiered cache describes the
// evictable band of each layer (windows, tiers, scores, byte budget) in a RoutingContext; a
// Policy reads it and writes a Plan (a target tier per band window); only the cache mutates its
// storage when it applies the plan. Policies therefore run on synthetic contexts in unit tests.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/kv_config.h"

namespace qevict {

enum class Tier : uint8_t {
  kFp16 = 0,     // keys (after RoPE) and values in fp16
  kQuant = 1,    // b-bit codes + fp16 scales/zeros, dequantized inside attention
  kEvicted = 2,  // nothing stored; never comes back
  // On disk (cold tier, a policy that keeps_cold()): the exact fp16 window in the cache's cold
  // file and a digest in RAM; not attended; recalled into fp16 when a question ranks it back.
  // A window record never holds it: cold windows are listed apart (LayerWindows::cold), and a
  // plan's kEvicted for a band window means "to the cold tier" when the cache keeps one.
  kCold = 3,
};
const char* TierName(Tier tier);

// One resident window of a layer's evictable band, as a policy sees it.
struct BandWindow {
  int64_t index = 0;      // window number within the layer (0 = first window after the sinks)
  int32_t first_pos = 0;  // position of its first token
  Tier tier = Tier::kFp16;
  float score = 0.0f;      // importance per KvConfig::score, over every query so far
  float last_mass = 0.0f;  // attention mass from the latest query, averaged over heads
};

// One cold window of a layer (cold tier), as a policy sees it at a routing step.
struct ColdWindow {
  int64_t index = 0;      // window number within the layer
  int32_t first_pos = 0;  // position of its first token
  // A recall candidate: the digest ranked it among the layer's best cold windows for the
  // latest prompt queries, the cache read it back, and `score` is its exact attention share
  // (on the scale of LayerBand::recall). Windows that are not candidates cannot be recalled at
  // this step (score 0).
  bool candidate = false;
  float score = 0.0f;
};

struct LayerBand {
  std::span<const BandWindow> windows;  // in position order (oldest first)
  // Policies that ask for it (Policy::wants_observation) get, right after a prompt batch, the
  // attention of the last snapkv_window prompt queries (softmax, summed over those queries) on
  // every resident token of the layer, one row per KV head ([observation_heads][tokens], each
  // row the mean over that KV head's query heads): sinks first, then each resident window's
  // tokens in order. Resident window j's tokens start at observation_offsets[j]: band windows
  // first, then the recent ones (indices first_recent_index, +1, ...).
  std::span<const float> observation;
  std::span<const int64_t> observation_offsets;
  int observation_heads = 1;
  // Window scores computed outside the attention pass and handed to the cache before this
  // routing step (TieredCache::SetExternalScores: reconstruction scoring, engine/reconstruction.h;
  // or by the cache itself at a prompt end for key-norm and expected-attention sources,
  // kv/window_priors.h), indexed by window index (entries of windows they do not cover, or of
  // evicted ones, are 0). Empty when none was given since the last routing step that consumed them.
  std::span<const float> external;
  // Cold tier (a policy that keeps_cold(), after a prompt batch): the exact attention share of
  // the latest prompt queries on every resident window and every recall candidate, as if the
  // candidates were resident too (kv/recall_source.h), by window index (0 for the rest; empty
  // when there is no such step). The layer's cold windows, oldest first, are in `cold`.
  std::span<const float> recall;
  std::span<const ColdWindow> cold;
  // The windows every layer's recall shares (kv/recall_source.h: the best by the layers' mean
  // normalized recall score), by window index, best first; a policy that keeps them in fp16 in
  // every layer recalls them where they are cold. Empty when there is no such step.
  std::span<const int64_t> shared;
  // The recent windows (indices first_recent_index, +1, ...): never routed, shown so that a
  // policy can read their scores (e.g. to snapshot them at a prompt end).
  std::span<const BandWindow> recent;
  // Index of the first window after the band (the oldest recent window, or the next window to
  // be created). Recent windows are first_recent_index, +1, ... and their tokens follow the
  // band's in `observation`.
  int64_t first_recent_index = 0;
  // Bytes this layer's band may hold (windows and their metadata); kUnlimited when there is no
  // budget. A layer never gives bytes to another one.
  int64_t budget_bytes = 0;
};

struct RoutingContext {
  static constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

  const KvConfig* config = nullptr;
  std::span<const LayerBand> layers;
  int64_t fp_window_bytes = 0;  // one window in the fp16 tier, metadata included
  int64_t q_window_bytes = 0;   // one window in the quantized tier, metadata included
  // One window in the cold tier (its record, digest share and liveness bit), already paid for every band
  // and cold window before the budget is shared out: a plan's tiers cost what they did without
  // a cold tier.
  int64_t cold_window_bytes = 0;
  BatchKind trigger = BatchKind::kPromptEnd;  // the batch that ended before this step
  bool first_routing = false;                 // the first routing step of the run
  int64_t routing_step = 0;                   // 0, 1, 2, ... within the run
};

struct Plan {
  std::vector<std::vector<Tier>> targets;  // [layer][band window] target tier
  // [layer] positions in LayerBand::cold of cold windows to bring back into fp16 (cold tier
  // only; recall candidates or shared windows; each costs fp_window_bytes of the layer's band
  // budget).
  std::vector<std::vector<int>> recall;
  bool infeasible = false;  // the policy cannot meet the budget (the cache then may exceed it)
  std::string note;         // why, for KvStats::note

  // Sizes targets like the context and fills them with the windows' current tiers.
  void ResetTo(const RoutingContext& context);
};

class Policy {
 public:
  virtual ~Policy() = default;

  virtual void BeginRun() {}
  // Whether the cache must accumulate attention mass per window (score, last_mass).
  virtual bool wants_scores() const { return true; }
  // Whether the cache must provide LayerBand::observation after prompt batches.
  virtual bool wants_observation() const { return false; }
  // Whether the policy routes on external window scores (LayerBand::external) at a prompt end;
  // with KvConfig::score_source key-norm or expected-attention the cache computes them itself.
  virtual bool wants_external_scores() const { return false; }
  // Whether the policy ever puts a window in the quantized tier (sizes what the cache may map).
  virtual bool quantizes() const { return false; }
  // Whether windows the policy evicts go to a cold tier on disk (exact, with a digest in RAM)
  // from which it recalls them (LayerBand::cold, Plan::recall) rather than being dropped.
  virtual bool keeps_cold() const { return false; }
  // Whether the policy ever evicts a window. One that never does (kivi) keeps every band window
  // at least quantized whatever the budget, which sizes the most its cache can hold
  // (TieredCache::WorstReservedBytes).
  virtual bool evicts() const { return true; }
  // Relative share of the total band budget for each layer (default: equal shares).
  virtual void LayerBudgetWeights(int n_layers, std::vector<double>* weights) const {
    weights->assign(n_layers, 1.0);
  }
  // Writes the target tier of every band window into plan (already reset to current tiers).
  // The cache refuses kEvicted -> anything and checks the result against the budgets unless the
  // plan is marked infeasible.
  virtual void Route(const RoutingContext& context, Plan* plan) = 0;

  // What the policy remembers between routing steps of a run (beyond its options), saved with
  // the cache (KvCache::SaveState). A policy that keeps run state must override both; LoadState
  // follows BeginRun, is told the cache's layer count, and throws qevict::Error (through the
  // reader) on malformed state.
  virtual void SaveState(ByteWriter& out) const {}
  virtual void LoadState(ByteReader& in, int n_layers) {}
};

}  // namespace qevict
