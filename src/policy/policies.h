// What a policy's file includes: the Policy interface, the registration (registry.h) and the
// option descriptors (kv/kv_options.h). Each policy registers itself in its own file; see
// docs/kv-cache.md, "Adding a policy".
#pragma once

#include <memory>

#include "kv/kv_config.h"
#include "kv/kv_options.h"
#include "kv/routing.h"
#include "policy/registry.h"

namespace qevict {

// Keeps everything and routes nothing (prefix and shadow caches of the evaluator). Not a
// user-visible policy: not registered.
std::unique_ptr<Policy> MakeKeepAllPolicy();

}  // namespace qevict
