// Statistics of the evaluation's aggregates (docs/evaluation.md, "Summary"): 95% intervals of a
// mean and of a paired difference, and the exact McNemar test. Everything is deterministic and
// portable: the bootstrap draws from std::mt19937_64 (whose sequence the standard fixes) through
// our own uniform mapping, so every machine gives the same intervals for the same seed.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace qevict {

struct Interval {
  double lo = 0.0;
  double hi = 0.0;
};

// Wilson score interval (95%) of a proportion of `successes` in `n` trials, n > 0.
Interval WilsonInterval(int64_t successes, int64_t n);

inline constexpr int kBootstrapResamples = 2000;

// Percentile bootstrap interval (95%) of the mean of `values` (non-empty): `resamples` means of
// n values drawn with replacement; lo and hi are their 2.5% and 97.5% quantiles (linear
// interpolation between order statistics).
Interval BootstrapMeanInterval(const std::vector<double>& values, uint64_t seed,
                               int resamples = kBootstrapResamples);

// Paired bootstrap interval (95%) of mean(a) - mean(b): the bootstrap of the per-pair
// differences a[i] - b[i]. a and b have the same, non-zero size.
Interval PairedBootstrapInterval(const std::vector<double>& a, const std::vector<double>& b,
                                 uint64_t seed, int resamples = kBootstrapResamples);

// Exact two-sided McNemar test on the discordant pairs: b pairs where only the first is correct,
// c where only the second is. p = min(1, 2 P(X <= min(b, c))) for X ~ Binomial(b + c, 1/2);
// 1 when there is no discordant pair.
double McNemarExactP(int64_t b, int64_t c);

// A 64-bit seed from a text (FNV-1a, then the SplitMix64 finalizer): the key of a cell.
uint64_t SeedFromKey(std::string_view key);

}  // namespace qevict
