// Policies on synthetic score sequences, without a cache or a model: a policy reads a
// RoutingContext and writes a Plan.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "policy/registry.h"
#include "policy/snapkv_policy.h"

namespace qevict {
namespace {

constexpr int64_t kFp = 1000, kQ = 300;

// One layer whose band has windows with the given tiers and scores (window j has index j).
struct SyntheticLayer {
  std::vector<BandWindow> windows;
  std::vector<float> observation;
  std::vector<int64_t> offsets;
  int64_t budget = 0;
};

struct SyntheticContext {
  KvConfig config;
  std::vector<SyntheticLayer> layers;
  std::vector<LayerBand> bands;
  RoutingContext context;

  RoutingContext& Build(BatchKind trigger = BatchKind::kGenerated, int64_t step = 1) {
    bands.clear();
    for (const SyntheticLayer& l : layers) {
      LayerBand b;
      b.windows = l.windows;
      b.observation = l.observation;
      b.observation_offsets = l.offsets;
      b.budget_bytes = l.budget;
      b.first_recent_index = static_cast<int64_t>(l.windows.size());
      bands.push_back(b);
    }
    context.config = &config;
    context.layers = bands;
    context.fp_window_bytes = kFp;
    context.q_window_bytes = kQ;
    context.trigger = trigger;
    context.first_routing = step == 0;
    context.routing_step = step;
    return context;
  }
};

SyntheticLayer Layer(const std::vector<Tier>& tiers, const std::vector<float>& scores,
                     int64_t budget) {
  SyntheticLayer l;
  for (size_t j = 0; j < tiers.size(); ++j) {
    BandWindow w;
    w.index = static_cast<int64_t>(j);
    w.first_pos = static_cast<int32_t>(5 + 8 * j);
    w.tier = tiers[j];
    w.score = scores[j];
    w.last_mass = scores[j];
    l.windows.push_back(w);
  }
  l.budget = budget;
  return l;
}

std::vector<Tier> RouteWith(const std::string& name, SyntheticContext& sc,
                            BatchKind trigger = BatchKind::kGenerated, Policy* policy = nullptr) {
  std::unique_ptr<Policy> owned;
  if (policy == nullptr) {
    sc.config.policy = name;
    owned = MakePolicy(sc.config);
    policy = owned.get();
  }
  const RoutingContext& context = sc.Build(trigger);
  Plan plan;
  plan.ResetTo(context);
  policy->Route(context, &plan);
  return plan.targets[0];
}

using T = Tier;

TEST(QevictPolicy, QuantizedWindowThatOvertakesAnFp16WindowIsPromoted) {
  SyntheticContext sc;
  sc.config.query_aware = false;  // the cache's score alone (the paper's ranking)
  // Budget 2000: fp16 share 1000 = one window; quantized tier the other 1000 = three windows.
  sc.layers = {Layer({T::kFp16, T::kQuant, T::kQuant, T::kQuant}, {5.0f, 1.0f, 2.0f, 3.0f}, 2000)};
  EXPECT_EQ(RouteWith("qevict", sc), (std::vector<Tier>{T::kFp16, T::kQuant, T::kQuant, T::kQuant}));
  // Window 2's score overtakes window 0's: the next routing swaps them.
  sc.layers[0].windows[2].score = 6.0f;
  EXPECT_EQ(RouteWith("qevict", sc), (std::vector<Tier>{T::kQuant, T::kQuant, T::kFp16, T::kQuant}));
}

TEST(QevictPolicy, HysteresisNeedsAMargin) {
  SyntheticContext sc;
  sc.config.query_aware = false;  // the cache's score alone (the paper's ranking)
  sc.config.hysteresis = 0.5;
  sc.layers = {Layer({T::kFp16, T::kQuant, T::kQuant, T::kQuant}, {5.0f, 1.0f, 7.0f, 3.0f}, 2000)};
  EXPECT_EQ(RouteWith("qevict", sc)[2], T::kQuant);  // 7 < 5 * 1.5
  sc.layers[0].windows[2].score = 8.0f;
  EXPECT_EQ(RouteWith("qevict", sc)[2], T::kFp16);  // 8 > 7.5
}

TEST(QevictPolicy, EvictsTheLowestWhenBothTiersAreFull) {
  SyntheticContext sc;
  sc.config.query_aware = false;  // the cache's score alone (the paper's ranking)
  sc.layers = {Layer(std::vector<Tier>(6, T::kFp16), {6, 5, 4, 3, 2, 1}, 1600)};
  // fp16 share 800: none fits; quantized tier 1600: five windows; window 5 evicted.
  EXPECT_EQ(RouteWith("qevict", sc), (std::vector<Tier>{T::kQuant, T::kQuant, T::kQuant, T::kQuant,
                                                        T::kQuant, T::kEvicted}));
}

TEST(QevictPolicy, QueryAwareRanksByTheQuestionThenByDecodeMass) {
  SyntheticContext sc;
  sc.config.query_kernel = 1;  // no pooling: each window scores its own tokens
  // Four windows of two tokens, no sinks; the question attends window 2 only.
  sc.layers = {Layer(std::vector<Tier>(4, T::kFp16), {9.0f, 1.0f, 1.0f, 1.0f}, 2000)};
  sc.layers[0].observation = {0, 0, 0, 0, 0, 0.9f, 0, 0};
  sc.layers[0].offsets = {0, 2, 4, 6};
  sc.config.policy = "qevict";
  std::unique_ptr<Policy> policy = MakePolicy(sc.config);
  // Window 0's large cumulative score (prefill attention) does not count: the question does.
  EXPECT_EQ(RouteWith("qevict", sc, BatchKind::kPromptEnd, policy.get()),
            (std::vector<Tier>{T::kQuant, T::kQuant, T::kFp16, T::kQuant}));
  for (BandWindow& w : sc.layers[0].windows) w.tier = w.index == 2 ? T::kFp16 : T::kQuant;
  sc.layers[0].observation.clear();
  sc.layers[0].offsets.clear();
  // Decoding: window 1 receives more attention mass than the question gave window 2.
  sc.layers[0].windows[1].score += 2.0f;
  EXPECT_EQ(RouteWith("qevict", sc, BatchKind::kGenerated, policy.get()),
            (std::vector<Tier>{T::kQuant, T::kFp16, T::kQuant, T::kQuant}));
}

TEST(MikvPolicy, NeverPromotesAndEvictsOnlyWhenTheQuantizedTierIsFull) {
  SyntheticContext sc;
  sc.layers = {Layer({T::kFp16, T::kQuant, T::kFp16, T::kQuant}, {1.0f, 9.0f, 2.0f, 0.5f}, 2000)};
  EXPECT_EQ(RouteWith("mikv", sc), (std::vector<Tier>{T::kQuant, T::kQuant, T::kFp16, T::kQuant}));
  sc.layers[0].budget = 900;  // three quantized windows fit, the lowest goes
  EXPECT_EQ(RouteWith("mikv", sc), (std::vector<Tier>{T::kQuant, T::kQuant, T::kQuant, T::kEvicted}));
}

TEST(H2oPolicy, KeepsHeavyHittersInFp16AndEvictsTheRest) {
  SyntheticContext sc;
  sc.layers = {Layer(std::vector<Tier>(5, T::kFp16), {3, 9, 1, 7, 2}, 2500)};
  EXPECT_EQ(RouteWith("h2o", sc), (std::vector<Tier>{T::kEvicted, T::kFp16, T::kEvicted, T::kFp16,
                                                     T::kEvicted}));
}

TEST(TovaPolicy, RanksByTheLatestQueryOnly) {
  SyntheticContext sc;
  sc.layers = {Layer(std::vector<Tier>(3, T::kFp16), {1, 1, 1}, 2000)};
  sc.layers[0].windows[0].score = 100.0f;  // a large history does not matter to TOVA
  sc.layers[0].windows[0].last_mass = 0.01f;
  sc.layers[0].windows[1].last_mass = 0.5f;
  sc.layers[0].windows[2].last_mass = 0.2f;
  EXPECT_EQ(RouteWith("tova", sc), (std::vector<Tier>{T::kEvicted, T::kFp16, T::kFp16}));
}

TEST(StreamingPolicy, KeepsTheNewestWindows) {
  SyntheticContext sc;
  sc.layers = {Layer(std::vector<Tier>(4, T::kFp16), {9, 9, 0, 0}, 2000)};
  EXPECT_EQ(RouteWith("streaming", sc), (std::vector<Tier>{T::kEvicted, T::kEvicted, T::kFp16,
                                                           T::kFp16}));
}

TEST(KiviPolicy, QuantizesEverythingAndReportsInfeasibleInsteadOfEvicting) {
  SyntheticContext sc;
  sc.config.policy = "kivi";
  sc.layers = {Layer(std::vector<Tier>(4, T::kFp16), {0, 0, 0, 0}, 1200)};
  auto policy = MakePolicy(sc.config);
  Plan plan;
  plan.ResetTo(sc.Build());
  policy->Route(sc.context, &plan);
  EXPECT_EQ(plan.targets[0], std::vector<Tier>(4, T::kQuant));
  EXPECT_FALSE(plan.infeasible);
  sc.layers[0].budget = 1000;
  plan.ResetTo(sc.Build());
  policy->Route(sc.context, &plan);
  EXPECT_EQ(plan.targets[0], std::vector<Tier>(4, T::kQuant));
  EXPECT_TRUE(plan.infeasible);
  EXPECT_NE(plan.note.find("kivi"), std::string::npos);
}

TEST(SnapKvPolicy, DecidesOnceFromThePromptObservation) {
  SyntheticContext sc;
  sc.config.snapkv_kernel = 1;  // no pooling: window score = sum of its tokens' observation
  sc.layers = {Layer(std::vector<Tier>(4, T::kFp16), {0, 0, 0, 0}, 2000)};
  // 5 sink tokens, then 4 windows of 8 tokens; windows 1 and 3 are observed most.
  SyntheticLayer& l = sc.layers[0];
  l.observation.assign(5 + 32, 0.0f);
  for (int t = 0; t < 8; ++t) {
    l.observation[5 + 8 + t] = 0.5f;
    l.observation[5 + 24 + t] = 0.3f;
    l.observation[5 + 16 + t] = 0.1f;
  }
  for (int j = 0; j < 4; ++j) l.offsets.push_back(5 + 8 * j);
  SnapKvPolicy policy(sc.config);
  policy.BeginRun();
  EXPECT_EQ(RouteWith("", sc, BatchKind::kPromptEnd, &policy),
            (std::vector<Tier>{T::kEvicted, T::kFp16, T::kEvicted, T::kFp16}));
  EXPECT_TRUE(policy.decided());
  // During decoding the importance seen by other policies changes, the decision does not: with a
  // smaller budget the prompt window with the lowest observation score goes first.
  sc.layers = {Layer({T::kFp16, T::kFp16}, {100.0f, 0.0f}, 1000)};
  sc.layers[0].windows[0].index = 1;
  sc.layers[0].windows[1].index = 3;
  EXPECT_EQ(RouteWith("", sc, BatchKind::kGenerated, &policy),
            (std::vector<Tier>{T::kFp16, T::kEvicted}));
  // A later prompt turn does not rescore either.
  sc.layers[0].observation.assign(5 + 16, 1.0f);
  sc.layers[0].offsets = {5, 13};
  EXPECT_EQ(RouteWith("", sc, BatchKind::kPromptEnd, &policy),
            (std::vector<Tier>{T::kFp16, T::kEvicted}));
}

TEST(PyramidKvPolicy, BudgetsDecreaseLinearlyWithDepth) {
  KvConfig config;
  config.policy = "pyramidkv";
  auto policy = MakePolicy(config);
  std::vector<double> w;
  policy->LayerBudgetWeights(30, &w);
  ASSERT_EQ(w.size(), 30u);
  double sum = 0.0;
  for (size_t l = 0; l < w.size(); ++l) {
    sum += w[l];
    if (l > 0) {
      EXPECT_LT(w[l], w[l - 1]);
    }
  }
  EXPECT_NEAR(sum, 30.0, 1e-9);
  EXPECT_NEAR(w.back(), 1.0 / 20.0, 1e-12);
  config.policy = "qevict";
  MakePolicy(config)->LayerBudgetWeights(30, &w);
  EXPECT_EQ(w, std::vector<double>(30, 1.0));
}

}  // namespace
}  // namespace qevict
