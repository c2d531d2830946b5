// KvStats as JSON, the one shape every front end (CLI, bench, eval, server) prints.
#pragma once

#include <nlohmann/json.hpp>

#include "kv/kv_cache.h"

namespace qevict {

// Also carries the process's RSS and its high-water mark (util/memory_stats.h) at the time of
// the call, next to the cache's ledger (resident) and what it holds mapped (reserved).
nlohmann::json KvStatsToJson(const KvStats& stats);

}  // namespace qevict
