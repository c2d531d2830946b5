// H2O: heavy hitters by cumulative attention (the window's score, --kv-score cumulative by
// default) plus the recent region; greedy eviction of the lightest windows during decoding.
// fp16 only.
#include "policy/policies.h"
#include "policy/tier_fill.h"

namespace qevict {
namespace {

class H2oPolicy : public Policy {
 public:
  void Route(const RoutingContext& context, Plan* plan) override {
    for (size_t l = 0; l < context.layers.size(); ++l) {
      RankBand(context.layers[l].windows, [](const BandWindow& w) { return w.score; }, &order_,
               &keys_);
      FillLayer(context, static_cast<int>(l), order_, FillRule{}, plan);
    }
  }

 private:
  std::vector<int> order_;
  std::vector<float> keys_;
};

}  // namespace

std::unique_ptr<Policy> MakeH2oPolicy(const KvConfig&) { return std::make_unique<H2oPolicy>(); }

}  // namespace qevict
