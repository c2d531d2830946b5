// StreamingLLM: the sinks and the most recent tokens fill the budget. On windows: keep the
// newest band windows in fp16 while they fit, evict the oldest.
#include "policy/policies.h"
#include "policy/tier_fill.h"

namespace qevict {
namespace {

class StreamingPolicy : public Policy {
 public:
  bool wants_scores() const override { return false; }

  void Route(const RoutingContext& context, Plan* plan) override {
    for (size_t l = 0; l < context.layers.size(); ++l) {
      const auto& band = context.layers[l].windows;
      order_.resize(band.size());
      for (size_t j = 0; j < band.size(); ++j) order_[j] = static_cast<int>(band.size() - 1 - j);
      FillLayer(context, static_cast<int>(l), order_, FillRule{}, plan);
    }
  }

 private:
  std::vector<int> order_;
};

const PolicyRegistration kStreamingRegistration({
    .name = "streaming",
    .description = "StreamingLLM: sinks + the most recent windows, oldest evicted",
    .order = 10,
    .make = [](const KvConfig&) -> std::unique_ptr<Policy> {
      return std::make_unique<StreamingPolicy>();
    },
});

}  // namespace

}  // namespace qevict
