// KvStats as JSON, the one shape every front end (CLI, bench, eval, server) prints.
#pragma once

#include <nlohmann/json.hpp>

#include "kv/kv_cache.h"

namespace qevict {

// Also carries the process's RSS and its high-water mark (util/memory_stats.h) at the time of
// the call, next to the cache's ledger (resident) and what it holds mapped (reserved).
nlohmann::json KvStatsToJson(const KvStats& stats);

// Whether the cache held more than it promises (docs/kv-cache.md, "Memory"): after routing,
// more mapped than 1.25 x max(budget, floor) + 1 MiB, or a peak after the prompts were read
// above max(budget, floor) plus the tokens of one routing interval (route_every generated
// tokens and the window they open, in fp16). The peak while a prompt is read -- the budget plus
// one prompt chunk in fp16 under bounded prefill, the whole prompt in the paper's mode -- is
// not an overrun, nor is an infeasible budget (said as such), nor anything without a budget.
bool KvStatsOverBudget(const KvStats& stats, int route_every, int window);

}  // namespace qevict
