// Policies by name, and the factory the model and CLI use to build a KV cache from a KvConfig.
// Each policy registers itself from its own file (src/policy/<name>_policy.cc) with a
// PolicyRegistration object, beside the descriptors of its options (kv/kv_options.h); there is
// no central list. The policy library is linked whole (CMakeLists.txt) so that the linker keeps
// those objects.
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
  std::string_view name;
  std::string_view description;  // one line
  // Position in PolicyNames(): help texts, docs, tests and the evaluator's default rows follow
  // it (full 0, streaming 10, h2o 20, tova 30, snapkv 40, pyramidkv 50, kivi 60, mikv 70,
  // qevict 80, qevict-qa 90, qevict-zip 100, kvzip 110, quest 120, qevict-recall 130,
  // recall-oracle 140; a new policy takes a free number).
  int order = 0;
  std::unique_ptr<Policy> (*make)(const KvConfig&) = nullptr;  // nullptr for "full" (not tiered)
  // The cache's layout for this policy when it differs (kivi: windows of its key group).
  void (*layout)(KvConfig&) = nullptr;
  // A policy whose cache is not a TieredCache (quest, recall-oracle: kv/quest_cache.h; make is
  // nullptr): its cache for CreateKvCache, and for ForkKvCache built from a prefix's tokens.
  std::unique_ptr<KvCache> (*create)(const KvConfig&, const KvGeometry&, const Rope&) = nullptr;
  std::unique_ptr<KvCache> (*fork)(const TieredCache& prefix, const KvConfig&,
                                   const Rope&) = nullptr;
  // A diagnostic, not a policy to use (recall-oracle): marked so in help texts, left out of the
  // evaluator's default rows and never recommended.
  bool diagnostic = false;
};

// A static object of this type in a policy's file registers it (before main).
struct PolicyRegistration {
  explicit PolicyRegistration(PolicyInfo info);
};

const std::vector<PolicyInfo>& PolicyInfos();         // in KnownKvPolicyNames() order
const PolicyInfo* FindPolicy(std::string_view name);  // nullptr when unknown
std::vector<std::string> PolicyNames();
std::string PolicyDescription(std::string_view name);  // throws Error for an unknown name
// Whether the policy's cache is a TieredCache (MakePolicy gives its Policy): false for "full",
// "quest", "recall-oracle" (whole fp16 caches) and unknown names.
bool IsTieredPolicy(std::string_view name);
bool IsDiagnosticPolicy(std::string_view name);  // PolicyInfo::diagnostic; false when unknown

// The config a policy's cache is built with: config itself, changed by the policy's
// PolicyInfo::layout where it has one (kivi's window is its key group, kivi_group: 32 as in KIVI,
// keys per channel over 32 tokens, and a recent fp16 residual of R to R + 31 tokens).
// CreateKvCache and ForkKvCache apply it.
KvConfig PolicyLayout(const KvConfig& config);

// The policy of a tiered cache (throws Error for "full" or an unknown name).
std::unique_ptr<Policy> MakePolicy(const KvConfig& config);

// Validates config; "full" gives the fp16 FullCache, a policy with PolicyInfo::create its own
// cache (quest, recall-oracle), every other policy a TieredCache.
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
