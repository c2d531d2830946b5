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
#include "kv/tiered_cache.h"

namespace qevict {

struct PolicyInfo {
  const char* name;
  const char* description;  // one line
  std::unique_ptr<Policy> (*make)(const KvConfig&);  // nullptr for "full" (not tiered)
};

const std::vector<PolicyInfo>& PolicyInfos();  // in KnownKvPolicyNames() order
std::vector<std::string> PolicyNames();
std::string PolicyDescription(std::string_view name);  // throws Error for an unknown name

// The config a policy's cache is built with: config itself, except that kivi's window is its
// key group, config.kivi_group (32 as in KIVI: keys per channel over 32 tokens, and a recent
// fp16 residual of R to R + 31 tokens). CreateKvCache and ForkKvCache apply it.
KvConfig PolicyLayout(const KvConfig& config);

// The policy of a tiered cache (throws Error for "full" or an unknown name).
std::unique_ptr<Policy> MakePolicy(const KvConfig& config);

// Validates config; "full" gives the fp16 FullCache, every other policy a TieredCache.
// rope must outlive the cache.
std::unique_ptr<KvCache> CreateKvCache(const KvConfig& config, const KvGeometry& geometry,
                                       const Rope& rope);

// One prefill, every policy (the evaluator): a prefix cache reads the prompt once, keeping every
// statistic the policies route on; ForkKvCache then gives the cache a policy and budget would
// have after reading that prompt itself in prompt-end mode (kv.prefill_chunk 0: routed once,
// after the whole prompt; bit-identical: tests/fork_test.cc), and ForkShadowCache
// a never-routing fp16 copy whose View() reports the full cache's attention per window.
// config supplies the geometry (window, sinks, recent, bits, ...); its policy and budget are
// ignored.
std::unique_ptr<TieredCache> CreatePrefixCache(const KvConfig& config, const KvGeometry& geometry,
                                               const Rope& rope);
std::unique_ptr<KvCache> ForkKvCache(const TieredCache& prefix, const KvConfig& config,
                                     const Rope& rope, ThreadPool& pool);
// The prefix re-windowed for a policy of another layout (kivi: PolicyLayout) without reading the
// prompt again (TieredCache::WithWindow): valid for policies that do not route on window scores,
// which are the only ones that change the window. prefill_chunk: the chunk the prefix read the
// prompt in (SessionOptions::prefill_chunk), so that its slabs are laid out the same.
std::unique_ptr<TieredCache> RelayoutPrefixCache(const TieredCache& prefix, const KvConfig& config,
                                                 int prefill_chunk, const Rope& rope);
std::unique_ptr<TieredCache> ForkShadowCache(const TieredCache& prefix, const Rope& rope,
                                             ThreadPool& pool);

}  // namespace qevict
