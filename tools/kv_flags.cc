#include "tools/kv_flags.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/kv_stats_json.h"
#include "policy/registry.h"
#include "util/error.h"

namespace qevict::cli {

KvConfig KvFlags::Resolve() const {
  KvConfig c = config;
  c.policy = policy;
  c.recovery = ParseRecoveryFidelity(recovery);
  c.score = ParseScoreMode(score);
  c.print_stats = stats;
  c.Validate();
  return c;
}

void AddKvFlags(CLI::App& cmd, KvFlags& f) {
  std::string names;
  for (const std::string& n : PolicyNames()) names += (names.empty() ? "" : ", ") + n;
  KvConfig& c = f.config;
  const std::string group = "KV cache";
  cmd.add_option("--kv-policy", f.policy, "cache policy: " + names)
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-budget", c.budget,
                 "resident KV bytes as a fraction of an fp16 cache of prompt + new tokens, (0, 1]")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-budget-bytes", c.budget_bytes, "absolute cap on resident KV bytes")
      ->group(group);
  cmd.add_option("--kv-bits", c.bits, "bits of the quantized tier: 2, 4 or 8")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-window", c.window, "tokens per window")->capture_default_str()->group(group);
  cmd.add_option("--kv-sinks", c.sinks, "first tokens kept in fp16")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-recent", c.recent, "last tokens kept in fp16")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-route-every", c.route_every, "generated tokens between routing steps")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-q-share", c.q_share, "share of the band's bytes for the quantized tier")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-prefill-q-share", c.prefill_q_share,
                 "qevict/qevict-qa between prompt chunks: the quantized tier's share of the band "
                 "(1: archive rather than evict until the prompt's end ranks the windows)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-hysteresis", c.hysteresis,
                 "margin a quantized window's score must exceed an fp16 window's by to swap")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-score", f.score, "importance: cumulative, decay or normalized")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-score-decay", c.score_decay, "decay per query for --kv-score decay")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-recovery", f.recovery,
                 "what promotion restores: paper (dequantized codes) or exact (cold store)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-cold-dir", c.cold_store_dir, "directory of the exact-recovery cold store")
      ->group(group);
  cmd.add_option("--kv-prefill-chunk", c.prefill_chunk,
                 "with a budget, route after every prompt chunk of this many tokens: the cache peaks "
                 "at budget + one chunk (0: route once, after the whole prompt, as the paper)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-query-kernel", c.query_kernel,
                 "qevict-qa: max-pool kernel over the question's token attention (odd)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-snapkv-window", c.snapkv_window, "snapkv/pyramidkv observation window")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-snapkv-kernel", c.snapkv_kernel, "snapkv/pyramidkv max-pool kernel")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-pyramid-beta", c.pyramid_beta, "pyramidkv: the last layer gets the mean band budget / beta")
      ->capture_default_str()
      ->group(group);
  cmd.add_flag("--kv-stats", f.stats, "print KV cache statistics on stderr at the end")
      ->group(group);
  cmd.add_flag("--json", f.json, "with --kv-stats: one JSON object on one line")->group(group);
}

void ApplyPrefillChunk(const KvFlags& flags, SessionOptions& options) {
  options.prefill_chunk = flags.config.ForwardBatch(options.prefill_chunk);
}

KvCacheFactory MakeKvCacheFactory(const KvFlags& flags) {
  const KvConfig config = flags.Resolve();
  return [config](const KvGeometry& g, const Rope& rope) {
    return CreateKvCache(config, g, rope);
  };
}

bool WarnIfInfeasible(const KvStats& s) {
  if (!s.infeasible) return false;
  std::fprintf(stderr, "warning: the KV budget cannot be met: %s\n", s.note.c_str());
  return true;
}

void PrintKvStats(const KvFlags& flags, const KvStats& s) {
  if (!flags.stats) return;
  nlohmann::json j = KvStatsToJson(s);
  j["policy"] = flags.policy;
  if (flags.json) {
    std::fprintf(stderr, "%s\n", j.dump().c_str());
    return;
  }
  std::fprintf(stderr, "kv cache (%s):\n", flags.policy.c_str());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "policy") continue;
    std::fprintf(stderr, "  %-18s %s\n", it.key().c_str(), it.value().dump().c_str());
  }
}

}  // namespace qevict::cli
