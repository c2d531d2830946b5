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
#include "policy/observation_scores.h"
#include "policy/policies.h"
#include "policy/snapshot_keys.h"

namespace qevict {
namespace {

const KvPolicyOption kQueryKernel({
    .key = "query_kernel",
    .type = KvOptionType::kInt,
    .help = "qevict-qa: max-pool kernel over the question's token attention (SnapKV's, like "
            "snapkv_kernel)",
    .policies = "qevict-qa",
    .origin = "SnapKV (same as `snapkv_kernel`)",
    .min = 1,
    .odd = true,
    .request_max = 255,
    .eval_variant = true,
    .default_number = 7,
});

class QevictQaPolicy : public SnapshotQevictPolicy {
 public:
  explicit QevictQaPolicy(const KvConfig& config)
      : SnapshotQevictPolicy(config, "qevict-qa"), kernel_(kQueryKernel.GetInt(config)) {}

  bool wants_observation() const override { return true; }

 protected:
  // A prompt just ended: the question's pooled attention becomes each observed window's
  // importance, and its decode mass counts from zero (base = its score now, band and recent).
  void Snapshot(const RoutingContext& context, const LayerBand& band, size_t l,
                SnapshotKeys* keys) override {
    if (context.trigger == BatchKind::kGenerated || band.observation.empty()) return;
    int64_t limit = 0;
    PooledObservationScores(band, kernel_, HeadReduce::kMean, &observed_, &limit, &pooled_);
    keys->Take(band, l, observed_.data(), limit);
  }

 private:
  int kernel_;
  std::vector<float> observed_;
  std::vector<float> pooled_;
};

const PolicyRegistration kQevictQaRegistration({
    .name = "qevict-qa",
    .description =
        "QEvict ranked by each prompt's pooled question attention + decode mass since (ours)",
    .order = 90,
    .make = [](const KvConfig& c) -> std::unique_ptr<Policy> {
      return std::make_unique<QevictQaPolicy>(c);
    },
});

}  // namespace

}  // namespace qevict
