// What most policies share: rank a layer's band windows, then fill the tiers from the top within
// the layer's byte budget (docs/kv-cache.md, "Routing: the policy decides, the cache applies"): the
// fp16 tier until its share is used, then the quantized tier with what is left, the rest evicted.
// Bytes the quantized tier cannot use (because every remaining window already fits) upgrade its
// best windows back to fp16, so no byte stays idle while a window sits in a lower tier than it
// could (our choice; with evictions the rule is exactly the spec's).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/routing.h"

namespace qevict {

struct FillRule {
  bool use_fp = true;          // the fp16 tier may hold band windows
  bool use_quant = false;      // the quantized tier may hold band windows
  bool allow_promote = false;  // a quantized window may move to fp16
  bool allow_evict = true;     // false: windows that do not fit stay (quantized) over budget
  double q_share = 0.0;        // share of the band budget for the quantized tier (use_quant)
};

// order: band indices, best first (every index once). Writes targets[j] for every j and returns
// the bytes the band will hold. fp_cost / q_cost: one window in each tier, metadata included.
int64_t FillByRank(std::span<const int> order, std::span<const BandWindow> band,
                   const FillRule& rule, int64_t budget, int64_t fp_cost, int64_t q_cost,
                   std::span<Tier> targets);

// Band indices sorted by key(window) descending; ties favour the newer window.
template <class KeyFn>
void RankBand(std::span<const BandWindow> band, KeyFn&& key, std::vector<int>* order,
              std::vector<float>* keys);

// The plan of one layer from a ranking (fills plan->targets[layer]).
int64_t FillLayer(const RoutingContext& context, int layer, std::span<const int> order,
                  const FillRule& rule, Plan* plan);

}  // namespace qevict

#include "policy/tier_fill_inl.h"
