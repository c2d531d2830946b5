// KIVI: every token but the recent region at b bits (keys per channel, values per token), nothing
// evicted. Its cache is built with windows of kivi_group = 32 tokens (its PolicyInfo::layout,
// applied by PolicyLayout in registry.h), so keys are grouped per channel over 32 tokens as in the paper, and the recent
// region (the windows holding the last R = 32 tokens, plus the one being filled) is KIVI's fp16
// residual. Sinks stay fp16 like in every tiered policy (5 tokens by default). When the quantized
// band cannot fit a layer's budget the plan is marked infeasible and the cache reports it rather
// than evicting or exceeding the budget silently.
#include <algorithm>
#include <string>

#include "policy/policies.h"
#include "policy/tier_fill.h"

namespace qevict {
namespace {

const KvPolicyOption kKiviGroup({
    .key = "kivi_group",
    .type = KvOptionType::kInt,
    .help = "kivi: tokens per key group (kivi's window; other policies use --kv-window)",
    .policies = "kivi",
    .doc = "kivi's key group = its window (other policies: `--kv-window`)",
    .origin = "KIVI",
    .min = 1,
    .max = 1024,
    .default_number = 32,
});

class KiviPolicy : public Policy {
 public:
  bool quantizes() const override { return true; }
  bool evicts() const override { return false; }
  explicit KiviPolicy(const KvConfig& config) : bits_(config.bits) {}

  bool wants_scores() const override { return false; }

  void Route(const RoutingContext& context, Plan* plan) override {
    FillRule rule;
    rule.use_fp = false;
    rule.use_quant = true;
    rule.allow_evict = false;
    for (size_t l = 0; l < context.layers.size(); ++l) {
      const auto& band = context.layers[l].windows;
      order_.resize(band.size());
      for (size_t j = 0; j < band.size(); ++j) order_[j] = static_cast<int>(j);
      const int64_t bytes = FillLayer(context, static_cast<int>(l), order_, rule, plan);
      const int64_t budget = context.layers[l].budget_bytes;
      if (bytes > budget && !plan->infeasible) {
        plan->infeasible = true;
        plan->note = "kivi at " + std::to_string(bits_) + " bits needs " +
                     std::to_string(bytes) + " bytes for layer " + std::to_string(l) +
                     "'s quantized band but its share of the budget is " +
                     std::to_string(std::max<int64_t>(budget, 0)) +
                     " bytes; kivi never evicts (raise --kv-budget or lower --kv-bits)";
      }
    }
  }

 private:
  int bits_;
  std::vector<int> order_;
};

const PolicyRegistration kKiviRegistration({
    .name = "kivi",
    .description =
        "KIVI: all but the recent tokens at b bits, nothing evicted (may be infeasible)",
    .order = 60,
    .make = [](const KvConfig& c) -> std::unique_ptr<Policy> {
      return std::make_unique<KiviPolicy>(c);
    },
    .layout = [](KvConfig& c) { c.window = kKiviGroup.GetInt(c); },
});

}  // namespace

}  // namespace qevict
