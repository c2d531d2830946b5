#include "kv/quant_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kv/kv_test_util.h"
#include "util/cpu_features.h"

namespace qevict {
namespace {

struct Case {
  int bits;
  int head_dim;
  bool neox;
  int rot_dims;  // 0 = head_dim
};

class QuantAttentionKernels : public ::testing::TestWithParam<Case> {
 protected:
  void TearDown() override { SetSimdLevel(DetectedSimdLevel()); }
};

// Scores and value sums of every SIMD path against the scalar dequantize-then-RoPE reference.
TEST_P(QuantAttentionKernels, MatchReferenceOnEverySimdLevel) {
  const Case c = GetParam();
  const int n_kv = 2, w = 8, hd = c.head_dim, n_q = 3;
  RopeConfig rc = testing::TestRopeConfig(hd, c.neox);
  if (c.rot_dims > 0) rc.rot_dims = c.rot_dims;
  const Rope rope(rc, 4096);
  const QuantLayout l = QuantLayout::Make(n_kv, w, hd, c.bits, 32);
  std::mt19937 rng(c.bits + hd);
  std::normal_distribution<float> normal;
  std::vector<float> keys(n_kv * w * hd), values(n_kv * w * hd), q(n_q * hd), p(n_q * (w + 1));
  for (auto& x : keys) x = normal(rng);
  for (auto& x : values) x = 3.0f * normal(rng);
  for (auto& x : q) x = normal(rng);
  for (auto& x : p) x = std::fabs(normal(rng));
  std::vector<uint8_t> block(l.bytes);
  QuantizeWindow(l, keys.data(), values.data(), block.data());
  std::vector<int32_t> positions(w);
  for (int t = 0; t < w; ++t) positions[t] = 1000 + 3 * t;

  for (SimdLevel level : {SimdLevel::kPortable, SimdLevel::kAvx2}) {
    if (level > DetectedSimdLevel()) continue;
    SetSimdLevel(level);
    for (int h = 0; h < n_kv; ++h) {
      for (auto [t0, t1] : {std::pair{0, w}, std::pair{3, 7}, std::pair{7, 8}}) {
        std::vector<float> ref_k((t1 - t0) * hd), ref_v((t1 - t0) * hd);
        DequantizeKeyRows(l, block.data(), h, t0, t1, ref_k.data());
        DequantizeValueRows(l, block.data(), h, t0, t1, ref_v.data());
        for (int t = t0; t < t1; ++t) rope.Apply(ref_k.data() + (t - t0) * hd, 1, hd, positions[t]);
        const int64_t ld = w + 1;
        std::vector<float> scores(n_q * ld, -1.0f), acc(n_q * hd, 0.5f);
        ScoreQuantKeys(l, block.data(), h, t0, t1, positions.data() + t0, rope, q.data(), n_q,
                       0.125f, scores.data(), ld);
        AccumulateQuantValues(l, block.data(), h, t0, t1, p.data(), n_q, ld, acc.data());
        for (int qi = 0; qi < n_q; ++qi) {
          for (int t = t0; t < t1; ++t) {
            double dot = 0.0;
            for (int d = 0; d < hd; ++d) dot += double{q[qi * hd + d]} * ref_k[(t - t0) * hd + d];
            EXPECT_NEAR(scores[qi * ld + (t - t0)], 0.125 * dot, 1e-4 * (1.0 + std::fabs(dot)))
                << SimdLevelName(level) << " head " << h << " t " << t;
          }
          for (int d = 0; d < hd; ++d) {
            double sum = 0.5;
            for (int t = t0; t < t1; ++t) sum += double{p[qi * ld + (t - t0)]} * ref_v[(t - t0) * hd + d];
            EXPECT_NEAR(acc[qi * hd + d], sum, 1e-4 * (1.0 + std::fabs(sum)));
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, QuantAttentionKernels,
                         ::testing::Values(Case{2, 64, false, 0}, Case{4, 64, false, 0},
                                           Case{8, 64, false, 0}, Case{2, 128, true, 0},
                                           Case{4, 64, false, 32}, Case{2, 20, false, 0},
                                           Case{8, 48, true, 0}));

}  // namespace
}  // namespace qevict
