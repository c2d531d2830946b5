#include "eval/seq_metrics.h"

#include <algorithm>
#include <cmath>

namespace qevict {

double TokenAgreement(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::max(a.size(), b.size());
  if (n == 0) return 1.0;
  size_t same = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) same += a[i] == b[i];
  return static_cast<double>(same) / static_cast<double>(n);
}

double EditSimilarity(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::max(a.size(), b.size());
  if (n == 0) return 1.0;
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return 1.0 - static_cast<double>(row[b.size()]) / static_cast<double>(n);
}

std::vector<double> LogSoftmax(std::span<const float> logits) {
  std::vector<double> out(logits.size());
  double max = -INFINITY;
  for (float x : logits) max = std::max(max, static_cast<double>(x));
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double log_z = max + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - log_z;
  return out;
}

double KlDivergence(std::span<const double> log_p, std::span<const double> log_q) {
  double kl = 0.0;
  for (size_t i = 0; i < log_p.size(); ++i) {
    const double p = std::exp(log_p[i]);
    if (p > 0.0) kl += p * (log_p[i] - log_q[i]);
  }
  return std::max(0.0, kl);
}

}  // namespace qevict
