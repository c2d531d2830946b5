#include "kv/kv_config.h"

#include <algorithm>
#include <cmath>

#include "kv/kv_cache.h"
#include "kv/kv_options.h"
#include "util/error.h"

namespace qevict {
namespace {

std::string JoinNames() {
  std::string joined;
  for (std::string_view name : KnownKvPolicyNames()) {
    if (!joined.empty()) joined += ", ";
    joined += name;
  }
  return joined;
}

void Require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

}  // namespace

std::optional<int64_t> KvConfig::BudgetBytes(int64_t run_tokens,
                                             const KvGeometry& geometry) const {
  const int64_t run = std::max<int64_t>(0, run_tokens);
  if (budget_scope == BudgetScope::kGlobal) {
    const std::optional<int64_t> global = GlobalBudgetBytes(run, geometry);
    if (!global) return std::nullopt;
    return *global + geometry.ring_bytes(run);
  }
  if (budget_bytes > 0) return budget_bytes;
  if (budget >= 1.0) return std::nullopt;
  return static_cast<int64_t>(std::floor(budget * static_cast<double>(geometry.full_bytes(run))));
}

std::optional<int64_t> KvConfig::GlobalBudgetBytes(int64_t run_tokens,
                                                   const KvGeometry& geometry) const {
  const int64_t run = std::max<int64_t>(0, run_tokens);
  if (budget_scope == BudgetScope::kGlobal) {
    if (budget_bytes > 0) return budget_bytes;
    if (budget >= 1.0) return std::nullopt;
    return static_cast<int64_t>(
        std::floor(budget * static_cast<double>(geometry.fp16_bytes_per_token() * run)));
  }
  const std::optional<int64_t> total = BudgetBytes(run, geometry);
  if (!total) return std::nullopt;
  return std::max<int64_t>(0, *total - geometry.ring_bytes(run));
}

double KvConfig::BudgetFractionFor(int64_t global_bytes, int64_t run_tokens,
                                   const KvGeometry& geometry) const {
  const int64_t run = std::max<int64_t>(run_tokens, 1);
  if (budget_scope == BudgetScope::kGlobal) {
    return static_cast<double>(global_bytes) /
           static_cast<double>(geometry.fp16_bytes_per_token() * run);
  }
  return static_cast<double>(global_bytes + geometry.ring_bytes(run)) /
         static_cast<double>(geometry.full_bytes(run));
}

void KvConfig::Validate() const {
  const auto& names = KnownKvPolicyNames();
  Require(std::find(names.begin(), names.end(), policy) != names.end(),
          "unknown --kv-policy '" + policy + "' (expected one of: " + JoinNames() + ")");
  // Each option against its own range (kv_options.cc and the policies' files declare them).
  for (const KvOptionDef* def : KvOptions()) {
    const KvValue value = KvOptionValue(*this, *def);
    Require(KvValueInRange(*def, value),
            KvOptionFlag(*def) + " must be " + KvOptionRangeText(*def) +
                std::string(def->range_note) + ", got " + KvValueText(*def, value));
  }
  for (const auto& [key, value] : policy_options) {
    const KvOptionDef* def = FindKvOption(key);
    Require(def != nullptr && def->get == nullptr, "unknown policy option '" + key + "'");
  }
  Require(budget_bytes == -1 || budget == 1.0,
          "give either --kv-budget (a fraction) or --kv-budget-bytes (a byte cap), not both: "
          "drop one of them");
  Require(policy != "full" || (budget == 1.0 && budget_bytes == -1),
          "--kv-policy full keeps every token and cannot meet a budget; choose a compressing policy "
          "(e.g. qevict) to use --kv-budget / --kv-budget-bytes");
}

ScoreSource ParseScoreSource(std::string_view text) {
  if (text == "reconstruction") return ScoreSource::kReconstruction;
  if (text == "expected-attention") return ScoreSource::kExpectedAttention;
  if (text == "key-norm") return ScoreSource::kKeyNorm;
  throw Error("--kv-score-source must be 'reconstruction', 'expected-attention' or 'key-norm', got '" +
              std::string(text) + "'");
}

const char* ScoreSourceName(ScoreSource source) {
  switch (source) {
    case ScoreSource::kExpectedAttention: return "expected-attention";
    case ScoreSource::kKeyNorm: return "key-norm";
    default: return "reconstruction";
  }
}

BudgetScope ParseBudgetScope(std::string_view text) {
  if (text == "all") return BudgetScope::kAll;
  if (text == "global") return BudgetScope::kGlobal;
  throw Error("--kv-budget-scope must be 'all' or 'global', got '" + std::string(text) + "'");
}

const char* BudgetScopeName(BudgetScope scope) {
  return scope == BudgetScope::kGlobal ? "global" : "all";
}

RecoveryFidelity ParseRecoveryFidelity(std::string_view text) {
  if (text == "paper") return RecoveryFidelity::kPaper;
  if (text == "exact") return RecoveryFidelity::kExact;
  throw Error("--kv-recovery must be 'paper' or 'exact', got '" + std::string(text) + "'");
}

ScoreMode ParseScoreMode(std::string_view text) {
  if (text == "cumulative") return ScoreMode::kCumulative;
  if (text == "decay") return ScoreMode::kDecay;
  if (text == "normalized") return ScoreMode::kNormalized;
  throw Error("--kv-score must be 'cumulative', 'decay' or 'normalized', got '" +
              std::string(text) + "'");
}

const char* RecoveryFidelityName(RecoveryFidelity fidelity) {
  return fidelity == RecoveryFidelity::kExact ? "exact" : "paper";
}

const char* ScoreModeName(ScoreMode mode) {
  switch (mode) {
    case ScoreMode::kDecay: return "decay";
    case ScoreMode::kNormalized: return "normalized";
    default: return "cumulative";
  }
}

}  // namespace qevict
