// Policies by name, and the factory the model and CLI use to build a KV cache from a KvConfig.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/rope.h"
#include "kv/kv_cache.h"
#include "kv/kv_config.h"
#include "kv/routing.h"

namespace qevict {

struct PolicyInfo {
  const char* name;
  const char* description;  // one line
  std::unique_ptr<Policy> (*make)(const KvConfig&);  // nullptr for "full" (not tiered)
};

const std::vector<PolicyInfo>& PolicyInfos();  // in KnownKvPolicyNames() order
std::vector<std::string> PolicyNames();
std::string PolicyDescription(std::string_view name);  // throws Error for an unknown name

// The policy of a tiered cache (throws Error for "full" or an unknown name).
std::unique_ptr<Policy> MakePolicy(const KvConfig& config);

// Validates config; "full" gives the fp16 FullCache, every other policy a TieredCache.
// rope must outlive the cache.
std::unique_ptr<KvCache> CreateKvCache(const KvConfig& config, const KvGeometry& geometry,
                                       const Rope& rope);

}  // namespace qevict
