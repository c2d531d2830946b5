#include "policy/registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "kv/full_cache.h"
#include "kv/kv_options.h"
#include "kv/tiered_cache.h"
#include "policy/policies.h"
#include "util/error.h"

namespace qevict {

namespace {

std::vector<PolicyInfo>& Registered() {
  static std::vector<PolicyInfo> infos;
  return infos;
}

bool& InfosRead() {  // PolicyInfos() was called: a registration now would be missing from it
  static bool read = false;
  return read;
}

// The uncompressed cache is not a tiered-cache policy and has no file of its own.
const PolicyRegistration kFullRegistration({
    .name = "full",
    .description = "no compression: every token in fp16 (the reference)",
    .order = 0,
});

}  // namespace

PolicyRegistration::PolicyRegistration(PolicyInfo info) {
  if (InfosRead()) {
    std::fprintf(stderr, "qevict: policy '%.*s' registered after the policies were listed\n",
                 static_cast<int>(info.name.size()), info.name.data());
    std::abort();
  }
  RegisterKvPolicyName(info.name, info.order);  // aborts on a name or order taken twice
  Registered().push_back(info);
}

const std::vector<PolicyInfo>& PolicyInfos() {
  static const std::vector<PolicyInfo> sorted = [] {
    InfosRead() = true;
    std::vector<PolicyInfo> infos = Registered();
    std::sort(infos.begin(), infos.end(),
              [](const PolicyInfo& a, const PolicyInfo& b) { return a.order < b.order; });
    return infos;
  }();
  return sorted;
}

const PolicyInfo* FindPolicy(std::string_view name) {
  for (const PolicyInfo& info : PolicyInfos()) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (const PolicyInfo& info : PolicyInfos()) names.emplace_back(info.name);
  return names;
}

std::string PolicyDescription(std::string_view name) {
  if (const PolicyInfo* info = FindPolicy(name)) return std::string(info->description);
  throw Error("unknown KV cache policy '" + std::string(name) + "'");
}

bool IsTieredPolicy(std::string_view name) {
  const PolicyInfo* info = FindPolicy(name);
  return info != nullptr && info->make != nullptr;
}

bool IsDiagnosticPolicy(std::string_view name) {
  const PolicyInfo* info = FindPolicy(name);
  return info != nullptr && info->diagnostic;
}

KvConfig PolicyLayout(const KvConfig& config) {
  KvConfig layout = config;
  const PolicyInfo* info = FindPolicy(config.policy);
  if (info != nullptr && info->layout != nullptr) info->layout(layout);
  return layout;
}

std::unique_ptr<Policy> MakePolicy(const KvConfig& config) {
  if (const PolicyInfo* info = FindPolicy(config.policy)) {
    if (info->make == nullptr) {
      throw Error("policy '" + config.policy + "' is not a tiered-cache policy");
    }
    return info->make(config);
  }
  throw Error("unknown KV cache policy '" + config.policy + "'");
}

std::unique_ptr<KvCache> CreateKvCache(const KvConfig& requested, const KvGeometry& geometry,
                                       const Rope& rope) {
  requested.Validate();
  if (requested.policy == "full") return std::make_unique<FullCache>(geometry, rope);
  if (const PolicyInfo* info = FindPolicy(requested.policy); info && info->create) {
    return info->create(requested, geometry, rope);
  }
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
  if (const PolicyInfo* info = FindPolicy(requested.policy); info && info->fork) {
    return info->fork(prefix, requested, rope);
  }
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
