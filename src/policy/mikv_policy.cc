// MiKV: H2O importance decides precision: the top windows stay fp16 (within 1 - q_share of the
// band budget), the rest are quantized, and only what the quantized tier cannot hold is evicted
// (lowest first). A quantized window is never promoted back.
#include "policy/policies.h"
#include "policy/tier_fill.h"

namespace qevict {
namespace {

class MikvPolicy : public Policy {
 public:
  bool quantizes() const override { return true; }
  explicit MikvPolicy(const KvConfig& config) : q_share_(config.q_share) {}

  void Route(const RoutingContext& context, Plan* plan) override {
    FillRule rule;
    rule.use_quant = true;
    rule.allow_promote = false;
    rule.q_share = q_share_;
    for (size_t l = 0; l < context.layers.size(); ++l) {
      RankBand(context.layers[l].windows, [](const BandWindow& w) { return w.score; }, &order_,
               &keys_);
      FillLayer(context, static_cast<int>(l), order_, rule, plan);
    }
  }

 private:
  double q_share_;
  std::vector<int> order_;
  std::vector<float> keys_;
};

const PolicyRegistration kMikvRegistration({
    .name = "mikv",
    .description =
        "MiKV: important windows fp16, the rest quantized, evict only when needed; no promotion",
    .order = 70,
    .make = [](const KvConfig& c) -> std::unique_ptr<Policy> {
      return std::make_unique<MikvPolicy>(c);
    },
});

}  // namespace

}  // namespace qevict
