// Policies on synthetic score sequences, without a cache or a model: a policy reads a
// RoutingContext and writes a Plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "policy/registry.h"
#include "policy/snapkv_policy.h"
#include "util/byte_stream.h"
#include "util/error.h"

namespace qevict {
namespace {

constexpr int64_t kFp = 1000, kQ = 300;

// One layer whose band has windows with the given tiers and scores (window j has index j).
struct SyntheticLayer {
  std::vector<BandWindow> windows;
  std::vector<BandWindow> recent;  // indices follow the band's
  std::vector<float> observation;
  int heads = 1;
  std::vector<int64_t> offsets;
  std::vector<float> external;  // by window index
  std::vector<float> recall;    // by window index (qevict-recall's prompt-end ranking)
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
      b.observation_heads = l.heads;
      b.external = l.external;
      b.recall = l.recall;
      b.recent = l.recent;
      b.budget_bytes = l.budget;
      b.first_recent_index = !l.recent.empty()   ? l.recent.front().index
                             : l.windows.empty() ? 0
                                                 : l.windows.back().index + 1;
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
  // Budget 2000: fp16 share 1000 = one window; quantized tier the other 1000 = three windows.
  sc.layers = {Layer({T::kFp16, T::kQuant, T::kQuant, T::kQuant}, {5.0f, 1.0f, 2.0f, 3.0f}, 2000)};
  EXPECT_EQ(RouteWith("qevict", sc), (std::vector<Tier>{T::kFp16, T::kQuant, T::kQuant, T::kQuant}));
  // Window 2's score overtakes window 0's: the next routing swaps them.
  sc.layers[0].windows[2].score = 6.0f;
  EXPECT_EQ(RouteWith("qevict", sc), (std::vector<Tier>{T::kQuant, T::kQuant, T::kFp16, T::kQuant}));
}

TEST(QevictPolicy, HysteresisNeedsAMargin) {
  SyntheticContext sc;
  sc.config.hysteresis = 0.5;
  sc.layers = {Layer({T::kFp16, T::kQuant, T::kQuant, T::kQuant}, {5.0f, 1.0f, 7.0f, 3.0f}, 2000)};
  EXPECT_EQ(RouteWith("qevict", sc)[2], T::kQuant);  // 7 < 5 * 1.5
  sc.layers[0].windows[2].score = 8.0f;
  EXPECT_EQ(RouteWith("qevict", sc)[2], T::kFp16);  // 8 > 7.5
}

TEST(QevictPolicy, EvictsTheLowestWhenBothTiersAreFull) {
  SyntheticContext sc;
  sc.layers = {Layer(std::vector<Tier>(6, T::kFp16), {6, 5, 4, 3, 2, 1}, 1600)};
  // fp16 share 800: none fits; quantized tier 1600: five windows; window 5 evicted.
  EXPECT_EQ(RouteWith("qevict", sc), (std::vector<Tier>{T::kQuant, T::kQuant, T::kQuant, T::kQuant,
                                                        T::kQuant, T::kEvicted}));
}

TEST(QevictPolicy, RanksByCumulativeAttentionPrefillIncludedAndIgnoresTheQuestion) {
  // The paper's method: the question's observation plays no part, the cumulative score does.
  SyntheticContext sc;
  sc.layers = {Layer(std::vector<Tier>(4, T::kFp16), {9.0f, 1.0f, 1.0f, 1.0f}, 2000)};
  sc.layers[0].observation = {0, 0, 0, 0, 0, 0.9f, 0, 0};
  sc.layers[0].offsets = {0, 2, 4, 6};
  EXPECT_FALSE(MakePolicy(KvConfig{})->wants_observation());
  EXPECT_EQ(RouteWith("qevict", sc, BatchKind::kPromptEnd),
            (std::vector<Tier>{T::kFp16, T::kQuant, T::kQuant, T::kQuant}));
}

TEST(QevictQaPolicy, RanksByTheQuestionThenByDecodeMass) {
  SyntheticContext sc;
  sc.config.set_option("query_kernel", 1);  // no pooling: each window scores its own tokens
  // Four windows of two tokens, no sinks; the question attends window 2 only.
  sc.layers = {Layer(std::vector<Tier>(4, T::kFp16), {9.0f, 1.0f, 1.0f, 1.0f}, 2000)};
  sc.layers[0].observation = {0, 0, 0, 0, 0, 0.9f, 0, 0};
  sc.layers[0].offsets = {0, 2, 4, 6};
  sc.config.policy = "qevict-qa";
  std::unique_ptr<Policy> policy = MakePolicy(sc.config);
  EXPECT_TRUE(policy->wants_observation());
  // Window 0's large cumulative score (prefill attention) does not count: the question does.
  EXPECT_EQ(RouteWith("", sc, BatchKind::kPromptEnd, policy.get()),
            (std::vector<Tier>{T::kQuant, T::kQuant, T::kFp16, T::kQuant}));
  for (BandWindow& w : sc.layers[0].windows) w.tier = w.index == 2 ? T::kFp16 : T::kQuant;
  sc.layers[0].observation.clear();
  sc.layers[0].offsets.clear();
  // Decoding: window 1 receives more attention mass than the question gave window 2.
  sc.layers[0].windows[1].score += 2.0f;
  EXPECT_EQ(RouteWith("", sc, BatchKind::kGenerated, policy.get()),
            (std::vector<Tier>{T::kQuant, T::kFp16, T::kQuant, T::kQuant}));
}

TEST(QevictQaPolicy, WindowsRecentAtThePromptEndDoNotKeepTheirPrefillMass) {
  // At the prompt end windows 0-1 are in the band and windows 2-3 in the recent region; all four
  // have the same cumulative (prefill) score 5.0. The question gives the band windows 0.3 and
  // 0.25, the recent ones 0.2 (one token per window, no sinks, kernel 1).
  SyntheticContext sc;
  sc.config.set_option("query_kernel", 1);
  sc.layers = {Layer({T::kFp16, T::kFp16}, {5.0f, 5.0f}, 4 * kFp)};
  SyntheticLayer& l = sc.layers[0];
  for (int64_t i = 2; i < 4; ++i) {
    BandWindow w;
    w.index = i;
    w.score = 5.0f;
    l.recent.push_back(w);
  }
  l.observation = {0.3f, 0.25f, 0.2f, 0.2f};
  l.offsets = {0, 1, 2, 3};
  sc.config.policy = "qevict-qa";
  std::unique_ptr<Policy> policy = MakePolicy(sc.config);
  RouteWith("", sc, BatchKind::kPromptEnd, policy.get());
  // Decoding: windows 2-3 left the recent region; every window received 0.05 more mass. Keys are
  // observation + decode mass: 0.35, 0.3, 0.25, 0.25, so the former band windows rank first
  // (counting windows 2-3's prefill mass would give them 5.25 and the fp16 tier).
  l = Layer(std::vector<Tier>(4, T::kQuant), {5.05f, 5.05f, 5.05f, 5.05f}, kFp + 3 * kQ);
  l.observation.clear();
  l.offsets.clear();
  EXPECT_EQ(RouteWith("", sc, BatchKind::kGenerated, policy.get()),
            (std::vector<Tier>{T::kFp16, T::kQuant, T::kQuant, T::kQuant}));
  sc.layers[0].windows[1].score += 0.2f;  // 0.5: window 1 overtakes window 0
  EXPECT_EQ(RouteWith("", sc, BatchKind::kGenerated, policy.get()),
            (std::vector<Tier>{T::kQuant, T::kFp16, T::kQuant, T::kQuant}));
  sc.layers[0].windows[3].score += 0.4f;  // 0.65: a formerly recent window overtakes on decode mass
  EXPECT_EQ(RouteWith("", sc, BatchKind::kGenerated, policy.get()),
            (std::vector<Tier>{T::kQuant, T::kQuant, T::kQuant, T::kFp16}));
}

// recall_split_error: each layer's fp16 count is chosen at the prompt end to lose the least of
// the ranked attention (an fp16 window costs kFp, a 2-bit one kQ and loses E of its score).
// Attention spread over six windows: all of them in 2 bits (the fixed share would keep one in
// fp16 and drop two); attention on two windows: both in fp16 and no 2-bit ones (the fixed share
// keeps one in fp16 and three in 2 bits). The decoding steps after it keep the count.
TEST(QevictRecallPolicy, TheLeastLossSplitFollowsWhereTheQuestionPoints) {
  const auto route = [](const std::vector<float>& recall, double error, BatchKind trigger,
                        std::unique_ptr<Policy>* keep = nullptr) {
    SyntheticContext sc;
    sc.config.q_share = 0.5;
    if (error >= 0.0) sc.config.set_option("recall_split_error", error);  // < 0: the default
    sc.layers = {Layer(std::vector<Tier>(6, T::kQuant), std::vector<float>(6, 0.0f), 2000)};
    sc.layers[0].recall = recall;
    sc.config.policy = "qevict-recall";
    std::unique_ptr<Policy> owned;
    if (keep == nullptr || *keep == nullptr) owned = MakePolicy(sc.config);
    Policy* policy = owned != nullptr ? owned.get() : keep->get();
    std::vector<Tier> out = RouteWith("", sc, trigger, policy);
    if (keep != nullptr && owned != nullptr) *keep = std::move(owned);
    return out;
  };
  const std::vector<float> broad = {0.21f, 0.2f, 0.19f, 0.18f, 0.11f, 0.1f};
  const std::vector<float> pointed = {0.46f, 0.44f, 0.028f, 0.026f, 0.024f, 0.022f};
  EXPECT_EQ(route(broad, 0.3, BatchKind::kPromptEnd), std::vector<Tier>(6, T::kQuant));
  EXPECT_EQ(route(broad, 0.0, BatchKind::kPromptEnd),  // off: the fixed share
            (std::vector<Tier>{T::kFp16, T::kQuant, T::kQuant, T::kQuant, T::kEvicted,
                               T::kEvicted}));
  const std::vector<Tier> two_exact = {T::kFp16,    T::kFp16,    T::kEvicted,
                                       T::kEvicted, T::kEvicted, T::kEvicted};
  std::unique_ptr<Policy> policy;
  EXPECT_EQ(route(pointed, 0.3, BatchKind::kPromptEnd, &policy), two_exact);
  // A decoding step after it keeps two fp16 windows (the fixed share would allow one).
  EXPECT_EQ(route(pointed, 0.3, BatchKind::kGenerated, &policy), two_exact);
  EXPECT_EQ(route(pointed, 0.0, BatchKind::kPromptEnd),
            (std::vector<Tier>{T::kFp16, T::kQuant, T::kQuant, T::kQuant, T::kEvicted,
                               T::kEvicted}));
  // It is the default (0.3).
  EXPECT_EQ(route(broad, -1.0, BatchKind::kPromptEnd), std::vector<Tier>(6, T::kQuant));
  EXPECT_EQ(route(pointed, -1.0, BatchKind::kPromptEnd), two_exact);
}

// The split chosen at a prompt end is saved with the policy's state (a prompt cache, a kept
// server conversation), so a restored conversation decodes with it as the original would; a
// saved split out of range is refused.
TEST(QevictRecallPolicy, TheSplitOfThePromptEndIsInTheSavedState) {
  const std::vector<float> pointed = {0.46f, 0.44f, 0.028f, 0.026f, 0.024f, 0.022f};
  const auto context = [&] {
    SyntheticContext sc;
    sc.config.q_share = 0.5;
    sc.config.policy = "qevict-recall";
    sc.layers = {Layer(std::vector<Tier>(6, T::kQuant), std::vector<float>(6, 0.0f), 2000)};
    sc.layers[0].recall = pointed;
    return sc;
  };
  SyntheticContext sc = context();
  std::unique_ptr<Policy> original = MakePolicy(sc.config);
  RouteWith("", sc, BatchKind::kPromptEnd, original.get());
  ByteWriter saved;
  original->SaveState(saved);
  const std::vector<Tier> decoded = RouteWith("", sc, BatchKind::kGenerated, original.get());
  EXPECT_EQ(decoded, (std::vector<Tier>{T::kFp16, T::kFp16, T::kEvicted, T::kEvicted,
                                        T::kEvicted, T::kEvicted}));

  std::unique_ptr<Policy> restored = MakePolicy(sc.config);
  ByteReader in(saved.bytes(), "saved state");
  restored->LoadState(in, 1);
  SyntheticContext again = context();
  EXPECT_EQ(RouteWith("", again, BatchKind::kGenerated, restored.get()), decoded);
  // Without the saved split a decoding step takes the fixed share: one fp16 window.
  std::unique_ptr<Policy> fresh = MakePolicy(sc.config);
  SyntheticContext third = context();
  const std::vector<Tier> fixed = RouteWith("", third, BatchKind::kGenerated, fresh.get());
  EXPECT_EQ(std::count(fixed.begin(), fixed.end(), T::kFp16), 1);

  // A split of 2^40 windows (a file edited by hand): refused, not multiplied into a budget.
  ByteWriter tables;
  original->SaveState(tables);
  std::vector<uint8_t> bytes(tables.bytes().begin(), tables.bytes().end());
  ASSERT_GE(bytes.size(), sizeof(int64_t));
  const int64_t huge = int64_t{1} << 40;
  std::memcpy(bytes.data() + bytes.size() - sizeof(int64_t), &huge, sizeof(huge));
  std::unique_ptr<Policy> victim = MakePolicy(sc.config);
  ByteReader corrupt(bytes, "saved state");
  EXPECT_THROW(victim->LoadState(corrupt, 1), Error);
}

TEST(MikvPolicy, NeverPromotesAndEvictsOnlyWhenTheQuantizedTierIsFull) {
  SyntheticContext sc;
  sc.layers = {Layer({T::kFp16, T::kQuant, T::kFp16, T::kQuant}, {1.0f, 9.0f, 2.0f, 0.5f}, 2000)};
  EXPECT_EQ(RouteWith("mikv", sc), (std::vector<Tier>{T::kQuant, T::kQuant, T::kFp16, T::kQuant}));
  sc.layers[0].budget = 900;  // three quantized windows fit, the lowest goes
  EXPECT_EQ(RouteWith("mikv", sc), (std::vector<Tier>{T::kQuant, T::kQuant, T::kQuant, T::kEvicted}));
}

TEST(H2oPolicy, SplitsTheBudgetBetweenHeavyHittersAndTheNewestWindows) {
  SyntheticContext sc;
  // Budget of four fp16 windows: the two newest (windows 5, 6) are kept as recent whatever their
  // score, the other two slots go to the heaviest older windows (1 and 3).
  sc.layers = {Layer(std::vector<Tier>(7, T::kFp16), {3, 9, 1, 7, 2, 0, 0}, 4 * kFp)};
  EXPECT_EQ(RouteWith("h2o", sc), (std::vector<Tier>{T::kEvicted, T::kFp16, T::kEvicted, T::kFp16,
                                                     T::kEvicted, T::kFp16, T::kFp16}));
  // h2o_recent_share = 0: heavy hitters only.
  sc.config.set_option("h2o_recent_share", 0.0);
  EXPECT_EQ(RouteWith("h2o", sc), (std::vector<Tier>{T::kFp16, T::kFp16, T::kEvicted, T::kFp16,
                                                     T::kFp16, T::kEvicted, T::kEvicted}));
  // 0.75: three recent windows, one heavy hitter.
  sc.config.set_option("h2o_recent_share", 0.75);
  EXPECT_EQ(RouteWith("h2o", sc), (std::vector<Tier>{T::kEvicted, T::kFp16, T::kEvicted,
                                                     T::kEvicted, T::kFp16, T::kFp16, T::kFp16}));
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
  sc.config.set_option("snapkv_kernel", 1);  // no pooling: window score = sum of its tokens' observation
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

// Two KV heads, 2 sink tokens, four band windows of 4 tokens, one recent window of 4 tokens.
SyntheticLayer TwoHeadLayer(int64_t budget) {
  SyntheticLayer l = Layer(std::vector<Tier>(4, T::kFp16), {0, 0, 0, 0}, budget);
  BandWindow recent;
  recent.index = 4;
  l.recent = {recent};
  l.offsets = {2, 6, 10, 14, 18};
  l.heads = 2;
  l.observation.assign(2 * 22, 0.0f);
  return l;
}

TEST(SnapKvPolicy, TakesTheMaxOverHeads) {
  SyntheticContext sc;
  sc.config.set_option("snapkv_kernel", 1);
  sc.layers = {TwoHeadLayer(kFp)};
  float* head0 = sc.layers[0].observation.data();
  float* head1 = head0 + 22;
  // Window sums: head 0 {0.3, 0.5, 0.2, 0}, head 1 {0.3, 0, 0.2, 0}. The mean over heads would
  // keep window 0 (0.3 > 0.25); the max keeps window 1, which head 0 needs.
  head0[2] = 0.3f, head0[6] = 0.5f, head0[10] = 0.2f;
  head1[2] = 0.3f, head1[10] = 0.2f;
  EXPECT_EQ(RouteWith("snapkv", sc, BatchKind::kPromptEnd),
            (std::vector<Tier>{T::kEvicted, T::kFp16, T::kEvicted, T::kEvicted}));
}

TEST(SnapKvPolicy, PoolsWithinTheBandNotAcrossTheSinksOrTheRecentRegion) {
  SyntheticContext sc;
  sc.config.set_option("snapkv_kernel", 7);
  sc.layers = {TwoHeadLayer(kFp)};
  std::vector<float>& obs = sc.layers[0].observation;
  // The sinks and the recent window (the question's own tokens) draw large attention; in the
  // band, token 7 (window 1) draws 0.2. Pooled within the band: window 0 gets 0.2 on tokens 4-5
  // (0.4), window 1 0.8, window 2 0.2 (token 10), window 3 nothing. Pooling across the segment
  // boundaries would give window 0 the sinks' 5.0 on three tokens and window 3 the recent 3.0.
  for (int h = 0; h < 2; ++h) {
    float* row = obs.data() + 22 * h;
    row[0] = row[1] = 5.0f;
    row[7] = 0.2f;
    for (int t = 18; t < 22; ++t) row[t] = 3.0f;
  }
  EXPECT_EQ(RouteWith("snapkv", sc, BatchKind::kPromptEnd),
            (std::vector<Tier>{T::kEvicted, T::kFp16, T::kEvicted, T::kEvicted}));
  sc.layers[0].budget = 2 * kFp;
  EXPECT_EQ(RouteWith("snapkv", sc, BatchKind::kPromptEnd),
            (std::vector<Tier>{T::kFp16, T::kFp16, T::kEvicted, T::kEvicted}));
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

namespace qevict {
namespace {

TEST(QevictZipPolicy, RanksByTheExternalScoreThenByMassSince) {
  SyntheticContext sc;
  // Budget 2000: one fp16 window, three quantized. Window 0 has the largest cumulative
  // (prefill) score; the reconstruction ranks windows 2, 3, 4, 1, 0.
  sc.layers = {Layer(std::vector<Tier>(5, T::kFp16), {9.0f, 1.0f, 1.0f, 1.0f, 1.0f}, 2000)};
  sc.layers[0].external = {0.1f, 0.2f, 0.9f, 0.5f, 0.3f};
  sc.config.policy = "qevict-zip";
  std::unique_ptr<Policy> policy = MakePolicy(sc.config);
  EXPECT_TRUE(policy->wants_external_scores());
  EXPECT_TRUE(policy->quantizes());
  EXPECT_FALSE(policy->wants_observation());  // reconstruction: no prompt queries needed
  EXPECT_EQ(RouteWith("", sc, BatchKind::kPromptEnd, policy.get()),
            (std::vector<Tier>{T::kEvicted, T::kQuant, T::kFp16, T::kQuant, T::kQuant}));
  // Decoding (the scores were consumed): window 1 receives more attention mass since the prompt
  // end (1.0) than the reconstruction gave window 2 (0.9): it is promoted, window 2 demoted.
  sc.layers = {Layer({T::kQuant, T::kFp16, T::kQuant, T::kQuant}, {2.0f, 1.0f, 1.0f, 1.0f}, 2000)};
  for (int j = 0; j < 4; ++j) sc.layers[0].windows[j].index = j + 1;
  EXPECT_EQ(RouteWith("", sc, BatchKind::kGenerated, policy.get()),
            (std::vector<Tier>{T::kFp16, T::kQuant, T::kQuant, T::kQuant}));
}

TEST(QevictZipPolicy, WithoutExternalScoresRanksByScoreAsQevict) {
  SyntheticContext sc;
  sc.layers = {Layer(std::vector<Tier>(4, T::kFp16), {4.0f, 1.0f, 3.0f, 2.0f}, kFp + 2 * kQ)};
  const std::vector<Tier> zip = RouteWith("qevict-zip", sc, BatchKind::kPromptChunk);
  EXPECT_EQ(zip, RouteWith("qevict", sc, BatchKind::kPromptChunk));
  sc.config.score_source = ScoreSource::kExpectedAttention;
  sc.config.policy = "qevict-zip";
  EXPECT_TRUE(MakePolicy(sc.config)->wants_observation());  // expected attention reads queries
}

TEST(KvzipPolicy, KeepsTheHighestExternalScoresInFp16OnceThenNewestFirst) {
  SyntheticContext sc;
  sc.layers = {Layer(std::vector<Tier>(4, T::kFp16), {9.0f, 9.0f, 0.0f, 0.0f}, 2 * kFp)};
  sc.layers[0].external = {0.1f, 0.8f, 0.2f, 0.9f};
  sc.config.policy = "kvzip";
  std::unique_ptr<Policy> policy = MakePolicy(sc.config);
  EXPECT_TRUE(policy->wants_external_scores());
  EXPECT_FALSE(policy->wants_observation());
  EXPECT_EQ(RouteWith("", sc, BatchKind::kPromptEnd, policy.get()),
            (std::vector<Tier>{T::kEvicted, T::kFp16, T::kEvicted, T::kFp16}));
  // Later: a new window (index 4) is kept first; of the prompt's, the higher score stays.
  sc.layers = {Layer({T::kFp16, T::kFp16, T::kFp16}, {0.0f, 0.0f, 0.0f}, 2 * kFp)};
  sc.layers[0].windows[0].index = 1;
  sc.layers[0].windows[1].index = 3;
  sc.layers[0].windows[2].index = 4;
  EXPECT_EQ(RouteWith("", sc, BatchKind::kGenerated, policy.get()),
            (std::vector<Tier>{T::kEvicted, T::kFp16, T::kFp16}));
}

}  // namespace
}  // namespace qevict
