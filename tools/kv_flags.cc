#include "tools/kv_flags.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "kv/full_cache.h"
#include "util/error.h"

namespace qevict::cli {

void AddKvFlags(CLI::App& cmd, KvFlags& flags) {
  cmd.add_option("--kv-policy", flags.policy, "KV cache policy")->capture_default_str();
  cmd.add_flag("--kv-stats", flags.stats, "print KV cache statistics on stderr at the end");
  cmd.add_flag("--json", flags.json, "with --kv-stats: one JSON object on one line");
}

void ApplyPrefillChunk(const KvFlags& flags, SessionOptions& options) {}

KvCacheFactory MakeKvCacheFactory(const KvFlags& flags) {
  if (flags.policy != "full") throw Error("unknown KV policy '" + flags.policy + "'");
  return [](const KvGeometry& g, const Rope& rope) -> std::unique_ptr<KvCache> {
    return std::make_unique<FullCache>(g, rope);
  };
}

void PrintKvStats(const KvFlags& flags, const KvStats& s) {
  if (!flags.stats) return;
  nlohmann::json j = {{"policy", flags.policy},
                      {"tokens_seen", s.tokens_seen},
                      {"tokens_resident", s.tokens_resident},
                      {"resident_bytes", s.resident_bytes()},
                      {"fp16_bytes", s.fp16_bytes},
                      {"quant_bytes", s.quant_bytes},
                      {"meta_bytes", s.meta_bytes},
                      {"cold_bytes", s.cold_bytes},
                      {"peak_bytes", s.peak_bytes},
                      {"budget_bytes", s.budget_bytes},
                      {"full_fp16_bytes", s.full_fp16_bytes},
                      {"fp16_windows", s.fp16_windows},
                      {"quant_windows", s.quant_windows},
                      {"evicted_windows", s.evicted_windows},
                      {"promotions", s.promotions},
                      {"demotions", s.demotions},
                      {"evictions", s.evictions},
                      {"routing_steps", s.routing_steps},
                      {"infeasible", s.infeasible}};
  if (flags.json) {
    std::fprintf(stderr, "%s\n", j.dump().c_str());
    return;
  }
  std::fprintf(stderr, "kv cache (%s):\n", flags.policy.c_str());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "policy") continue;
    std::fprintf(stderr, "  %-16s %s\n", it.key().c_str(), it.value().dump().c_str());
  }
}

}  // namespace qevict::cli
