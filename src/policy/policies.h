// Factories of the policies of the tiered cache, one file each (see registry.h for names and
// descriptions, docs/kv-cache.md for how each baseline maps onto windows).
#pragma once

#include <memory>

#include "kv/kv_config.h"
#include "kv/routing.h"

namespace qevict {

std::unique_ptr<Policy> MakeStreamingPolicy(const KvConfig& config);
std::unique_ptr<Policy> MakeH2oPolicy(const KvConfig& config);
std::unique_ptr<Policy> MakeTovaPolicy(const KvConfig& config);
std::unique_ptr<Policy> MakeSnapKvPolicy(const KvConfig& config);
std::unique_ptr<Policy> MakePyramidKvPolicy(const KvConfig& config);
std::unique_ptr<Policy> MakeKiviPolicy(const KvConfig& config);
std::unique_ptr<Policy> MakeMikvPolicy(const KvConfig& config);
std::unique_ptr<Policy> MakeQevictPolicy(const KvConfig& config);
std::unique_ptr<Policy> MakeQevictQaPolicy(const KvConfig& config);
std::unique_ptr<Policy> MakeQevictZipPolicy(const KvConfig& config);
std::unique_ptr<Policy> MakeKvzipPolicy(const KvConfig& config);
// Keeps everything and routes nothing (prefix and shadow caches of the evaluator).
std::unique_ptr<Policy> MakeKeepAllPolicy();

}  // namespace qevict
