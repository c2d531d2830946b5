// qevict-qa: QEvict (qevict_policy.cc: one merged fp16 + quantized ranking, promotion,
// hysteresis, the same filling rule) with a query-aware importance, our named variant (not in
// the paper). At the end of every prompt (the first one and each later user turn) the attention
// of the prompt's last snapkv_window queries (the question) is max-pooled over query_kernel
// tokens and summed per window as SnapKV does (observation_scores.h; heads averaged), over every
// resident window, quantized and recent ones included. That observation replaces the window's
// history: its key is
//     observed (at the last prompt end) + (score now - score at the last prompt end),
// i.e. the question's attention plus the decode mass the window received since. The snapshot of
// the score is taken for every window the observation covers, band and recent alike, so no
// window carries its prefill mass into the key. Windows created after that prompt end were not
// observed; their key is all the mass they have received (all of it decode mass). A question
// about an archived (quantized) window therefore ranks it back into fp16.
#include <algorithm>

#include "policy/observation_scores.h"
#include "policy/policies.h"
#include "policy/snapshot_keys.h"
#include "policy/tier_fill.h"

namespace qevict {
namespace {

class QevictQaPolicy : public Policy {
 public:
  bool quantizes() const override { return true; }
  explicit QevictQaPolicy(const KvConfig& config)
      : q_share_(config.q_share),
        prefill_q_share_(config.prefill_q_share),
        hysteresis_(static_cast<float>(config.hysteresis)),
        kernel_(config.query_kernel) {}

  bool wants_observation() const override { return true; }

  void BeginRun() override { keys_by_window_.Clear(); }

  void Route(const RoutingContext& context, Plan* plan) override {
    FillRule rule;
    rule.use_quant = true;
    rule.allow_promote = true;
    // Between prompt chunks (bounded prefill) nothing has seen the prompt's end yet: archive.
    rule.q_share = context.trigger == BatchKind::kPromptChunk ? prefill_q_share_ : q_share_;
    const float bonus = 1.0f + hysteresis_;
    const size_t n_layers = context.layers.size();
    keys_by_window_.Reserve(n_layers);
    for (size_t l = 0; l < n_layers; ++l) {
      const LayerBand& band = context.layers[l];
      if (context.trigger != BatchKind::kGenerated && !band.observation.empty()) Observe(band, l);
      keys_by_window_.Grow(band, l);  // windows newer than the last observation
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
  // A prompt just ended: the question's pooled attention becomes each observed window's
  // importance, and its decode mass counts from zero (base = its score now, band and recent).
  void Observe(const LayerBand& band, size_t l) {
    int64_t limit = 0;
    PooledObservationScores(band, kernel_, HeadReduce::kMean, &observed_, &limit, &pooled_);
    keys_by_window_.Take(band, l, observed_.data(), limit);
  }

  double q_share_;
  double prefill_q_share_;
  float hysteresis_;
  int kernel_;
  SnapshotKeys keys_by_window_;  // observation at the last prompt end + mass since
  std::vector<float> observed_;
  std::vector<float> pooled_;
  std::vector<int> order_;
  std::vector<float> keys_;
};

}  // namespace

std::unique_ptr<Policy> MakeQevictQaPolicy(const KvConfig& config) {
  return std::make_unique<QevictQaPolicy>(config);
}

}  // namespace qevict
