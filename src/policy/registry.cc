#include "policy/registry.h"

#include "kv/full_cache.h"
#include "kv/tiered_cache.h"
#include "policy/policies.h"
#include "util/error.h"

namespace qevict {

const std::vector<PolicyInfo>& PolicyInfos() {
  static const std::vector<PolicyInfo> infos = {
      {"full", "no compression: every token in fp16 (the reference)", nullptr},
      {"streaming", "StreamingLLM: sinks + the most recent windows, oldest evicted",
       &MakeStreamingPolicy},
      {"h2o", "H2O: half the band heavy-hitter windows by cumulative attention, half the newest",
       &MakeH2oPolicy},
      {"tova", "TOVA: evicts the windows the latest query attends least", &MakeTovaPolicy},
      {"snapkv",
       "SnapKV: once after the prompt, pooled attention of the last prompt queries, max over heads",
       &MakeSnapKvPolicy},
      {"pyramidkv", "PyramidKV: SnapKV selection with budgets decreasing linearly with depth",
       &MakePyramidKvPolicy},
      {"kivi", "KIVI: all but the recent tokens at b bits, nothing evicted (may be infeasible)",
       &MakeKiviPolicy},
      {"mikv", "MiKV: important windows fp16, the rest quantized, evict only when needed; no promotion",
       &MakeMikvPolicy},
      {"qevict",
       "QEvict (the paper): fp16 / quantized / evicted windows by cumulative attention, promotion",
       &MakeQevictPolicy},
      {"qevict-qa",
       "QEvict ranked by each prompt's pooled question attention + decode mass since (ours)",
       &MakeQevictQaPolicy},
      {"qevict-zip",
       "QEvict whose first routing ranks by a query-agnostic score (KVzip reconstruction by "
       "default) + attention mass since (ours)",
       &MakeQevictZipPolicy},
      {"kvzip",
       "KVzip: once after the prompt, fp16 windows by reconstruction score (--kv-score-source)",
       &MakeKvzipPolicy},
  };
  return infos;
}

std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (const PolicyInfo& info : PolicyInfos()) names.emplace_back(info.name);
  return names;
}

std::string PolicyDescription(std::string_view name) {
  for (const PolicyInfo& info : PolicyInfos()) {
    if (name == info.name) return info.description;
  }
  throw Error("unknown KV cache policy '" + std::string(name) + "'");
}

KvConfig PolicyLayout(const KvConfig& config) {
  KvConfig layout = config;
  if (config.policy == "kivi") layout.window = config.kivi_group;
  return layout;
}

std::unique_ptr<Policy> MakePolicy(const KvConfig& config) {
  for (const PolicyInfo& info : PolicyInfos()) {
    if (config.policy == info.name) {
      if (info.make == nullptr) {
        throw Error("policy '" + config.policy + "' is not a tiered-cache policy");
      }
      return info.make(config);
    }
  }
  throw Error("unknown KV cache policy '" + config.policy + "'");
}

std::unique_ptr<KvCache> CreateKvCache(const KvConfig& requested, const KvGeometry& geometry,
                                       const Rope& rope) {
  requested.Validate();
  if (requested.policy == "full") return std::make_unique<FullCache>(geometry, rope);
  const KvConfig config = PolicyLayout(requested);
  return std::make_unique<TieredCache>(config, geometry, rope, MakePolicy(config));
}

std::unique_ptr<TieredCache> CreatePrefixCache(const KvConfig& config, const KvGeometry& geometry,
                                               const Rope& rope) {
  config.Validate();
  auto cache = std::make_unique<TieredCache>(config, geometry, rope, MakeKeepAllPolicy());
  cache->KeepStatisticsForForks();
  return cache;
}

std::unique_ptr<KvCache> ForkKvCache(const TieredCache& prefix, const KvConfig& requested,
                                     const Rope& rope, ThreadPool& pool) {
  requested.Validate();
  if (requested.policy == "full") return prefix.ForkFull(rope);
  const KvConfig config = PolicyLayout(requested);
  if (config.window != prefix.config().window) {
    throw Error("policy '" + config.policy + "' needs windows of " + std::to_string(config.window) +
                " tokens but the prefix cache has " + std::to_string(prefix.config().window) +
                " (read the prompt into a prefix of PolicyLayout(config))");
  }
  return prefix.Fork(config, MakePolicy(config), rope, pool);
}

std::unique_ptr<TieredCache> RelayoutPrefixCache(const TieredCache& prefix, const KvConfig& config,
                                                 int prefill_chunk, const Rope& rope) {
  return prefix.WithWindow(PolicyLayout(config).window, prefill_chunk, MakeKeepAllPolicy(), rope);
}

std::unique_ptr<TieredCache> ForkShadowCache(const TieredCache& prefix, const Rope& rope,
                                             ThreadPool& pool) {
  KvConfig config = prefix.config();
  config.budget = 1.0;
  config.budget_bytes = -1;
  config.recovery = RecoveryFidelity::kPaper;
  return prefix.Fork(config, MakeKeepAllPolicy(), rope, pool, /*keep_statistics=*/true);
}

}  // namespace qevict
