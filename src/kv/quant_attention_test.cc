#include "kv/quant_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/attention_impl.h"
#include "kernels/simd_paths_test_util.h"
#include "kv/kv_test_util.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

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

  for (SimdLevel level : {SimdLevel::kPortable, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
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

// ---- Every SIMD level and every compiled Highway target against the portable reference (the
// public functions at SimdLevel::kPortable), over the shapes the Highway kernels cover (head_dim
// 64/128/256, 2/4/8 bits, adjacent-pair and NEOX RoPE, full and partial rot_dims) and a few they
// leave to the portable code.
//
// Tolerances (u = 2^-24, the unit roundoff of fp32). A dequantized element zero + scale * code
// is within 2u m of exact (m = |zero| + |scale * code|) whether or not the multiply-add is fused;
// rotated, c a - s b is within 4u (m_a + m_b) (|c|, |s| <= 1, two roundings more). A dot product
// of n terms adds n u sum|terms|. Each path errs by at most that, so scores may differ by
// 2 (head_dim + 5) u scale sum_d |q_d| R_d (R_d = m_d + m_partner(d) for rotated channels, m_d
// otherwise) and value sums over n rows by 2 (n + 3) u (|out_d| + sum_t |p_t| m_td).

namespace hw = attention_impl::highway;
namespace qhw = quant_attention_impl::highway;

constexpr double kU = 1.0 / (1 << 24);

using Path = testing::SimdPath;
using testing::SimdPaths;

void Select(const Path& path) { testing::SelectSimdPath(path); }

void SelectPortable() {
  SetSimdLevel(SimdLevel::kPortable);
  hw::ForceTargetsForTest(0);
}

void Restore() { testing::RestoreSimdPath(); }

TEST(QuantAttentionPaths, CoverEveryLevelAndTargetWithTheAttentionDispatch) {
  for (const Path& path : SimdPaths()) {
    Select(path);
    // One list of targets for both *_hwy.cc files: the same index picks the same target.
    EXPECT_EQ(qhw::ActiveTarget(), hw::ActiveTarget()) << path.name;
    EXPECT_EQ(qhw::ActiveTarget() != 0, path.level != SimdLevel::kPortable || path.target != 0);
  }
  Restore();
  // That the list covers every level and target is AttentionKernels.PathsCoverEveryLevelAndTarget.
}

struct Shape {
  int bits;
  int head_dim;
  bool neox;
  int rot_dims;
  int value_group;
};

std::vector<Shape> PathShapes() {
  std::vector<Shape> shapes;
  for (const int bits : {2, 4, 8}) {
    for (const int hd : {64, 128, 256}) {
      for (const auto& [neox, rot] : {std::pair{false, hd}, {true, hd}, {false, hd / 2},
                                      {true, hd / 2}, {false, 16}}) {
        shapes.push_back({bits, hd, neox, rot, hd == 128 ? 64 : 32});
      }
    }
  }
  // Shapes the Highway kernels leave (in part) to the portable code, or take with narrow tags.
  shapes.push_back({2, 20, false, 20, 32});
  shapes.push_back({4, 72, true, 72, 24});
  shapes.push_back({2, 40, false, 24, 8});
  shapes.push_back({4, 96, true, 32, 32});
  return shapes;
}

// Shapes the Highway kernels must take on every target but the 1-lane HWY_SCALAR fallback.
bool Covered(const Shape& s) {
  return (s.head_dim == 64 || s.head_dim == 128 || s.head_dim == 256) &&
         qhw::ActiveTarget() != HWY_SCALAR;
}

// |zero| + |scale * code| of every element of rows [0, window) of one head: keys, values.
void Magnitudes(const QuantLayout& l, const uint8_t* block, int head, std::vector<double>& key_m,
                std::vector<double>& value_m) {
  const int hd = l.head_dim;
  const auto* ks = reinterpret_cast<const uint16_t*>(block + l.key_scales) + head * hd;
  const auto* kz = reinterpret_cast<const uint16_t*>(block + l.key_zeros) + head * hd;
  const auto* vs = reinterpret_cast<const uint16_t*>(block + l.value_scales);
  const auto* vz = reinterpret_cast<const uint16_t*>(block + l.value_zeros);
  key_m.assign(static_cast<size_t>(l.window) * hd, 0.0);
  value_m.assign(static_cast<size_t>(l.window) * hd, 0.0);
  std::vector<uint8_t> codes(hd);
  for (int t = 0; t < l.window; ++t) {
    const int64_t row = int64_t{head} * l.window + t;
    UnpackCodes(block + l.key_codes + row * l.row_bytes, hd, l.bits, codes.data());
    for (int d = 0; d < hd; ++d) {
      key_m[t * hd + d] = std::fabs(Fp16ToFp32(kz[d])) + std::fabs(Fp16ToFp32(ks[d]) * codes[d]);
    }
    UnpackCodes(block + l.value_codes + row * l.row_bytes, hd, l.bits, codes.data());
    for (int d = 0; d < hd; ++d) {
      const int64_t g = row * l.value_groups + d / l.value_group;
      value_m[t * hd + d] = std::fabs(Fp16ToFp32(vz[g])) + std::fabs(Fp16ToFp32(vs[g]) * codes[d]);
    }
  }
}

// The channel rotated with d (d itself when d is not rotated).
int Partner(const RopeConfig& rc, int d) {
  if (d >= rc.rot_dims) return d;
  if (!rc.neox) return d ^ 1;
  const int half = rc.rot_dims / 2;
  return d < half ? d + half : d - half;
}

TEST(QuantAttentionPaths, EveryLevelAndTargetMatchesPortable) {
  const int n_kv = 2, w = 16, head = 1;
  const int64_t ld = w + 3;
  const float kSentinel = 1234.5f, scale = 0.125f;
  const std::vector<Path> paths = SimdPaths();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  int compared = 0;
  double worst = 0.0;  // largest |difference| / bound seen
  for (const Shape& s : PathShapes()) {
    const std::string shape_name = std::to_string(s.bits) + " bits head_dim " +
                                   std::to_string(s.head_dim) + (s.neox ? " neox" : " pairs") +
                                   " rot " + std::to_string(s.rot_dims) + " value_group " +
                                   std::to_string(s.value_group);
    SCOPED_TRACE(shape_name);
    const int hd = s.head_dim;
    RopeConfig rc = testing::TestRopeConfig(hd, s.neox);
    rc.rot_dims = s.rot_dims;
    const Rope rope(rc, 4096);
    const QuantLayout l = QuantLayout::Make(n_kv, w, hd, s.bits, s.value_group);
    std::vector<float> keys(n_kv * w * hd), values(n_kv * w * hd);
    for (auto& x : keys) x = normal(rng);
    for (auto& x : values) x = 3.0f * normal(rng);
    for (int d = 0; d < hd; d += 7) keys[head * w * hd + d] += 20.0f;  // uneven channel ranges
    std::vector<uint8_t> block(l.bytes);
    QuantizeWindow(l, keys.data(), values.data(), block.data());
    std::vector<int32_t> positions(w);
    for (int t = 0; t < w; ++t) positions[t] = 100 + 37 * t + (t % 3);
    std::vector<double> key_m, value_m;
    Magnitudes(l, block.data(), head, key_m, value_m);
    for (const int n_q : {1, 3, 4, 24, 32}) {
      std::vector<float> q(n_q * hd), p(n_q * ld), start(n_q * hd);
      for (auto& x : q) x = normal(rng);
      for (auto& x : p) x = std::fabs(normal(rng));
      for (auto& x : start) x = normal(rng);
      for (const auto& [t0, t1] : {std::pair{0, w}, {3, 13}, {15, 16}, {5, 6}}) {
        SCOPED_TRACE("n_q " + std::to_string(n_q) + " rows " + std::to_string(t0) + ".." +
                     std::to_string(t1));
        const int n = t1 - t0;
        const int32_t* pos = positions.data() + t0;
        SelectPortable();
        std::vector<float> want_s(n_q * ld, kSentinel), want_v = start;
        ScoreQuantKeys(l, block.data(), head, t0, t1, pos, rope, q.data(), n_q, scale,
                       want_s.data(), ld);
        AccumulateQuantValues(l, block.data(), head, t0, t1, p.data(), n_q, ld, want_v.data());
        for (const Path& path : paths) {
          if (path.level == SimdLevel::kPortable && path.target == 0) continue;
          SCOPED_TRACE(path.name);
          Select(path);
          std::vector<float> got_s(n_q * ld, kSentinel), got_v = start;
          ScoreQuantKeys(l, block.data(), head, t0, t1, pos, rope, q.data(), n_q, scale,
                         got_s.data(), ld);
          AccumulateQuantValues(l, block.data(), head, t0, t1, p.data(), n_q, ld, got_v.data());
          if (Covered(s)) {  // the Highway kernels ran, not the portable fallback
            std::vector<float> scratch_s(n_q * ld), scratch_v = start;
            ASSERT_TRUE(qhw::ScoreQuantKeys(l, block.data(), head, t0, t1, pos, rope, q.data(),
                                            n_q, scale, scratch_s.data(), ld));
            ASSERT_TRUE(qhw::AccumulateQuantValues(l, block.data(), head, t0, t1, p.data(), n_q,
                                                   ld, scratch_v.data()));
          }
          for (int qi = 0; qi < n_q; ++qi) {
            for (int64_t j = 0; j < ld; ++j) {
              const int64_t at = qi * ld + j;
              if (j >= n) {
                ASSERT_EQ(got_s[at], kSentinel) << "wrote past the rows: query " << qi;
                continue;
              }
              const int t = t0 + static_cast<int>(j);
              double magnitude = 0.0;
              for (int d = 0; d < hd; ++d) {
                const int e = Partner(rc, d);
                const double r = key_m[t * hd + d] + (e != d ? key_m[t * hd + e] : 0.0);
                magnitude += std::fabs(q[qi * hd + d]) * r;
              }
              const double tol = 2.0 * (hd + 5) * kU * scale * magnitude;
              worst = std::max(worst, std::fabs(got_s[at] - want_s[at]) / tol);
              ASSERT_NEAR(got_s[at], want_s[at], tol) << "score of query " << qi << " row " << t;
            }
            for (int d = 0; d < hd; ++d) {
              double magnitude = std::fabs(start[qi * hd + d]);
              for (int t = t0; t < t1; ++t) magnitude += p[qi * ld + t - t0] * value_m[t * hd + d];
              const double tol = 2.0 * (n + 3) * kU * magnitude;
              worst = std::max(worst, std::fabs(got_v[qi * hd + d] - want_v[qi * hd + d]) / tol);
              ASSERT_NEAR(got_v[qi * hd + d], want_v[qi * hd + d], tol)
                  << "value sum of query " << qi << " channel " << d;
            }
          }
          ++compared;
        }
      }
    }
  }
  Restore();
  EXPECT_GT(compared, 0);
  std::printf("%d comparisons; largest |difference| / bound %.3f\n", compared, worst);
}

// Each output element receives fma(p_t, v_t, .) in row order whatever the split of the rows into
// calls and the number of queries per call (as AccumulateFp16Values guarantees).
TEST(QuantAttentionPaths, ValuesAreIndependentOfSplitsAndQueryCount) {
  const int n_kv = 1, w = 16, n_q = 24;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (const int hd : {64, 256}) {
    const QuantLayout l = QuantLayout::Make(n_kv, w, hd, 2, 32);
    std::vector<float> keys(w * hd), values(w * hd), p(n_q * w), start(n_q * hd);
    for (auto& x : keys) x = normal(rng);
    for (auto& x : values) x = normal(rng);
    for (auto& x : p) x = std::fabs(normal(rng));
    for (auto& x : start) x = normal(rng);
    std::vector<uint8_t> block(l.bytes);
    QuantizeWindow(l, keys.data(), values.data(), block.data());
    for (const Path& path : SimdPaths()) {
      SCOPED_TRACE(path.name + " head_dim " + std::to_string(hd));
      Select(path);
      std::vector<float> whole = start, split = start, single = start;
      AccumulateQuantValues(l, block.data(), 0, 0, w, p.data(), n_q, w, whole.data());
      for (const auto& [t0, t1] : {std::pair{0, 5}, {5, 6}, {6, w}}) {
        AccumulateQuantValues(l, block.data(), 0, t0, t1, p.data() + t0, n_q, w, split.data());
      }
      for (int qi = 0; qi < n_q; ++qi) {
        AccumulateQuantValues(l, block.data(), 0, 0, w, p.data() + qi * w, 1, w,
                              single.data() + qi * hd);
      }
      EXPECT_EQ(whole, split);
      EXPECT_EQ(whole, single);
    }
  }
  Restore();
}

}  // namespace
}  // namespace qevict

