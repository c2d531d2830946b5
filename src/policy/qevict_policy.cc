// QEvict (docs/qevict-spec.md): fp16 and quantized windows ranked together by importance; the
// fp16 tier is filled from the top until its share (1 - q_share) of the band budget is used,
// the quantized tier with the rest, the remainder evicted. A quantized window ranked into the
// fp16 set is promoted, an fp16 window ranked below it demoted. Hysteresis: an fp16 window
// competes with its score raised by the --kv-hysteresis fraction, so a quantized window must beat
// it by that margin to swap.
//
// Importance (our choice, --kv-query-aware, default on; docs/kv-cache.md): at the end of every
// prompt (the first one and each later user turn) the attention of the prompt's last queries —
// the question — is max-pooled over --kv-query-kernel tokens (31: wider than SnapKV's 7, so the
// windows holding the rest of a needle sentence rank with the words the question matches) and
// summed per window as SnapKV does, over every resident window, quantized ones included; between prompts the attention mass each window receives from generated tokens is
// added to it. So a question that asks about an archived window ranks it back into fp16. With
// --kv-query-aware false the importance is the cache's score (cumulative, decayed or normalized
// attention since the run began), as in the paper.
#include <algorithm>

#include "policy/observation_scores.h"
#include "policy/policies.h"
#include "policy/tier_fill.h"

namespace qevict {
namespace {

class QevictPolicy : public Policy {
 public:
  explicit QevictPolicy(const KvConfig& config)
      : q_share_(config.q_share),
        hysteresis_(static_cast<float>(config.hysteresis)),
        query_aware_(config.query_aware),
        kernel_(config.query_kernel) {}

  bool wants_observation() const override { return query_aware_; }

  void BeginRun() override {
    observed_.clear();
    base_.clear();
  }

  void Route(const RoutingContext& context, Plan* plan) override {
    FillRule rule;
    rule.use_quant = true;
    rule.allow_promote = true;
    rule.q_share = q_share_;
    const float bonus = 1.0f + hysteresis_;
    const size_t n_layers = context.layers.size();
    if (query_aware_ && observed_.size() != n_layers) {
      observed_.assign(n_layers, {});
      base_.assign(n_layers, {});
    }
    for (size_t l = 0; l < n_layers; ++l) {
      const LayerBand& band = context.layers[l];
      if (query_aware_) {
        if (context.trigger != BatchKind::kGenerated && !band.observation.empty()) {
          Observe(band, l);
        }
        std::vector<float>& observed = observed_[l];
        std::vector<float>& base = base_[l];
        // A window the last prompt's snapshot did not see (it was in the recent region then,
        // or came later) keeps all the mass it received: ranking it from zero would demote every
        // window the moment it leaves the recent region, whatever the model attends.
        for (const BandWindow& w : band.windows) {
          const size_t i = static_cast<size_t>(w.index);
          if (i >= base.size()) {
            base.resize(i + 1, 0.0f);
            observed.resize(i + 1, 0.0f);
          }
        }
        RankBand(band.windows,
                 [&](const BandWindow& w) {
                   const float key = observed[w.index] + (w.score - base[w.index]);
                   return w.tier == Tier::kFp16 ? key * bonus : key;
                 },
                 &order_, &keys_);
      } else {
        RankBand(band.windows,
                 [&](const BandWindow& w) { return w.tier == Tier::kFp16 ? w.score * bonus : w.score; },
                 &order_, &keys_);
      }
      FillLayer(context, static_cast<int>(l), order_, rule, plan);
    }
  }

 private:
  // A prompt just ended: its question's pooled attention becomes each window's observed
  // importance, and the decode mass counts again from zero.
  void Observe(const LayerBand& band, size_t l) {
    int64_t limit = 0;
    PooledObservationScores(band, kernel_, &observed_[l], &limit, &pooled_);
    std::vector<float>& base = base_[l];
    base.assign(static_cast<size_t>(limit), 0.0f);
    for (const BandWindow& w : band.windows) base[w.index] = w.score;
  }

  double q_share_;
  float hysteresis_;
  bool query_aware_;
  int kernel_;
  std::vector<std::vector<float>> observed_;  // [layer][window index]
  std::vector<std::vector<float>> base_;      // [layer][window index]: score at the last prompt end
  std::vector<float> pooled_;
  std::vector<int> order_;
  std::vector<float> keys_;
};

}  // namespace

std::unique_ptr<Policy> MakeQevictPolicy(const KvConfig& config) {
  return std::make_unique<QevictPolicy>(config);
}

}  // namespace qevict
