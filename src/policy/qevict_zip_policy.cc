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

namespace qevict {
namespace {

class QevictZipPolicy : public SnapshotQevictPolicy {
 public:
  explicit QevictZipPolicy(const KvConfig& config)
      : SnapshotQevictPolicy(config, "qevict-zip"),
        expected_(config.score_source == ScoreSource::kExpectedAttention) {}

  bool wants_external_scores() const override { return true; }
  // Expected attention reads the last prompt queries.
  bool wants_observation() const override { return expected_; }

 protected:
  // External scores (handed over for the first prompt end) become the snapshot.
  void Snapshot(const RoutingContext&, const LayerBand& band, size_t l,
                SnapshotKeys* keys) override {
    if (band.external.empty()) return;
    keys->Take(band, l, band.external.data(), static_cast<int64_t>(band.external.size()));
  }

 private:
  bool expected_;
};

// Its options score_source, reconstruction_chunk and expected_future are the cache's (the cache
// and the engine read them: kv/kv_options.cc).
const PolicyRegistration kQevictZipRegistration({
    .name = "qevict-zip",
    .description = "QEvict whose first routing ranks by a query-agnostic score (KVzip "
                   "reconstruction by default) + attention mass since (ours)",
    .order = 100,
    .make = [](const KvConfig& c) -> std::unique_ptr<Policy> {
      return std::make_unique<QevictZipPolicy>(c);
    },
});

}  // namespace

}  // namespace qevict
