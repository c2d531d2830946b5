// QEvict as docs/qevict-spec.md writes it: every band window of a layer, fp16 and quantized
// together, is ranked on one axis by the cache's importance score (cumulative fp32 attention
// since the run began, prefill included, averaged over the layer's query heads; --kv-score picks
// decay or normalized instead). The fp16 tier is filled from the top until its share
// (1 - q_share) of the band budget is used, the quantized tier with the rest, the remainder
// evicted. A quantized window ranked into the fp16 set is promoted, an fp16 window ranked below
// it demoted. Hysteresis: an fp16 window competes with its score raised by the --kv-hysteresis
// fraction, so a quantized window must beat it by that margin to swap. The cache routes after
// each prompt and every Ω generated tokens. The query-aware variant is `qevict-qa`
// (qevict_qa_policy.cc).
#include "policy/policies.h"
#include "policy/tier_fill.h"

namespace qevict {
namespace {

class QevictPolicy : public Policy {
 public:
  bool quantizes() const override { return true; }
  explicit QevictPolicy(const KvConfig& config)
      : q_share_(config.q_share),
        prefill_q_share_(config.prefill_q_share), hysteresis_(static_cast<float>(config.hysteresis)) {}

  void Route(const RoutingContext& context, Plan* plan) override {
    FillRule rule;
    rule.use_quant = true;
    rule.allow_promote = true;
    // Between prompt chunks (bounded prefill) nothing has seen the prompt's end yet: archive.
    rule.q_share = context.trigger == BatchKind::kPromptChunk ? prefill_q_share_ : q_share_;
    const float bonus = 1.0f + hysteresis_;
    for (size_t l = 0; l < context.layers.size(); ++l) {
      RankBand(context.layers[l].windows,
               [&](const BandWindow& w) { return w.tier == Tier::kFp16 ? w.score * bonus : w.score; },
               &order_, &keys_);
      FillLayer(context, static_cast<int>(l), order_, rule, plan);
    }
  }

 private:
  double q_share_;
  double prefill_q_share_;
  float hysteresis_;
  std::vector<int> order_;
  std::vector<float> keys_;
};

}  // namespace

std::unique_ptr<Policy> MakeQevictPolicy(const KvConfig& config) {
  return std::make_unique<QevictPolicy>(config);
}

}  // namespace qevict
