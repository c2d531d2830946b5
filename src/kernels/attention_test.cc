// The attention building blocks (kernels/attention.h) on every SIMD level this CPU supports and
// every Highway target compiled and supported, against the portable reference
// (attention_impl::portable) on random data.
//
// Tolerances: a dot product of n terms in fp32 carries at most about n units of roundoff
// (u = 2^-24) times the sum of the terms' magnitudes, whatever the order; two orders differ by
// at most twice that. Each check allows 2 (n + 1) u sum|terms|.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/attention_impl.h"
#include "kernels/simd_paths_test_util.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

namespace qevict {
namespace {

namespace ref = attention_impl::portable;
namespace hw = attention_impl::highway;

constexpr double kU = 1.0 / (1 << 24);  // unit roundoff of fp32

using Path = testing::SimdPath;

// Runs `body` once per path, with the path selected; restores the detected level afterwards.
void ForEachPath(const std::function<void(const Path&)>& body) {
  for (const Path& path : testing::SimdPaths()) {
    SCOPED_TRACE(path.name);
    testing::SelectSimdPath(path);
    body(path);
    hw::ForceTargetsForTest(0);
  }
  SetSimdLevel(DetectedSimdLevel());
}

struct Rng {
  std::mt19937 gen{20240611};
  float Uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen); }
  std::vector<float> Floats(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (auto& x : v) x = Uniform(lo, hi);
    return v;
  }
  std::vector<uint16_t> Halves(size_t n, float lo, float hi) {
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = Fp32ToFp16(Uniform(lo, hi));
    return v;
  }
};

constexpr int kHeadDims[] = {64, 128, 256, 72, 40};
constexpr int kQueries[] = {1, 3, 4, 24, 32, 48, 64};  // 48, 64: 3 and 4 AVX-512 vectors
constexpr int64_t kKeyCounts[] = {1, 7, 37, 100};

// body(head_dim, n_q, keys) for every combination of the shapes above, on every path.
void ForEachShape(const std::function<void(int, int, int64_t)>& body) {
  ForEachPath([&](const Path&) {
    for (const int hd : kHeadDims) {
      for (const int n_q : kQueries) {
        for (const int64_t n : kKeyCounts) {
          SCOPED_TRACE("head_dim " + std::to_string(hd) + " n_q " + std::to_string(n_q) + " keys " +
                       std::to_string(n));
          body(hd, n_q, n);
        }
      }
    }
  });
}

TEST(AttentionKernels, PathsCoverEveryLevelAndTarget) {
  const std::vector<Path> paths = testing::SimdPaths();
  int targets = 0;
  std::string names;
  for (const Path& p : paths) {
    targets += p.target != 0;
    names += p.name + "; ";
  }
  RecordProperty("paths", names);
  std::printf("paths: %s\n", names.c_str());
  EXPECT_EQ(paths.size() - targets, static_cast<size_t>(DetectedSimdLevel()) + 1);
#if HWY_ARCH_X86
  if (DetectedSimdLevel() >= SimdLevel::kAvx2) {
    EXPECT_GE(targets, 2);  // AVX2 and the fallback
  }
  if (DetectedSimdLevel() >= SimdLevel::kAvx512) {
    EXPECT_GE(targets, 3);  // and AVX3
  }
#endif
}

// The level switch changes the code that runs: portable, Highway limited to AVX2, Highway's best.
TEST(AttentionKernels, SimdLevelSelectsTheCodePath) {
#if HWY_ARCH_X86
  SetSimdLevel(SimdLevel::kPortable);
  EXPECT_FALSE(hw::Enabled());
  EXPECT_EQ(hw::ActiveTarget(), 0);
  // exp through the C library and through Highway's polynomial differ in some last bits.
  Rng rng;
  const std::vector<float> scores = rng.Floats(1000, -20.0f, 0.0f);
  std::vector<float> a = scores, b = scores;
  ExpShiftSum(a.data(), static_cast<int64_t>(a.size()), 0.0f);
  ref::ExpShiftSum(b.data(), static_cast<int64_t>(b.size()), 0.0f);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  if (DetectedSimdLevel() >= SimdLevel::kAvx2) {
    SetSimdLevel(SimdLevel::kAvx2);
    EXPECT_TRUE(hw::Enabled());
    EXPECT_EQ(hw::ActiveTarget(), HWY_AVX2);
    a = scores;
    ExpShiftSum(a.data(), static_cast<int64_t>(a.size()), 0.0f);
    EXPECT_NE(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  }
  if (DetectedSimdLevel() >= SimdLevel::kAvx512) {
    SetSimdLevel(SimdLevel::kAvx512);
    const int64_t target = hw::ActiveTarget();
    EXPECT_TRUE(target == HWY_AVX3 || target == HWY_AVX3_DL) << hwy::TargetName(target);
  }
  SetSimdLevel(DetectedSimdLevel());
#else
  EXPECT_TRUE(hw::Enabled());
  EXPECT_NE(hw::ActiveTarget(), 0);
#endif
}

TEST(AttentionKernels, ScoreFp16KeysMatchesReference) {
  Rng rng;
  const float scale = 0.37f;
  ForEachShape([&](int hd, int n_q, int64_t n) {
    const int64_t stride = hd + 24, ld = n + 5;
    const std::vector<float> q = rng.Floats(static_cast<size_t>(n_q) * hd, -2.0f, 2.0f);
    const std::vector<uint16_t> k = rng.Halves(n * stride, -2.0f, 2.0f);
    std::vector<float> got(n_q * ld, 1234.5f), want(n_q * ld, 1234.5f);
    ScoreFp16Keys(q.data(), n_q, k.data(), stride, n, hd, scale, got.data(), ld);
    ref::ScoreFp16Keys(q.data(), n_q, k.data(), stride, n, hd, scale, want.data(), ld);
    for (int qi = 0; qi < n_q; ++qi) {
      for (int64_t j = 0; j < ld; ++j) {
        const int64_t at = qi * ld + j;
        if (j >= n) {
          ASSERT_EQ(got[at], 1234.5f) << "wrote past n at query " << qi << " key " << j;
          continue;
        }
        double magnitude = 0.0;
        for (int x = 0; x < hd; ++x) {
          magnitude += std::fabs(q[qi * hd + x] * Fp16ToFp32(k[j * stride + x]));
        }
        const double tol = 2.0 * (hd + 1) * kU * magnitude * scale;
        ASSERT_NEAR(got[at], want[at], tol) << "query " << qi << " key " << j;
      }
    }
  });
}

TEST(AttentionKernels, AccumulateFp16ValuesMatchesReference) {
  Rng rng;
  ForEachShape([&](int hd, int n_q, int64_t n) {
    const int64_t stride = hd + 8, ld = n + 3;
    const std::vector<float> p = rng.Floats(n_q * ld, 0.0f, 1.0f);
    const std::vector<uint16_t> v = rng.Halves(n * stride, -3.0f, 3.0f);
    const std::vector<float> start = rng.Floats(static_cast<size_t>(n_q) * hd, -1.0f, 1.0f);
    std::vector<float> got = start, want = start;
    AccumulateFp16Values(p.data(), n_q, ld, v.data(), stride, n, hd, got.data());
    ref::AccumulateFp16Values(p.data(), n_q, ld, v.data(), stride, n, hd, want.data());
    for (int qi = 0; qi < n_q; ++qi) {
      for (int x = 0; x < hd; ++x) {
        double magnitude = std::fabs(start[qi * hd + x]);
        for (int64_t j = 0; j < n; ++j) {
          magnitude += std::fabs(p[qi * ld + j] * Fp16ToFp32(v[j * stride + x]));
        }
        const double tol = 2.0 * (n + 1) * kU * magnitude;
        ASSERT_NEAR(got[qi * hd + x], want[qi * hd + x], tol) << "query " << qi << " d " << x;
      }
    }
  });
}

// Each output element receives fma(p_j, v_j, .) in key order whatever the split of the keys
// into calls and the number of queries per call: the cache layouts rely on it for bit-exact
// results (policy_test).
TEST(AttentionKernels, AccumulateIsIndependentOfSplitsAndQueryCount) {
  Rng rng;
  ForEachPath([&](const Path&) {
    for (const int hd : {64, 256, 72}) {
      const int n_q = 24;
      const int64_t n = 77, ld = n;
      const std::vector<float> p = rng.Floats(n_q * ld, 0.0f, 1.0f);
      const std::vector<uint16_t> v = rng.Halves(n * hd, -3.0f, 3.0f);
      const std::vector<float> start = rng.Floats(static_cast<size_t>(n_q) * hd, -1.0f, 1.0f);
      std::vector<float> whole = start, split = start, single = start;
      AccumulateFp16Values(p.data(), n_q, ld, v.data(), hd, n, hd, whole.data());
      for (const auto& [from, to] : {std::pair<int64_t, int64_t>{0, 5}, {5, 40}, {40, n}}) {
        AccumulateFp16Values(p.data() + from, n_q, ld, v.data() + from * hd, hd, to - from, hd,
                             split.data());
      }
      for (int qi = 0; qi < n_q; ++qi) {
        AccumulateFp16Values(p.data() + qi * ld, 1, ld, v.data(), hd, n, hd,
                             single.data() + qi * hd);
      }
      EXPECT_EQ(0, std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)))
          << "head_dim " << hd;
      EXPECT_EQ(0, std::memcmp(whole.data(), single.data(), whole.size() * sizeof(float)))
          << "head_dim " << hd;
    }
  });
}

// A key's score does not depend on which call it comes in.
TEST(AttentionKernels, ScoreIsIndependentOfSplits) {
  Rng rng;
  ForEachPath([&](const Path&) {
    for (const int n_q : {3, 24}) {
      const int hd = 64;
      const int64_t n = 53;
      const std::vector<float> q = rng.Floats(static_cast<size_t>(n_q) * hd, -2.0f, 2.0f);
      const std::vector<uint16_t> k = rng.Halves(n * hd, -2.0f, 2.0f);
      std::vector<float> whole(n_q * n), split(n_q * n);
      ScoreFp16Keys(q.data(), n_q, k.data(), hd, n, hd, 0.125f, whole.data(), n);
      for (const auto& [from, to] : {std::pair<int64_t, int64_t>{0, 1}, {1, 30}, {30, n}}) {
        ScoreFp16Keys(q.data(), n_q, k.data() + from * hd, hd, to - from, hd, 0.125f,
                      split.data() + from, n);
      }
      EXPECT_EQ(0, std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)))
          << "n_q " << n_q;
    }
  });
}

TEST(AttentionKernels, ExpShiftSumMatchesReference) {
  Rng rng;
  ForEachPath([&](const Path&) {
    for (const int64_t n : {1, 3, 8, 15, 16, 17, 100, 1000}) {
      SCOPED_TRACE("n " + std::to_string(n));
      std::vector<float> x = rng.Floats(n, -30.0f, 5.0f);
      x[0] = 5.0f;                                                // the max
      if (n > 2) x[1] = -std::numeric_limits<float>::infinity();  // a masked score
      if (n > 3) x[2] = -200.0f;                                  // underflows to 0
      std::vector<float> got = x, want = x;
      const float sum_got = ExpShiftSum(got.data(), n, 5.0f);
      const float sum_want = ref::ExpShiftSum(want.data(), n, 5.0f);
      double total = 0.0;
      for (int64_t j = 0; j < n; ++j) {
        // Both exps are within a few ulps; values below 2^-126 may be flushed.
        ASSERT_NEAR(got[j], want[j], 4.0 * 2.0 * kU * want[j] + 1e-37) << "j " << j;
        total += want[j];
      }
      EXPECT_NEAR(sum_got, sum_want, (2.0 * (n + 1) + 8.0) * kU * total);
    }
  });
}

TEST(AttentionKernels, MaxOfMatchesReferenceExactly) {
  Rng rng;
  ForEachPath([&](const Path&) {
    for (const int64_t n : {1, 2, 15, 16, 17, 33, 100, 1000}) {
      std::vector<float> x = rng.Floats(n, -50.0f, 50.0f);
      if (n > 2) x[n / 2] = -std::numeric_limits<float>::infinity();
      for (const int64_t at : {int64_t{0}, n / 3, n - 1}) {  // the max at the start, inside, last
        std::vector<float> y = x;
        y[at] = 60.0f + static_cast<float>(at);
        ASSERT_EQ(MaxOf(y.data(), n), ref::MaxOf(y.data(), n)) << "n " << n << " at " << at;
      }
    }
    const float all_masked[3] = {-HUGE_VALF, -HUGE_VALF, -HUGE_VALF};
    EXPECT_EQ(MaxOf(all_masked, 3), -HUGE_VALF);
  });
}

bool IsNan16(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

TEST(AttentionKernels, Fp16ConversionsMatchReferenceExactly) {
  std::vector<uint16_t> halves(1 << 16);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  Rng rng;
  std::vector<float> floats;
  for (int i = 0; i < 20000; ++i) {
    const float mag = std::ldexp(rng.Uniform(1.0f, 2.0f), static_cast<int>(rng.Uniform(-30, 20)));
    floats.push_back(rng.Uniform(0, 1) < 0.5f ? -mag : mag);  // subnormal halves to overflow
  }
  for (const uint16_t h : halves) {  // exact halfway cases between neighbouring halves
    const float f = Fp16ToFp32(h);
    if (std::isfinite(f) && (h & 0x7fff) < 0x7bff) {
      floats.push_back((f + Fp16ToFp32(static_cast<uint16_t>(h + 1))) / 2);
    }
  }
  floats.push_back(std::numeric_limits<float>::infinity());
  floats.push_back(-std::numeric_limits<float>::infinity());
  floats.push_back(std::numeric_limits<float>::quiet_NaN());
  floats.push_back(0.0f);
  floats.push_back(-0.0f);
  ForEachPath([&](const Path&) {
    for (const int64_t n : {int64_t{1}, int64_t{13}, static_cast<int64_t>(halves.size())}) {
      std::vector<float> got(n), want(n);
      Fp16ToFp32Row(halves.data() + 1, got.data(), n - 1);
      ref::Fp16ToFp32Row(halves.data() + 1, want.data(), n - 1);
      for (int64_t i = 0; i + 1 < n; ++i) {
        if (std::isnan(want[i])) {
          ASSERT_TRUE(std::isnan(got[i])) << "half " << halves[i + 1];
        } else {
          ASSERT_EQ(0, std::memcmp(&got[i], &want[i], sizeof(float))) << "half " << halves[i + 1];
        }
      }
    }
    for (const int64_t n : {int64_t{1}, int64_t{13}, static_cast<int64_t>(floats.size())}) {
      std::vector<uint16_t> got(n), want(n);
      Fp32ToFp16Row(floats.data(), got.data(), n);
      ref::Fp32ToFp16Row(floats.data(), want.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        if (IsNan16(want[i])) {
          ASSERT_TRUE(IsNan16(got[i])) << "float " << floats[i];
        } else {
          ASSERT_EQ(got[i], want[i]) << "float " << floats[i];
        }
      }
    }
  });
}

}  // namespace
}  // namespace qevict
