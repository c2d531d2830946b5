#include "engine/sampler.h"

#include "util/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

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

TEST(SamplerTest, PenaltiesApplyToGeneratedTokensOnly) {
  const std::vector<float> logits = {3.0f, 2.5f, 1.0f};
  // Repeat penalty 2: after token 0 was generated its logit 3 becomes 1.5 < 2.5.
  SamplerOptions repeat;
  repeat.temperature = 0.0f;
  repeat.repeat_penalty = 2.0f;
  Sampler r(repeat);
  EXPECT_EQ(r.Sample(logits), 0);
  EXPECT_EQ(r.Sample(logits), 1);
  // Presence 0.3 + frequency 0.2 per occurrence: token 0 drops 3.0 -> 2.5 (ties 2.5, lower index
  // wins), then 3.0 - 0.3 - 0.4 = 2.3 < 2.5.
  SamplerOptions openai;
  openai.temperature = 0.0f;
  openai.presence_penalty = 0.3f;
  openai.frequency_penalty = 0.2f;
  Sampler p(openai);
  EXPECT_EQ(p.Sample(logits), 0);
  EXPECT_EQ(p.Sample(logits), 0);
  EXPECT_EQ(p.Sample(logits), 1);
  // A window of 1 generated token: the penalty forgets token 0 once token 1 came after it.
  repeat.repeat_last_n = 1;
  Sampler windowed(repeat);
  EXPECT_EQ(windowed.Sample(logits), 0);
  EXPECT_EQ(windowed.Sample(logits), 1);
  EXPECT_EQ(windowed.Sample(logits), 0);
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
