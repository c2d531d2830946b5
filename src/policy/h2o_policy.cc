// H2O: the budget is split between heavy hitters and recent tokens (the paper keeps about half
// of each). On windows: the newest band windows fill h2o_recent_share (default 0.5) of the
// layer's band budget, in addition to the recent region every tiered policy keeps; the other
// windows compete for the rest by cumulative attention (the window's score, --kv-score
// cumulative by default), the lightest evicted, re-decided at every routing step while decoding
// (every Ω tokens, and whenever the next token would not fit). fp16 only.
#include <algorithm>
#include <cmath>
#include <limits>

#include "policy/policies.h"
#include "policy/tier_fill.h"

namespace qevict {
namespace {

const KvPolicyOption kH2oRecentShare({
    .key = "h2o_recent_share",
    .help = "h2o: share of the band budget kept for the newest windows (the rest: heavy hitters)",
    .policies = "h2o",
    .origin = "H2O (half heavy, half recent)",
    .min = 0,
    .max = 1,
    .eval_variant = true,
    .default_number = 0.5,
});

class H2oPolicy : public Policy {
 public:
  explicit H2oPolicy(const KvConfig& config) : recent_share_(kH2oRecentShare.Get(config)) {}

  void Route(const RoutingContext& context, Plan* plan) override {
    for (size_t l = 0; l < context.layers.size(); ++l) {
      const LayerBand& band = context.layers[l];
      const int64_t n = static_cast<int64_t>(band.windows.size());
      int64_t recent = n;
      if (band.budget_bytes != RoutingContext::kUnlimited) {
        recent = static_cast<int64_t>(std::floor(recent_share_ *
                                                 static_cast<double>(band.budget_bytes) /
                                                 static_cast<double>(context.fp_window_bytes)));
      }
      const int64_t first_recent = n - std::min(n, recent);  // band position
      const int64_t threshold = first_recent < n ? band.windows[first_recent].index
                                                 : std::numeric_limits<int64_t>::max();
      RankBand(band.windows,
               [&](const BandWindow& w) {
                 const bool is_recent = w.index >= threshold;
                 return is_recent ? std::numeric_limits<float>::infinity() : w.score;
               },
               &order_, &keys_);
      FillLayer(context, static_cast<int>(l), order_, FillRule{}, plan);
    }
  }

 private:
  double recent_share_;
  std::vector<int> order_;
  std::vector<float> keys_;
};

const PolicyRegistration kH2oRegistration({
    .name = "h2o",
    .description =
        "H2O: half the band heavy-hitter windows by cumulative attention, half the newest",
    .order = 20,
    .make = [](const KvConfig& c) -> std::unique_ptr<Policy> {
      return std::make_unique<H2oPolicy>(c);
    },
});

}  // namespace

}  // namespace qevict
