// Reconstruction scoring (engine/reconstruction.h) on the real models: the pass leaves the
// session's cache exactly as it was (every layer's keys, values and positions, the ledger, the
// windows' tiers and scores) and the continuation's logits equal a run without it (budget 1.0:
// nothing routes); and qevict-zip at a small budget routes its first step by the reconstruction
// scores, then decodes under the ceiling. SmolLM2 (every layer global) and Gemma 3 270M (sliding
// layers attended by the pass, not scored).
#include <algorithm>
#include <cstring>
#include <string>

#include "engine/reconstruction.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "kv/tiered_cache.h"
#include "policy/registry.h"
#include "tests/test_support.h"

namespace qevict {
namespace {

std::string Facts(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += "Fact " + std::to_string(i) + ": the parcel numbered " + std::to_string(4000 + 53 * i) +
            " is stored on shelf " + std::to_string(i % 7) + ". ";
  }
  return text;
}

struct Snapshot {
  std::vector<std::vector<float>> keys, values;
  std::vector<std::vector<int32_t>> positions;
  std::vector<WindowView> views;
  int64_t resident = 0, allocator = 0;
};

Snapshot Take(const Session& s) {
  Snapshot snap;
  const KvCache& cache = s.cache();
  const int layers = s.model().config().n_layers;
  snap.keys.resize(layers);
  snap.values.resize(layers);
  snap.positions.resize(layers);
  for (int l = 0; l < layers; ++l) {
    cache.DenseLayer(l, &snap.keys[l], &snap.values[l], &snap.positions[l]);
  }
  const auto& tiered = dynamic_cast<const TieredCache&>(*s.policy_cache());
  for (int l = 0; l < tiered.geometry().n_layers; ++l) snap.views.push_back(tiered.View(l));
  snap.resident = tiered.resident_bytes();
  snap.allocator = tiered.AllocatorResidentBytes();
  return snap;
}

void ExpectSame(const Snapshot& a, const Snapshot& b) {
  ASSERT_EQ(a.keys.size(), b.keys.size());
  for (size_t l = 0; l < a.keys.size(); ++l) {
    ASSERT_EQ(a.keys[l].size(), b.keys[l].size());
    EXPECT_EQ(std::memcmp(a.keys[l].data(), b.keys[l].data(), a.keys[l].size() * 4), 0) << l;
    EXPECT_EQ(std::memcmp(a.values[l].data(), b.values[l].data(), a.values[l].size() * 4), 0) << l;
    EXPECT_EQ(a.positions[l], b.positions[l]) << l;
  }
  ASSERT_EQ(a.views.size(), b.views.size());
  for (size_t l = 0; l < a.views.size(); ++l) {
    ASSERT_EQ(a.views[l].windows.size(), b.views[l].windows.size());
    for (size_t j = 0; j < a.views[l].windows.size(); ++j) {
      const WindowInfo &x = a.views[l].windows[j], &y = b.views[l].windows[j];
      EXPECT_EQ(x.tier, y.tier);
      EXPECT_EQ(x.first_pos, y.first_pos);
      EXPECT_EQ(x.score, y.score);
      EXPECT_EQ(x.last_mass, y.last_mass);
    }
  }
  EXPECT_EQ(a.resident, b.resident);
  EXPECT_EQ(a.allocator, b.allocator);
}

void CheckUntouchedAndExact(const LoadedModel& model, const std::string& context) {
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = model.EncodeRaw(context);
  const std::vector<int32_t> ctx = model.tokenizer->Encode(context, false, false);
  const std::vector<int32_t> repeat = RepeatPromptTokens(*model.tokenizer);
  KvConfig config;
  config.policy = "qevict-zip";
  config.budget = 1.0;
  auto factory = [&](const KvGeometry& g, const Rope& r) { return CreateKvCache(config, g, r); };
  SessionOptions options;
  options.n_ctx = static_cast<int64_t>(prompt.size()) + 16;
  options.prefill_chunk = 128;
  bool ran = false;
  SessionOptions with = options;
  with.before_prompt_end = [&](Session& s) {
    const Snapshot before = Take(s);
    ReconstructionCost cost;
    const std::vector<std::vector<float>> scores =
        ReconstructionScores(s, repeat, ctx, 96, pool, &cost);
    ExpectSame(before, Take(s));
    EXPECT_EQ(cost.chunks, (static_cast<int64_t>(ctx.size()) + 95) / 96);
    EXPECT_GT(cost.seconds, 0.0);
    EXPECT_GT(cost.scratch_bytes, 0);
    // Every resident window of every scored layer got a score in (0, 1].
    ASSERT_EQ(scores.size(), static_cast<size_t>(s.policy_cache()->geometry().n_layers));
    for (const std::vector<float>& layer : scores) {
      ASSERT_FALSE(layer.empty());
      for (float x : layer) {
        EXPECT_GT(x, 0.0f);
        EXPECT_LE(x, 1.0f);
      }
    }
    ScoreByReconstruction(s, repeat, ctx, 96, pool);
    ExpectSame(before, Take(s));  // apart from the handed-over scores, nothing changed
    ran = true;
  };
  Session a(*model.model, pool, with, factory), b(*model.model, pool, options, factory);
  a.BeginRun(static_cast<int64_t>(prompt.size()), 16);
  b.BeginRun(static_cast<int64_t>(prompt.size()), 16);
  std::span<const float> la = a.Prefill(prompt), lb = b.Prefill(prompt);
  ASSERT_TRUE(ran);
  EXPECT_EQ(a.position(), b.position());
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(la.size(), lb.size());
    ASSERT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0) << "step " << i;
    const int32_t token = Sampler::Argmax(la);
    la = a.Decode(token);
    lb = b.Decode(token);
  }
}

TEST(ReconstructionModelTest, LeavesTheCacheUntouchedAndTheContinuationExactSmolLM2) {
  const LoadedModel* model = testing::ReferenceModel();
  ASSERT_NE(model, nullptr) << testing::ReferenceModelPath();
  CheckUntouchedAndExact(*model, Facts(14));
}

TEST(ReconstructionModelTest, LeavesTheCacheUntouchedAndTheContinuationExactGemma) {
  const LoadedModel* model = testing::GemmaModel();
  ASSERT_NE(model, nullptr) << testing::GemmaModelPath();
  CheckUntouchedAndExact(*model, Facts(14));
}

TEST(ReconstructionModelTest, QevictZipRoutesItsFirstStepByReconstructionAtASmallBudget) {
  const LoadedModel* model = testing::ReferenceModel();
  ASSERT_NE(model, nullptr) << testing::ReferenceModelPath();
  ThreadPool pool(2);
  const std::string context = Facts(40);
  const std::vector<int32_t> prompt = model->EncodeRaw(context);
  const std::vector<int32_t> ctx = model->tokenizer->Encode(context, false, false);
  const std::vector<int32_t> repeat = RepeatPromptTokens(*model->tokenizer);
  KvConfig config;
  config.policy = "qevict-zip";
  config.budget = 0.1;
  config.prefill_chunk = 0;  // prompt-end: the whole prompt routed once, by the scores
  SessionOptions options;
  options.n_ctx = static_cast<int64_t>(prompt.size()) + 24;
  options.prefill_chunk = 256;
  std::vector<std::vector<float>> scores;
  options.before_prompt_end = [&](Session& s) {
    scores = ReconstructionScores(s, repeat, ctx, 256, pool, nullptr);
    ScoreByReconstruction(s, repeat, ctx, 256, pool);
  };
  Session s(*model->model, pool, options,
            [&](const KvGeometry& g, const Rope& r) { return CreateKvCache(config, g, r); });
  s.BeginRun(static_cast<int64_t>(prompt.size()), 24);
  std::span<const float> logits = s.Prefill(prompt);
  const auto& tiered = dynamic_cast<const TieredCache&>(*s.policy_cache());
  ASSERT_EQ(scores.size(), static_cast<size_t>(tiered.geometry().n_layers));
  KvStats stats = tiered.Stats();
  EXPECT_EQ(stats.routing_steps, 1);
  EXPECT_GT(stats.evictions, 0);
  EXPECT_GT(stats.quant_windows, 0);
  ASSERT_TRUE(tiered.budget().has_value());
  EXPECT_LE(stats.resident_bytes(), *tiered.budget());
  // The first step ranked the band by the reconstruction scores alone: every kept band window
  // scores at least as high as every evicted one, and every fp16 band window at least as high
  // as every quantized one.
  for (int l = 0; l < tiered.geometry().n_layers; ++l) {
    float kept_min = 2.0f, evicted_max = -1.0f, fp_min = 2.0f, q_max = -1.0f;
    for (const WindowInfo& w : tiered.View(l).windows) {
      if (!w.in_band) continue;
      const float x = scores[l][w.index];
      if (w.tier == Tier::kEvicted) {
        evicted_max = std::max(evicted_max, x);
      } else {
        kept_min = std::min(kept_min, x);
      }
      if (w.tier == Tier::kFp16) fp_min = std::min(fp_min, x);
      if (w.tier == Tier::kQuant) q_max = std::max(q_max, x);
    }
    EXPECT_GE(kept_min, evicted_max) << "layer " << l;
    EXPECT_GE(fp_min, q_max) << "layer " << l;
  }
  for (int i = 0; i < 16; ++i) {
    logits = s.Decode(Sampler::Argmax(logits));
    stats = tiered.Stats();
    EXPECT_LE(stats.resident_bytes(), *tiered.budget()) << "token " << i;
  }
  EXPECT_GE(stats.routing_steps, 3);
}

// The evaluator scores the shared prefix once and forks it (instance_runner.cc): a fork of a
// scored prefix must be where a cache that read the prompt itself and was scored before its
// routing step is -- tiers, tokens and logits.
TEST(ReconstructionModelTest, AForkOfAScoredPrefixEqualsACacheScoredWhileReadingThePrompt) {
  const LoadedModel* model = testing::ReferenceModel();
  ASSERT_NE(model, nullptr) << testing::ReferenceModelPath();
  ThreadPool pool(2);
  const std::string context = Facts(30);
  const std::vector<int32_t> prompt = model->EncodeRaw(context);
  const std::vector<int32_t> ctx = model->tokenizer->Encode(context, false, false);
  const std::vector<int32_t> repeat = RepeatPromptTokens(*model->tokenizer);
  const int64_t n_new = 12;
  SessionOptions options;
  options.n_ctx = static_cast<int64_t>(prompt.size()) + n_new;
  options.prefill_chunk = 256;
  KvConfig base;
  base.prefill_chunk = 0;
  Session prefix(*model->model, pool, options, [&](const KvGeometry& g, const Rope& r) {
    return std::unique_ptr<KvCache>(CreatePrefixCache(base, g, r));
  });
  prefix.BeginRun(static_cast<int64_t>(prompt.size()), n_new);
  const std::span<const float> first = prefix.Prefill(prompt);
  const std::vector<float> prefix_logits(first.begin(), first.end());
  ScoreByReconstruction(prefix, repeat, ctx, 128, pool);
  for (const char* policy : {"qevict-zip", "kvzip"}) {
    SCOPED_TRACE(policy);
    KvConfig config = base;
    config.policy = policy;
    config.budget = 0.1;
    Session forked(prefix, [&](const KvCache& p, const Rope& r) {
      return ForkKvCache(dynamic_cast<const TieredCache&>(p), config, r, pool);
    });
    SessionOptions own_options = options;
    own_options.before_prompt_end = [&](Session& s) {
      ScoreByReconstruction(s, repeat, ctx, 128, pool);
    };
    Session own(*model->model, pool, own_options,
                [&](const KvGeometry& g, const Rope& r) { return CreateKvCache(config, g, r); });
    own.BeginRun(static_cast<int64_t>(prompt.size()), n_new);
    std::span<const float> lo = own.Prefill(prompt);
    std::span<const float> lf = prefix_logits;
    const auto& a = dynamic_cast<const TieredCache&>(*own.policy_cache());
    const auto& b = dynamic_cast<const TieredCache&>(*forked.policy_cache());
    EXPECT_GT(a.Stats().evictions, 0);
    for (int l = 0; l < a.geometry().n_layers; ++l) {
      const WindowView va = a.View(l), vb = b.View(l);
      ASSERT_EQ(va.windows.size(), vb.windows.size());
      for (size_t j = 0; j < va.windows.size(); ++j) {
        EXPECT_EQ(va.windows[j].tier, vb.windows[j].tier) << "layer " << l << " window " << j;
      }
    }
    for (int i = 0; i < 8; ++i) {
      ASSERT_EQ(std::memcmp(lo.data(), lf.data(), lo.size() * sizeof(float)), 0) << "step " << i;
      const int32_t token = Sampler::Argmax(lo);
      lo = own.Decode(token);
      lf = forked.Decode(token);
    }
    EXPECT_EQ(a.Stats().evictions, b.Stats().evictions);
    EXPECT_EQ(a.Stats().promotions, b.Stats().promotions);
  }
}

}  // namespace
}  // namespace qevict
