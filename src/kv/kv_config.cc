#include "kv/kv_config.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "kv/kv_cache.h"
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
  if (budget_bytes > 0) return budget_bytes;
  if (budget >= 1.0) return std::nullopt;
  return static_cast<int64_t>(std::floor(
      budget * static_cast<double>(geometry.full_bytes(std::max<int64_t>(0, run_tokens)))));
}

std::optional<int64_t> KvConfig::GlobalBudgetBytes(int64_t run_tokens,
                                                   const KvGeometry& geometry) const {
  const std::optional<int64_t> total = BudgetBytes(run_tokens, geometry);
  if (!total) return std::nullopt;
  return std::max<int64_t>(0, *total - geometry.ring_bytes(std::max<int64_t>(0, run_tokens)));
}

const std::vector<std::string_view>& KnownKvPolicyNames() {
  static const std::vector<std::string_view> names = {
      "full", "streaming", "h2o",  "tova", "snapkv",
      "pyramidkv", "kivi", "mikv", "qevict", "qevict-qa",
      "qevict-zip", "kvzip"};
  return names;
}

void KvConfig::Validate() const {
  const auto& names = KnownKvPolicyNames();
  Require(std::find(names.begin(), names.end(), policy) != names.end(),
          "unknown --kv-policy '" + policy + "' (expected one of: " + JoinNames() + ")");
  Require(std::isfinite(budget) && budget > 0.0 && budget <= 1.0,
          "--kv-budget must be in (0, 1] (a fraction of the fp16 cache of prompt + new tokens), got " +
              std::to_string(budget));
  Require(budget_bytes == -1 || budget_bytes > 0,
          "--kv-budget-bytes must be a positive number of bytes, got " +
              std::to_string(budget_bytes));
  Require(budget_bytes == -1 || budget == 1.0,
          "give either --kv-budget (a fraction) or --kv-budget-bytes (a byte cap), not both: "
          "drop one of them");
  Require(policy != "full" || (budget == 1.0 && budget_bytes == -1),
          "--kv-policy full keeps every token and cannot meet a budget; choose a compressing policy "
          "(e.g. qevict) to use --kv-budget / --kv-budget-bytes");
  Require(window >= 1 && window <= 1024, "--kv-window must be in [1, 1024], got " +
                                             std::to_string(window));
  Require(sinks >= 0 && sinks <= 1024, "--kv-sinks must be in [0, 1024], got " +
                                           std::to_string(sinks));
  Require(recent >= 0 && recent <= 1 << 20, "--kv-recent must be >= 0, got " +
                                                std::to_string(recent));
  Require(bits == 2 || bits == 4 || bits == 8,
          "--kv-bits must be 2, 4 or 8, got " + std::to_string(bits));
  Require(value_group >= 1, "value group must be >= 1, got " + std::to_string(value_group));
  Require(route_every >= 1, "--kv-route-every must be >= 1, got " + std::to_string(route_every));
  Require(std::isfinite(q_share) && q_share >= 0.0 && q_share <= 1.0,
          "--kv-q-share must be in [0, 1], got " + std::to_string(q_share));
  Require(std::isfinite(prefill_q_share) && prefill_q_share >= 0.0 && prefill_q_share <= 1.0,
          "--kv-prefill-q-share must be in [0, 1], got " + std::to_string(prefill_q_share));
  Require(std::isfinite(hysteresis) && hysteresis >= 0.0,
          "--kv-hysteresis must be >= 0, got " + std::to_string(hysteresis));
  Require(prefill_chunk >= 0, "--kv-prefill-chunk must be >= 0 (0 = route only after the "
                              "prompt), got " + std::to_string(prefill_chunk));
  Require(std::isfinite(score_decay) && score_decay > 0.0 && score_decay <= 1.0,
          "score decay must be in (0, 1], got " + std::to_string(score_decay));
  Require(snapkv_window >= 1, "snapkv observation window must be >= 1, got " +
                                  std::to_string(snapkv_window));
  Require(query_kernel >= 1 && query_kernel % 2 == 1,
          "qevict-qa query pooling kernel must be odd and >= 1, got " +
              std::to_string(query_kernel));
  Require(kivi_group >= 1 && kivi_group <= 1024,
          "kivi group must be in [1, 1024], got " + std::to_string(kivi_group));
  Require(std::isfinite(h2o_recent_share) && h2o_recent_share >= 0.0 && h2o_recent_share <= 1.0,
          "h2o recent share must be in [0, 1], got " + std::to_string(h2o_recent_share));
  Require(snapkv_kernel >= 1 && snapkv_kernel % 2 == 1,
          "snapkv pooling kernel must be odd and >= 1, got " + std::to_string(snapkv_kernel));
  Require(reconstruction_chunk >= 16,
          "reconstruction_chunk must be >= 16 tokens, got " + std::to_string(reconstruction_chunk));
  Require(expected_future >= 1,
          "expected_future must be >= 1 position, got " + std::to_string(expected_future));
  Require(std::isfinite(pyramid_beta) && pyramid_beta >= 1.0,
          "pyramidkv beta must be >= 1, got " + std::to_string(pyramid_beta));
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

const std::vector<KvOptionDoc>& KvOptionDocs() {
  static const std::vector<KvOptionDoc> docs = {
      {"--kv-policy", "qevict", "cache policy: full streaming h2o tova snapkv pyramidkv kivi mikv qevict qevict-qa qevict-zip kvzip", false},
      {"--kv-budget", "1.0", "resident KV bytes as a fraction of the fp16 cache of prompt + new tokens (1.0 = no limit)", false},
      {"--kv-budget-bytes", "-1", "absolute cap on resident KV bytes (replaces --kv-budget)", false},
      {"--kv-bits", "2", "bit-width of the quantized tier: 2, 4 or 8", false},
      {"--kv-window", "8", "W: tokens per window (the unit of tier decisions)", false},
      {"--kv-sinks", "5", "S: first tokens kept in fp16", false},
      {"--kv-recent", "32", "R: last tokens kept in fp16", false},
      {"--kv-route-every", "8", "Ω: generated tokens between routing steps", false},
      {"--kv-q-share", "0.5", "share of the band's bytes given to the quantized tier", true},
      {"--kv-recovery", "paper", "promoted windows hold dequantized codes (paper) or exact fp16 originals from a cold store (exact)", false},
      {"--kv-prefill-chunk", "512", "with a budget, route after every prompt chunk of this many tokens so the cache peaks at budget + one chunk (0 = the paper's mode: route once, after the whole prompt)", true},
      {"--kv-hysteresis", "0", "a quantized window is promoted only if its score beats the fp16 window's by this fraction", true},
      {"--kv-prefill-q-share", "1", "qevict/qevict-qa between prompt chunks (bounded prefill): the quantized tier's share of the band, so that windows are archived rather than evicted before the prompt's end ranks them", true},
      {"--kv-query-kernel", "7", "qevict-qa: max-pool kernel over the question's token attention (SnapKV's, like snapkv_kernel)", false},
      {"--kv-score-source", "reconstruction", "qevict-zip/kvzip: scores of the first routing: reconstruction (KVzip), expected-attention, key-norm", false},
      {"(config) reconstruction_chunk", "512", "reconstruction scoring: context tokens per forward pass", true},
      {"(config) expected_future", "512", "expected attention: future positions the query statistics are projected over", true},
      {"--kv-score", "cumulative", "importance: cumulative (H2O), decay, normalized (ZipCache)", true},
      {"(config) score_decay", "0.95", "per-query decay factor of --kv-score decay", true},
      {"(config) value_group", "32", "values are quantized per token in groups of this many channels", true},
      {"(config) snapkv_window", "32", "snapkv/pyramidkv: last prompt queries that score the prompt", false},
      {"(config) snapkv_kernel", "7", "snapkv/pyramidkv: max-pool kernel over token scores", false},
      {"(config) pyramid_beta", "20", "pyramidkv: last layer's band budget is mean/beta, linear in depth", false},
      {"(config) kivi_group", "32", "kivi: tokens per key group (kivi's window; other policies use --kv-window)", false},
      {"(config) h2o_recent_share", "0.5", "h2o: share of the band budget kept for the newest windows (the rest: heavy hitters)", false},
      {"(config) cold_store_dir", "$TMPDIR or /tmp", "directory of the exact-recovery cold-store file", true},
      {"--kv-stats", "off", "print cache statistics after a run", false},
  };
  return docs;
}

std::string KvConfigKey(const KvConfig& c) {
  std::ostringstream key;
  key.precision(17);
  key << c.policy << '|' << c.budget << '|' << c.budget_bytes << '|' << c.window << '|'
      << c.sinks << '|' << c.recent << '|' << c.bits << '|' << c.value_group << '|'
      << c.route_every << '|' << c.q_share << '|' << c.prefill_q_share << '|' << c.hysteresis
      << '|' << c.prefill_chunk << '|' << static_cast<int>(c.score) << '|' << c.score_decay
      << '|' << static_cast<int>(c.recovery) << '|' << c.query_kernel << '|'
      << c.cold_store_dir << '|' << c.snapkv_window << '|' << c.snapkv_kernel << '|'
      << c.pyramid_beta << '|' << c.h2o_recent_share << '|' << c.kivi_group;
  return key.str();
}

}  // namespace qevict
