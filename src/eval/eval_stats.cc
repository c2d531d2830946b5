#include "eval/eval_stats.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace qevict {
namespace {

constexpr double kZ95 = 1.959963984540054;  // the 97.5% quantile of the standard normal

// Uniform in [0, n), n > 0, by rejection from the engine's 64-bit outputs (no modulo bias, and
// no standard distribution, whose algorithm differs between library implementations).
uint64_t Below(std::mt19937_64& engine, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = engine();
  } while (x >= limit);
  return x % n;
}

// The q-quantile of sorted values, interpolating between order statistics at q (size - 1).
double Quantile(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const size_t i = static_cast<size_t>(at);
  if (i + 1 >= sorted.size()) return sorted.back();
  return sorted[i] + (at - static_cast<double>(i)) * (sorted[i + 1] - sorted[i]);
}

}  // namespace

Interval WilsonInterval(int64_t successes, int64_t n) {
  const double nn = static_cast<double>(n);
  const double p = static_cast<double>(successes) / nn;
  const double z2 = kZ95 * kZ95;
  const double denominator = 1.0 + z2 / nn;
  const double center = (p + z2 / (2.0 * nn)) / denominator;
  const double half = kZ95 / denominator * std::sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn));
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

Interval BootstrapMeanInterval(const std::vector<double>& values, uint64_t seed, int resamples) {
  std::mt19937_64 engine(seed);
  const uint64_t n = values.size();
  std::vector<double> means(static_cast<size_t>(resamples));
  for (double& mean : means) {
    double sum = 0.0;
    for (uint64_t i = 0; i < n; ++i) sum += values[Below(engine, n)];
    mean = sum / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  return {Quantile(means, 0.025), Quantile(means, 0.975)};
}

Interval PairedBootstrapInterval(const std::vector<double>& a, const std::vector<double>& b,
                                 uint64_t seed, int resamples) {
  std::vector<double> diff(a.size());
  for (size_t i = 0; i < a.size(); ++i) diff[i] = a[i] - b[i];
  return BootstrapMeanInterval(diff, seed, resamples);
}

double McNemarExactP(int64_t b, int64_t c) {
  const int64_t n = b + c, k_max = std::min(b, c);
  if (n == 0) return 1.0;
  // log P(X = k) = log C(n, k) - n log 2, summed from k = 0 up in log space (no underflow).
  double log_term = -static_cast<double>(n) * std::log(2.0);  // k = 0
  double log_sum = log_term;
  for (int64_t k = 1; k <= k_max; ++k) {
    log_term += std::log(static_cast<double>(n - k + 1) / static_cast<double>(k));
    const double hi = std::max(log_sum, log_term), lo = std::min(log_sum, log_term);
    log_sum = hi + std::log1p(std::exp(lo - hi));
  }
  return std::min(1.0, 2.0 * std::exp(log_sum));
}

uint64_t SeedFromKey(std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (const unsigned char ch : key) {
    h ^= ch;
    h *= 0x100000001b3ULL;
  }
  h += 0x9e3779b97f4a7c15ULL;  // SplitMix64's finalizer spreads the bits
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

}  // namespace qevict
