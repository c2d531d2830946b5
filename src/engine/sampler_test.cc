#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <span>
#include <vector>

#include "engine/penalty_window.h"
#include "util/error.h"

namespace qevict {
namespace {

SamplerOptions Options(float temperature, int top_k, float top_p, uint64_t seed) {
  SamplerOptions o;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.seed = seed;
  return o;
}

// Greedy, so that each penalty shows in the token picked.
SamplerOptions GreedyWithPenalties(float repeat, float presence, float frequency, int last_n) {
  SamplerOptions o;
  o.temperature = 0.0f;
  o.repeat_penalty = repeat;
  o.presence_penalty = presence;
  o.frequency_penalty = frequency;
  o.repeat_last_n = last_n;
  return o;
}

TEST(SamplerTest, GreedyPicksTheLowestIndexAmongTies) {
  Sampler s(Options(0.0f, 40, 0.95f, 1));
  EXPECT_EQ(s.Sample(std::vector<float>{1.0f, 3.0f, 3.0f, -1.0f}), 1);
}

TEST(SamplerTest, SameSeedSameTokens) {
  const std::vector<float> logits = {0.1f, 0.5f, 0.2f, 0.9f, -0.3f};
  for (int top_k : {0, 3}) {
    for (float top_p : {1.0f, 0.8f}) {
      Sampler a(Options(1.0f, top_k, top_p, 7)), b(Options(1.0f, top_k, top_p, 7));
      for (int i = 0; i < 50; ++i) ASSERT_EQ(a.Sample(logits), b.Sample(logits));
    }
  }
}

TEST(SamplerTest, TopKAndTopPRestrictTheCandidates) {
  const std::vector<float> logits = {5.0f, 4.0f, 0.0f, -2.0f};
  Sampler k2(Options(1.0f, 2, 1.0f, 3));
  Sampler p(Options(1.0f, 0, 0.5f, 3));
  for (int i = 0; i < 200; ++i) {
    EXPECT_LT(k2.Sample(logits), 2);
    EXPECT_EQ(p.Sample(logits), 0);  // token 0 alone holds > 50% of the mass
  }
}

TEST(SamplerTest, UntruncatedSamplingFollowsTheSoftmax) {
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // probabilities 1/4, 3/4
  Sampler s(Options(1.0f, 0, 1.0f, 11));
  std::map<int, int> counts;
  for (int i = 0; i < 4000; ++i) counts[s.Sample(logits)]++;
  EXPECT_NEAR(counts[1] / 4000.0, 0.75, 0.04);
}

TEST(SamplerTest, LogitBiasCanForceAndForbidATokenEvenWhenGreedy) {
  SamplerOptions o;
  o.temperature = 0.0f;
  o.logit_bias = {{2, 100.0f}};
  Sampler forced(o);
  const std::vector<float> logits = {5.0f, 4.0f, 0.0f, 1.0f};
  EXPECT_EQ(forced.Sample(logits), 2);
  o.logit_bias = {{0, -100.0f}};
  Sampler forbidden(o);
  EXPECT_EQ(forbidden.Sample(logits), 1);
}

TEST(SamplerTest, PenaltiesCountGeneratedTokens) {
  const std::vector<float> logits = {3.0f, 2.5f, 1.0f};
  // Repeat penalty 2: after token 0 was generated its logit 3 becomes 1.5 < 2.5.
  Sampler r(GreedyWithPenalties(2.0f, 0.0f, 0.0f, 64));
  EXPECT_EQ(r.Sample(logits), 0);
  EXPECT_EQ(r.Sample(logits), 1);
  // Presence 0.3 + frequency 0.2 per occurrence: token 0 drops 3.0 -> 2.5 (ties 2.5, lower index
  // wins), then 3.0 - 0.3 - 0.4 = 2.3 < 2.5.
  Sampler p(GreedyWithPenalties(1.0f, 0.3f, 0.2f, 64));
  EXPECT_EQ(p.Sample(logits), 0);
  EXPECT_EQ(p.Sample(logits), 0);
  EXPECT_EQ(p.Sample(logits), 1);
  // A window of 1 token: the penalty forgets token 0 once token 1 came after it.
  Sampler windowed(GreedyWithPenalties(2.0f, 0.0f, 0.0f, 1));
  EXPECT_EQ(windowed.Sample(logits), 0);
  EXPECT_EQ(windowed.Sample(logits), 1);
  EXPECT_EQ(windowed.Sample(logits), 0);
}

TEST(SamplerTest, PenaltiesCountThePromptToo) {
  // As llama.cpp: prompt tokens enter the window before the first sample.
  const std::vector<float> logits = {3.0f, 2.5f, 1.0f};
  Sampler s(GreedyWithPenalties(2.0f, 0.0f, 0.0f, 64));
  s.Accept(std::vector<int32_t>{2, 0});
  const std::span<const float> adjusted = s.Adjusted(logits);
  EXPECT_FLOAT_EQ(adjusted[0], 1.5f);
  EXPECT_FLOAT_EQ(adjusted[1], 2.5f);
  EXPECT_FLOAT_EQ(adjusted[2], 0.5f);
  EXPECT_EQ(s.Sample(logits), 1);
}

TEST(SamplerTest, PenaltyArithmeticOverTheWindowOfPromptAndGenerated) {
  Sampler s(GreedyWithPenalties(2.0f, 0.5f, 0.25f, 4));
  const std::vector<float> logits = {3.0f, -2.0f, 1.0f, 0.5f, 4.0f};
  // Prompt 4 0 1 1 0: the window holds its last 4 tokens, so token 4 has just left it.
  s.Accept(std::vector<int32_t>{4, 0, 1, 1, 0});
  std::span<const float> a = s.Adjusted(logits);
  EXPECT_FLOAT_EQ(a[0], 3.0f / 2 - 0.5f - 2 * 0.25f);   // divided, then presence + 2 x frequency
  EXPECT_FLOAT_EQ(a[1], -2.0f * 2 - 0.5f - 2 * 0.25f);  // a negative logit is multiplied
  EXPECT_FLOAT_EQ(a[2], 1.0f);
  EXPECT_FLOAT_EQ(a[3], 0.5f);
  EXPECT_FLOAT_EQ(a[4], 4.0f);
  EXPECT_EQ(s.Sample(logits), 4);
  // Window 1 1 0 4 after the generated 4: the older 0 left, one remains.
  a = s.Adjusted(logits);
  EXPECT_FLOAT_EQ(a[0], 3.0f / 2 - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(a[1], -2.0f * 2 - 0.5f - 2 * 0.25f);
  EXPECT_FLOAT_EQ(a[4], 4.0f / 2 - 0.5f - 0.25f);
  EXPECT_EQ(s.Sample(logits), 4);  // 1.25 > 1
  // Window 1 0 4 4: token 4 is at 2 - 0.5 - 0.5 = 1, tying token 2; the lower index wins.
  a = s.Adjusted(logits);
  EXPECT_FLOAT_EQ(a[1], -2.0f * 2 - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(a[4], 1.0f);
  EXPECT_EQ(s.Sample(logits), 2);
}

TEST(SamplerTest, WholeSequenceWindowAndDisabledWindow) {
  const std::vector<float> logits = {3.0f, 2.0f};
  const std::vector<int32_t> prompt(100, 0);
  SamplerOptions o = GreedyWithPenalties(1.0f, 0.0f, 0.01f, -1);  // every token: 100 of them
  Sampler all(o);
  all.Accept(prompt);
  EXPECT_NEAR(all.Adjusted(logits)[0], 2.0f, 1e-5f);
  o.repeat_last_n = 0;  // no penalties at all
  Sampler off(o);
  off.Accept(prompt);
  EXPECT_EQ(off.Adjusted(logits)[0], 3.0f);
  o.repeat_last_n = -2;
  EXPECT_THROW(Sampler{o}, Error);
}

TEST(PenaltyWindowTest, RunningCountsMatchACountOfTheLastNTokens) {
  std::mt19937 rng(5);
  std::vector<int32_t> seen;
  PenaltyWindow window(7);
  for (int i = 0; i < 500; ++i) {
    const int32_t token = static_cast<int32_t>(rng() % 5);
    seen.push_back(token);
    window.Push(token);
    std::map<int32_t, int> expected;
    for (size_t j = seen.size() > 7 ? seen.size() - 7 : 0; j < seen.size(); ++j) {
      ++expected[seen[j]];
    }
    ASSERT_EQ(window.size(), std::min<size_t>(seen.size(), 7));
    ASSERT_EQ(window.counts().size(), expected.size()) << "after " << i + 1 << " tokens";
    for (const auto& [t, n] : expected) ASSERT_EQ(window.counts().at(t), n);
  }
  PenaltyWindow bulk(7);
  bulk.PushAll(seen);  // only the last 7 are pushed: the same counts
  EXPECT_EQ(bulk.counts(), window.counts());
}

TEST(SamplerTest, MinPKeepsOnlyTokensNearTheMostLikely) {
  // Probabilities at temperature 1: e^0 : e^-1 : e^-5 ~ 1 : 0.37 : 0.007. min_p 0.5 leaves only
  // token 0; min_p 0.1 leaves tokens 0 and 1, never 2.
  const std::vector<float> logits = {0.0f, -1.0f, -5.0f};
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.5f;
  Sampler strict(o);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(strict.Sample(logits), 0);
  o.min_p = 0.1f;
  Sampler loose(o);
  int seen1 = 0;
  for (int i = 0; i < 400; ++i) {
    const int32_t t = loose.Sample(logits);
    EXPECT_NE(t, 2);
    seen1 += t == 1;
  }
  EXPECT_GT(seen1, 40);  // ~27% expected
}

TEST(SamplerTest, RejectsBadPenalties) {
  SamplerOptions o;
  o.repeat_penalty = 0.0f;
  EXPECT_THROW(Sampler{o}, Error);
  o = {};
  o.min_p = 1.5f;
  EXPECT_THROW(Sampler{o}, Error);
}

}  // namespace
}  // namespace qevict
