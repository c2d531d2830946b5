// SnapKV (and PyramidKV, which only changes the per-layer budgets): after the prompt, the
// attention of the last snapkv_window prompt queries on every token (summed over those queries,
// per KV head) is max-pooled over snapkv_kernel neighbouring tokens (never across the sinks or
// into the recent region, which are kept anyway: SnapKV pools only the prefix before its
// observation window); a window's score is the sum over its tokens, and since the decision is
// shared by the layer's KV heads it takes the maximum over heads (SnapKV selects per head: a
// window one head needs is kept). The top windows fill the budget in fp16. The decision is
// taken once, at the end of the first prompt (and between prompt chunks when --kv-prefill-chunk
// routes them). Afterwards nothing is rescored: windows created after the decision (generated
// text, later turns) are kept newest first, and when the budget requires it the prompt windows
// go lowest score first.
#pragma once

#include <vector>

#include "kv/kv_config.h"
#include "kv/routing.h"

namespace qevict {

class SnapKvPolicy : public Policy {
 public:
  // external: rank by LayerBand::external (kvzip_policy.cc) instead of the observation.
  // The pooling kernel is the snapkv_kernel option, declared in snapkv_policy.cc.
  explicit SnapKvPolicy(const KvConfig& config, bool external = false);

  bool wants_scores() const override { return false; }
  bool wants_observation() const override { return !external_ || expected_; }
  bool wants_external_scores() const override { return external_; }
  void BeginRun() override;
  void Route(const RoutingContext& context, Plan* plan) override;
  void SaveState(ByteWriter& out) const override;
  void LoadState(ByteReader& in, int n_layers) override;

  bool decided() const { return frozen_; }

 private:
  void ScoreLayer(const LayerBand& band, int layer);

  int kernel_;
  bool external_;
  bool expected_;
  bool frozen_ = false;
  std::vector<std::vector<float>> scores_;  // [layer][window index]: pooled observation score
  std::vector<int64_t> scored_limit_;       // [layer]: windows with index >= this are newer
  std::vector<float> pooled_;
  std::vector<int> order_;
  std::vector<float> keys_;
};

}  // namespace qevict
