// KvStats as JSON, the one shape every front end (CLI, bench, eval, server) prints.
#pragma once

#include <nlohmann/json.hpp>

#include "kv/kv_cache.h"

namespace qevict {

nlohmann::json KvStatsToJson(const KvStats& stats);

}  // namespace qevict
