// The tiers of qevict and its named variants (qevict-qa, qevict-zip): every band window of a
// layer, fp16 and quantized together, on one axis by a key; the fp16 tier filled from the top
// until its share (1 - q_share) of the band budget is used, the quantized tier with the rest,
// the remainder evicted; quantized windows ranked into the fp16 set promoted. Hysteresis: an
// fp16 window competes with its key raised by the --kv-hysteresis fraction. Between prompt
// chunks (bounded prefill) the quantized share is prefill_q_share: nothing has seen the
// prompt's end yet, so the band is archived rather than evicted.
#pragma once

#include <vector>

#include "kv/kv_config.h"
#include "kv/routing.h"
#include "policy/tier_fill.h"

namespace qevict {

class QevictFill {
 public:
  explicit QevictFill(const KvConfig& config)
      : q_share_(config.q_share),
        prefill_q_share_(config.prefill_q_share),
        hysteresis_(static_cast<float>(config.hysteresis)) {}

  // Ranks layer l's band by key(window) and writes its plan.
  template <class KeyFn>
  void Layer(const RoutingContext& context, int l, KeyFn&& key, Plan* plan) {
    FillRule rule;
    rule.use_quant = true;
    rule.allow_promote = true;
    rule.q_share = context.trigger == BatchKind::kPromptChunk ? prefill_q_share_ : q_share_;
    const float bonus = 1.0f + hysteresis_;
    RankBand(context.layers[l].windows,
             [&](const BandWindow& w) {
               const float k = key(w);
               return w.tier == Tier::kFp16 ? k * bonus : k;
             },
             &order_, &keys_);
    FillLayer(context, l, order_, rule, plan);
  }

 private:
  double q_share_;
  double prefill_q_share_;
  float hysteresis_;
  std::vector<int> order_;
  std::vector<float> keys_;
};

}  // namespace qevict
