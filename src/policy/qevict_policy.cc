// QEvict as docs/kv-cache.md ("Policies", `qevict`) writes it: every band window of a layer, fp16 and quantized
// together, is ranked on one axis by the cache's importance score (cumulative fp32 attention
// since the run began, prefill included, averaged over the layer's query heads; --kv-score picks
// decay or normalized instead). The fp16 tier is filled from the top until its share
// (1 - q_share) of the band budget is used, the quantized tier with the rest, the remainder
// evicted. A quantized window ranked into the fp16 set is promoted, an fp16 window ranked below
// it demoted. Hysteresis: an fp16 window competes with its score raised by the --kv-hysteresis
// fraction, so a quantized window must beat it by that margin to swap. The cache routes after
// each prompt and every Ω generated tokens. The query-aware variant is `qevict-qa`
// (qevict_qa_policy.cc), the query-agnostic one `qevict-zip` (qevict_zip_policy.cc); all three
// share the filling (qevict_fill.h).
#include "policy/policies.h"
#include "policy/qevict_fill.h"

namespace qevict {
namespace {

class QevictPolicy : public Policy {
 public:
  explicit QevictPolicy(const KvConfig& config) : fill_(config) {}
  bool quantizes() const override { return true; }

  void Route(const RoutingContext& context, Plan* plan) override {
    for (size_t l = 0; l < context.layers.size(); ++l) {
      fill_.Layer(context, static_cast<int>(l), [](const BandWindow& w) { return w.score; }, plan);
    }
  }

 private:
  QevictFill fill_;  // the tiers, ranking rule, promotion and hysteresis (qevict_fill.h)
};

const PolicyRegistration kQevictRegistration({
    .name = "qevict",
    .description =
        "QEvict (the paper): fp16 / quantized / evicted windows by cumulative attention, promotion",
    .order = 80,
    .make = [](const KvConfig& c) -> std::unique_ptr<Policy> {
      return std::make_unique<QevictPolicy>(c);
    },
});

}  // namespace

}  // namespace qevict
