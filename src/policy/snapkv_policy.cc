#include "policy/snapkv_policy.h"

#include <algorithm>
#include <limits>

#include "policy/observation_scores.h"
#include "policy/policies.h"
#include "policy/policy_state.h"
#include "policy/tier_fill.h"

namespace qevict {

void SnapKvPolicy::BeginRun() {
  frozen_ = false;
  scores_.clear();
  scored_limit_.clear();
}

void SnapKvPolicy::ScoreLayer(const LayerBand& band, int layer) {
  PooledObservationScores(band, kernel_, HeadReduce::kMax, &scores_[layer], &scored_limit_[layer], &pooled_);
}

void SnapKvPolicy::Route(const RoutingContext& context, Plan* plan) {
  const int n_layers = static_cast<int>(context.layers.size());
  if (scores_.empty()) {
    scores_.resize(n_layers);
    scored_limit_.assign(n_layers, 0);
  }
  const bool prompt = context.trigger != BatchKind::kGenerated;
  if (!frozen_ && prompt) {
    for (int l = 0; l < n_layers; ++l) {
      const LayerBand& band = context.layers[l];
      if (external_) {
        scores_[l].assign(band.external.begin(), band.external.end());
        scored_limit_[l] = static_cast<int64_t>(band.external.size());
      } else if (!band.observation.empty()) {
        ScoreLayer(band, l);
      }
    }
  }
  if (context.trigger == BatchKind::kPromptEnd) frozen_ = true;
  for (int l = 0; l < n_layers; ++l) {
    const std::vector<float>& scores = scores_[l];
    const int64_t limit = scored_limit_[l];
    RankBand(context.layers[l].windows,
             [&](const BandWindow& w) {
               return w.index >= limit ? std::numeric_limits<float>::infinity() : scores[w.index];
             },
             &order_, &keys_);
    FillLayer(context, l, order_, FillRule{}, plan);
  }
}

void SnapKvPolicy::SaveState(ByteWriter& out) const {
  out.Pod<uint8_t>(frozen_ ? 1 : 0);
  SaveLayerTables(scores_, out);
  out.Array<int64_t>(scored_limit_);
}

void SnapKvPolicy::LoadState(ByteReader& in, int n_layers) {
  frozen_ = in.Bool("snapkv decision");
  scores_ = LoadLayerTables(in, n_layers, "snapkv scores");
  scored_limit_ = in.Array<int64_t>("snapkv scored windows", static_cast<size_t>(n_layers));
  bool ok = scored_limit_.size() == scores_.size();
  for (size_t l = 0; ok && l < scores_.size(); ++l) {
    ok = scored_limit_[l] >= 0 && static_cast<uint64_t>(scored_limit_[l]) <= scores_[l].size();
  }
  if (!ok) in.Fail("snapkv scores do not cover the windows they claim");
}

namespace {

const KvPolicyOption kSnapKvKernel({
    .key = "snapkv_kernel",
    .type = KvOptionType::kInt,
    .help = "snapkv/pyramidkv: max-pool kernel over token scores",
    .policies = "snapkv pyramidkv",
    .origin = "SnapKV",
    .min = 1,
    .odd = true,
    .request_max = 255,
    .eval_variant = true,
    .default_number = 7,
});

}  // namespace

SnapKvPolicy::SnapKvPolicy(const KvConfig& config, bool external)
    : kernel_(kSnapKvKernel.GetInt(config)),
      external_(external),
      expected_(config.score_source == ScoreSource::kExpectedAttention) {}

namespace {

const PolicyRegistration kSnapKvRegistration({
    .name = "snapkv",
    .description =
        "SnapKV: once after the prompt, pooled attention of the last prompt queries, max over heads",
    .order = 40,
    .make = [](const KvConfig& c) -> std::unique_ptr<Policy> {
      return std::make_unique<SnapKvPolicy>(c);
    },
});

}  // namespace

}  // namespace qevict
