// What --kv-stats prints: the cache's statistics at the end of a run, in words a reader can
// follow without docs/kv-cache.md (each figure's meaning is said once), with the prompt-reading
// peak of bounded prefill reported as what it is and "OVER BUDGET" kept for a cache that broke
// its contract.
#pragma once

#include <string>

#include "kv/kv_cache.h"
#include "tools/kv_flags.h"

namespace qevict::cli {

// What the summary needs beside the statistics.
struct KvStatsContext {
  std::string policy;
  int prefill_chunk = 0;  // --kv-prefill-chunk (0: the whole prompt before the first routing)
  int route_every = 8;    // generated tokens between routing steps
  int window = 8;         // tokens per window
  int n_layers = 0;       // layers the window counts are summed over (0: unknown)
};
KvStatsContext MakeKvStatsContext(const KvFlags& flags, int n_layers);

// The summary's lines, without printing.
std::string KvStatsSummary(const KvStatsContext& context, const KvStats& stats);
// With --kv-stats (or --json): the summary on stderr, then with --json the raw statistics as
// one JSON line, with "over_budget" (KvStatsOverBudget, engine/kv_stats_json.h).
void PrintKvStats(const KvFlags& flags, const KvStats& stats, int n_layers = 0);
// One line on stderr when the budget cannot be met (the note names the smallest feasible
// budget); returns whether it printed.
bool WarnIfInfeasible(const KvStats& stats);

}  // namespace qevict::cli
