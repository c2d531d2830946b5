// qevict-zip: QEvict (qevict_policy.cc: one merged fp16 + quantized ranking, promotion,
// hysteresis, the same filling rule) whose first routing step is query-agnostic, our named
// variant (not in the paper). At the end of the run's first prompt (the context, in the
// context-only protocol) the windows are ranked by an external score (LayerBand::external):
// by default KVzip's reconstruction score (the max attention a window receives while the model
// repeats the context, engine/reconstruction.h), or with --kv-score-source the expected
// attention or key-norm score the cache computes itself (kv/window_priors.h). Afterwards the
// key is that score plus the attention mass the window received since (snapshot_keys.h), so
// cumulative attention takes over: a later question that attends an archived window ranks it
// back into fp16. Between prompt chunks (bounded prefill), before any external score exists,
// the key is the window's score, as in qevict.
#include "policy/policies.h"
#include "policy/snapshot_keys.h"
#include "policy/tier_fill.h"

namespace qevict {
namespace {

class QevictZipPolicy : public Policy {
 public:
  explicit QevictZipPolicy(const KvConfig& config)
      : q_share_(config.q_share),
        prefill_q_share_(config.prefill_q_share),
        hysteresis_(static_cast<float>(config.hysteresis)),
        expected_(config.score_source == ScoreSource::kExpectedAttention) {}

  bool quantizes() const override { return true; }
  bool wants_external_scores() const override { return true; }
  // Expected attention reads the last prompt queries.
  bool wants_observation() const override { return expected_; }

  void BeginRun() override { keys_by_window_.Clear(); }

  void Route(const RoutingContext& context, Plan* plan) override {
    FillRule rule;
    rule.use_quant = true;
    rule.allow_promote = true;
    rule.q_share = context.trigger == BatchKind::kPromptChunk ? prefill_q_share_ : q_share_;
    const float bonus = 1.0f + hysteresis_;
    const size_t n_layers = context.layers.size();
    keys_by_window_.Reserve(n_layers);
    for (size_t l = 0; l < n_layers; ++l) {
      const LayerBand& band = context.layers[l];
      if (!band.external.empty()) {
        keys_by_window_.Take(band, l, band.external.data(),
                             static_cast<int64_t>(band.external.size()));
      }
      keys_by_window_.Grow(band, l);
      RankBand(band.windows,
               [&](const BandWindow& w) {
                 const float key = keys_by_window_.Key(l, w);
                 return w.tier == Tier::kFp16 ? key * bonus : key;
               },
               &order_, &keys_);
      FillLayer(context, static_cast<int>(l), order_, rule, plan);
    }
  }

 private:
  double q_share_;
  double prefill_q_share_;
  float hysteresis_;
  bool expected_;
  SnapshotKeys keys_by_window_;  // external score at the first prompt end + mass since
  std::vector<int> order_;
  std::vector<float> keys_;
};

}  // namespace

std::unique_ptr<Policy> MakeQevictZipPolicy(const KvConfig& config) {
  return std::make_unique<QevictZipPolicy>(config);
}

}  // namespace qevict
