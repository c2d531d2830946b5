#include "policy/tier_fill.h"

#include <cmath>

#include "util/error.h"

namespace qevict {

int64_t FillByRank(std::span<const int> order, std::span<const BandWindow> band,
                   const FillRule& rule, int64_t budget, int64_t fp_cost, int64_t q_cost,
                   std::span<Tier> targets) {
  QEVICT_CHECK(order.size() == band.size() && targets.size() == band.size());
  QEVICT_CHECK(rule.use_fp || rule.use_quant);
  const bool unlimited = budget == RoutingContext::kUnlimited;
  auto may_be_fp = [&](int j) {
    return rule.use_fp && (band[j].tier == Tier::kFp16 || rule.allow_promote);
  };
  // 1. The fp16 tier from the top, within its share.
  int64_t fp_share = 0;
  if (rule.use_fp) {
    fp_share = unlimited || !rule.use_quant
                   ? budget
                   : static_cast<int64_t>(std::floor(static_cast<double>(budget) *
                                                     (1.0 - rule.q_share)));
  }
  int64_t fp_used = 0;
  for (int j : order) {
    if (may_be_fp(j) && (unlimited || fp_used + fp_cost <= fp_share)) {
      targets[j] = Tier::kFp16;
      fp_used += fp_cost;
    } else {
      targets[j] = Tier::kEvicted;  // decided below
    }
  }
  // 2. The quantized tier with the rest of the budget; then eviction (or overflow).
  int64_t q_used = 0;
  for (int j : order) {
    if (targets[j] == Tier::kFp16) continue;
    const bool fits = unlimited || fp_used + q_used + q_cost <= budget;
    if (rule.use_quant && (fits || !rule.allow_evict)) {
      targets[j] = Tier::kQuant;
      q_used += q_cost;
    } else if (!rule.allow_evict) {
      targets[j] = Tier::kFp16;  // fp16-only policy that may not evict: keep it
      fp_used += fp_cost;
    }
  }
  // 3. Spare bytes upgrade the best quantized windows.
  if (!unlimited && rule.use_fp) {
    int64_t spare = budget - fp_used - q_used;
    for (int j : order) {
      if (spare < fp_cost - q_cost) break;
      if (targets[j] != Tier::kQuant || !may_be_fp(j)) continue;
      targets[j] = Tier::kFp16;
      spare -= fp_cost - q_cost;
      fp_used += fp_cost;
      q_used -= q_cost;
    }
  }
  return fp_used + q_used;
}

int64_t FillLayer(const RoutingContext& context, int layer, std::span<const int> order,
                  const FillRule& rule, Plan* plan) {
  const LayerBand& band = context.layers[layer];
  return FillByRank(order, band.windows, rule, band.budget_bytes, context.fp_window_bytes,
                    context.q_window_bytes, plan->targets[layer]);
}

}  // namespace qevict
