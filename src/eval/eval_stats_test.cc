// The summary's statistics (eval/eval_stats.h) against known values.
#include <gtest/gtest.h>

#include <random>

#include "eval/eval_stats.h"

namespace qevict {
namespace {

TEST(EvalStatsTest, WilsonMatchesKnownIntervals) {
  const Interval a = WilsonInterval(8, 10);
  EXPECT_NEAR(a.lo, 0.490, 5e-4);
  EXPECT_NEAR(a.hi, 0.943, 5e-4);
  const Interval zero = WilsonInterval(0, 30);
  EXPECT_DOUBLE_EQ(zero.lo, 0.0);
  EXPECT_NEAR(zero.hi, 0.114, 5e-4);
  const Interval all = WilsonInterval(30, 30);
  EXPECT_NEAR(all.lo, 1.0 - 0.114, 5e-4);
  EXPECT_DOUBLE_EQ(all.hi, 1.0);
  const Interval half = WilsonInterval(50, 100);
  EXPECT_NEAR(half.lo, 0.4038, 5e-4);
  EXPECT_NEAR(half.hi, 0.5962, 5e-4);
}

TEST(EvalStatsTest, McNemarIsTheExactBinomialTest) {
  EXPECT_DOUBLE_EQ(McNemarExactP(0, 6), 0.03125);
  EXPECT_NEAR(McNemarExactP(1, 5), 0.21875, 1e-12);
  EXPECT_NEAR(McNemarExactP(5, 1), 0.21875, 1e-12);
  EXPECT_NEAR(McNemarExactP(3, 0), 0.25, 1e-12);
  EXPECT_NEAR(McNemarExactP(10, 0), 2.0 / 1024.0, 1e-15);
  EXPECT_DOUBLE_EQ(McNemarExactP(0, 0), 1.0);
  EXPECT_DOUBLE_EQ(McNemarExactP(4, 4), 1.0);  // 2 P(X <= 4) > 1
  EXPECT_NEAR(McNemarExactP(2, 8), 2.0 * (1 + 10 + 45) / 1024.0, 1e-12);
  // Large counts neither underflow nor exceed 1.
  const double tiny = McNemarExactP(0, 3000);
  EXPECT_GE(tiny, 0.0);
  EXPECT_LT(tiny, 1e-300);
  EXPECT_LE(McNemarExactP(1500, 1510), 1.0);
  EXPECT_GT(McNemarExactP(1500, 1510), 0.8);
}

TEST(EvalStatsTest, BootstrapIsDeterministic) {
  const std::vector<double> values = {0.1, 0.4, 0.35, 0.8, 0.9, 0.05, 0.6, 0.7};
  const Interval a = BootstrapMeanInterval(values, 42), b = BootstrapMeanInterval(values, 42);
  EXPECT_EQ(a.lo, b.lo);
  EXPECT_EQ(a.hi, b.hi);
  const Interval other = BootstrapMeanInterval(values, 43);
  EXPECT_TRUE(other.lo != a.lo || other.hi != a.hi);
  double mean = 0.0;
  for (double v : values) mean += v / values.size();
  EXPECT_LT(a.lo, mean);
  EXPECT_GT(a.hi, mean);
  EXPECT_GE(a.lo, 0.05);
  EXPECT_LE(a.hi, 0.9);
  // The same on every machine: mt19937_64's sequence is fixed by the standard and the mapping
  // to indices is ours.
  EXPECT_NEAR(a.lo, 0.2875, 1e-12);
  EXPECT_NEAR(a.hi, 0.69375, 1e-12);
  EXPECT_EQ(SeedFromKey("niah"), SeedFromKey("niah"));
  EXPECT_NE(SeedFromKey("niah"), SeedFromKey("niai"));
}

TEST(EvalStatsTest, BootstrapOfConstantsIsAPoint) {
  const Interval c = BootstrapMeanInterval({0.25, 0.25, 0.25}, 7);
  EXPECT_DOUBLE_EQ(c.lo, 0.25);
  EXPECT_DOUBLE_EQ(c.hi, 0.25);
  const Interval shift = PairedBootstrapInterval({0.5, 0.6, 0.7}, {0.4, 0.5, 0.6}, 7);
  EXPECT_NEAR(shift.lo, 0.1, 1e-12);
  EXPECT_NEAR(shift.hi, 0.1, 1e-12);
}

// Samples of 40 from a skewed distribution with mean 0.25 (Beta(1, 3) by inversion): the
// percentile interval covers the mean about 95% of the time.
TEST(EvalStatsTest, BootstrapCoversTheMean) {
  std::mt19937_64 engine(5);
  const double true_mean = 0.25;
  int covered = 0;
  const int trials = 300;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> sample;
    for (int i = 0; i < 40; ++i) {
      const double u = static_cast<double>(engine() >> 11) * 0x1.0p-53;
      sample.push_back(1.0 - std::cbrt(1.0 - u));
    }
    const Interval ci = BootstrapMeanInterval(sample, 1000 + t, 1000);
    covered += ci.lo <= true_mean && true_mean <= ci.hi;
  }
  EXPECT_GE(covered, trials * 88 / 100);
  EXPECT_LE(covered, trials * 99 / 100);
}

TEST(EvalStatsTest, PairedBootstrapSeesAConsistentDifference) {
  // a beats b by 0.2 on most pairs, noise on top: the interval of the difference excludes 0.
  std::vector<double> a, b;
  for (int i = 0; i < 30; ++i) {
    b.push_back(0.3 + 0.01 * (i % 7));
    a.push_back(b.back() + (i % 5 == 0 ? -0.05 : 0.2));
  }
  const Interval ci = PairedBootstrapInterval(a, b, 11);
  EXPECT_GT(ci.lo, 0.0);
  EXPECT_LT(ci.hi, 0.2);
  const Interval reversed = PairedBootstrapInterval(b, a, 11);
  EXPECT_NEAR(reversed.lo, -ci.hi, 1e-12);  // the same resamples, negated
  EXPECT_NEAR(reversed.hi, -ci.lo, 1e-12);
}

}  // namespace
}  // namespace qevict
