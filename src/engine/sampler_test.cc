#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace qevict {
namespace {

TEST(SamplerTest, GreedyPicksTheLowestIndexAmongTies) {
  Sampler s({0.0f, 40, 0.95f, 1});
  EXPECT_EQ(s.Sample(std::vector<float>{1.0f, 3.0f, 3.0f, -1.0f}), 1);
}

TEST(SamplerTest, SameSeedSameTokens) {
  const std::vector<float> logits = {0.1f, 0.5f, 0.2f, 0.9f, -0.3f};
  for (int top_k : {0, 3}) {
    for (float top_p : {1.0f, 0.8f}) {
      Sampler a({1.0f, top_k, top_p, 7}), b({1.0f, top_k, top_p, 7});
      for (int i = 0; i < 50; ++i) ASSERT_EQ(a.Sample(logits), b.Sample(logits));
    }
  }
}

TEST(SamplerTest, TopKAndTopPRestrictTheCandidates) {
  const std::vector<float> logits = {5.0f, 4.0f, 0.0f, -2.0f};
  Sampler k2({1.0f, 2, 1.0f, 3});
  Sampler p({1.0f, 0, 0.5f, 3});
  for (int i = 0; i < 200; ++i) {
    EXPECT_LT(k2.Sample(logits), 2);
    EXPECT_EQ(p.Sample(logits), 0);  // token 0 alone holds > 50% of the mass
  }
}

TEST(SamplerTest, UntruncatedSamplingFollowsTheSoftmax) {
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // probabilities 1/4, 3/4
  Sampler s({1.0f, 0, 1.0f, 11});
  std::map<int, int> counts;
  for (int i = 0; i < 4000; ++i) counts[s.Sample(logits)]++;
  EXPECT_NEAR(counts[1] / 4000.0, 0.75, 0.04);
}

}  // namespace
}  // namespace qevict
