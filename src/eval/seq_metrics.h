// Fidelity of a compressed run to the full cache's: token agreement and edit similarity of two
// generations, and the per-position KL divergence of two next-token distributions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace qevict {

// Share of positions i < max(|a|, |b|) where both sequences hold the same token (1 when both
// are empty).
double TokenAgreement(std::span<const int32_t> a, std::span<const int32_t> b);
// 1 - Levenshtein(a, b) / max(|a|, |b|) over tokens (1 when both are empty).
double EditSimilarity(std::span<const int32_t> a, std::span<const int32_t> b);
// log-softmax of logits, in double.
std::vector<double> LogSoftmax(std::span<const float> logits);
// KL(p || q) for log-probabilities log_p, log_q of equal size.
double KlDivergence(std::span<const double> log_p, std::span<const double> log_q);

}  // namespace qevict
