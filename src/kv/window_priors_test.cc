// Key-norm and expected-attention window scores on synthetic keys, values and queries.
#include "kv/window_priors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace qevict {
namespace {

// head_dim 4 with only channels 0-1 rotated: data in channels 2-3 ignores positions.
Rope PartialRope(int64_t positions = 64) {
  RopeConfig c;
  c.rot_dims = 2;
  return Rope(c, positions);
}

// Rows of (0, 0, x, y): what the tests below write as (x, y).
std::vector<float> Unrotated(const std::vector<float>& pairs) {
  std::vector<float> out;
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) out.insert(out.end(), {0, 0, pairs[i], pairs[i + 1]});
  return out;
}

TEST(KeyNormScores, LowestNormScoresOneAndEachHeadCounts) {
  // Two KV heads, head_dim 2, three windows of two tokens (dense rows 0-5), indices 0, 1, 3.
  // Mean key norms: head 0 {2, 1, 4}, head 1 {1, 3, 4}.
  const std::vector<float> norms0 = {2, 2, 1, 1, 4, 4}, norms1 = {1, 1, 3, 3, 2, 6};
  std::vector<float> keys;
  for (int t = 0; t < 6; ++t) {
    keys.insert(keys.end(), {norms0[t], 0.0f});  // head 0: norm = first channel
    keys.insert(keys.end(), {0.0f, -norms1[t]});  // head 1
  }
  const std::vector<DenseWindow> windows = {{0, 0, 2}, {1, 2, 2}, {3, 4, 2}};
  std::vector<float> scores;
  KeyNormWindowScores(keys, 2, 2, windows, &scores);
  ASSERT_EQ(scores.size(), 4u);
  // Per head min(norm) / norm: head 0 {0.5, 1, 0.25}, head 1 {1, 1/3, 0.25}; max over heads.
  EXPECT_FLOAT_EQ(scores[0], 1.0f);
  EXPECT_FLOAT_EQ(scores[1], 1.0f);
  EXPECT_FLOAT_EQ(scores[2], 0.0f);  // not a listed window
  EXPECT_FLOAT_EQ(scores[3], 0.25f);
}

TEST(ExpectedAttentionScores, TheKeyTheMeanQueryFavoursWinsTimesTheValueNorm) {
  // One query head, one KV head, head_dim 4 (data in the unrotated channels); every recent
  // query is (2, 0): mean (2, 0), no variance. Four tokens, windows of one token each.
  const Rope rope = PartialRope();
  const std::vector<float> queries = Unrotated({2, 0, 2, 0, 2, 0});
  const std::vector<int32_t> qpos = {10, 11, 12};
  const std::vector<float> keys = Unrotated({1, 0, 0, 1, -1, 0, 1, 0});
  const std::vector<float> values = Unrotated({1, 0, 1, 0, 1, 0, 0, 3});  // token 3: 3x as long
  const std::vector<DenseWindow> windows = {{0, 0, 1}, {1, 1, 1}, {2, 2, 1}, {3, 3, 1}};
  std::vector<float> scores;
  ExpectedAttentionWindowScores(keys, values, queries, qpos, 1, 1, 4, rope, 13, 16, windows,
                                &scores);
  // Logits mu.k / sqrt(4): 1, 0, -1, 1.
  const double a = std::exp(1.0), b = 1.0, c = std::exp(-1.0);
  const double z = 2 * a + b + c;
  EXPECT_NEAR(scores[0], a / z, 1e-6);
  EXPECT_NEAR(scores[1], b / z, 1e-6);
  EXPECT_NEAR(scores[2], c / z, 1e-6);
  EXPECT_NEAR(scores[3], 3 * a / z, 1e-6);
}

TEST(ExpectedAttentionScores, VarianceFavoursKeysAlongTheVaryingChannel) {
  // Queries (1, 0) and (-1, 0): mean 0, variance (1, 0). Exponent k0^2 / (2 d) with d = 4.
  const Rope rope = PartialRope();
  const std::vector<float> queries = Unrotated({1, 0, -1, 0});
  const std::vector<int32_t> qpos = {0, 1};
  const std::vector<float> keys = Unrotated({2, 0, 0, 2});
  const std::vector<float> values = Unrotated({1, 0, 1, 0});
  const std::vector<DenseWindow> windows = {{0, 0, 1}, {1, 1, 1}};
  std::vector<float> scores;
  ExpectedAttentionWindowScores(keys, values, queries, qpos, 1, 1, 4, rope, 2, 8, windows, &scores);
  const double a = std::exp(4.0 / 8.0), b = 1.0;
  EXPECT_NEAR(scores[0], a / (a + b), 1e-6);
  EXPECT_NEAR(scores[1], b / (a + b), 1e-6);
}

TEST(ExpectedAttentionScores, QueriesAreUnrotatedAndProjectedWithTheAveragedRotation) {
  // head_dim 2, fully rotated. One query, stored after RoPE at position 3, is (1, 0) before
  // RoPE. With a single future position p the averaged rotation is RoPE at p itself, so the
  // expected logit of a key stored at position s (after RoPE) equals the exact logit of the
  // query rotated to p: the key (1, 0) rotated to p scores like an aligned key.
  RopeConfig c;
  c.rot_dims = 2;
  c.freq_base = 10000.0f;
  const Rope rope(c, 64);
  std::vector<float> q = {1, 0};
  rope.Apply(q.data(), 1, 2, 3);
  std::vector<float> aligned = {1, 0}, opposed = {-1, 0};
  rope.Apply(aligned.data(), 1, 2, 20);
  rope.Apply(opposed.data(), 1, 2, 20);
  std::vector<float> keys = aligned;
  keys.insert(keys.end(), opposed.begin(), opposed.end());
  const std::vector<float> values = {1, 0, 1, 0};
  const std::vector<int32_t> qpos = {3};
  const std::vector<DenseWindow> windows = {{0, 0, 1}, {1, 1, 1}};
  std::vector<float> scores;
  ExpectedAttentionWindowScores(keys, values, q, qpos, 1, 1, 2, rope, 20, 1, windows, &scores);
  const double a = std::exp(1.0 / std::sqrt(2.0)), b = std::exp(-1.0 / std::sqrt(2.0));
  EXPECT_NEAR(scores[0], a / (a + b), 1e-5);
  EXPECT_NEAR(scores[1], b / (a + b), 1e-5);
}

}  // namespace
}  // namespace qevict
