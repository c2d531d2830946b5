// TOVA: drop what the current query attends least. On windows: rank by the attention mass of the
// latest query (averaged over heads) and evict the lowest windows whenever the budget requires
// it (the cache routes as soon as the next token would not fit). fp16 only.
#include "policy/policies.h"
#include "policy/tier_fill.h"

namespace qevict {
namespace {

class TovaPolicy : public Policy {
 public:
  void Route(const RoutingContext& context, Plan* plan) override {
    for (size_t l = 0; l < context.layers.size(); ++l) {
      RankBand(context.layers[l].windows, [](const BandWindow& w) { return w.last_mass; },
               &order_, &keys_);
      FillLayer(context, static_cast<int>(l), order_, FillRule{}, plan);
    }
  }

 private:
  std::vector<int> order_;
  std::vector<float> keys_;
};

const PolicyRegistration kTovaRegistration({
    .name = "tova",
    .description = "TOVA: evicts the windows the latest query attends least",
    .order = 30,
    .make = [](const KvConfig&) -> std::unique_ptr<Policy> {
      return std::make_unique<TovaPolicy>();
    },
});

}  // namespace

}  // namespace qevict
