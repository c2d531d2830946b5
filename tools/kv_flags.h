// --kv-* flags shared by run, bench and eval: which cache policy, its budget and options, and
// how its statistics are printed.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/session.h"
#include "kv/kv_cache.h"
#include "kv/kv_config.h"
#include "tokenizer/tokenizer.h"

namespace qevict::cli {

struct KvFlags {
  KvConfig config;
  std::string policy = "full";  // the CLI's default is the uncompressed cache
  std::string recovery = "paper";
  std::string score = "cumulative";
  std::string score_source = "reconstruction";
  double ratio = -1.0;  // --kv-ratio: share of the cache removed (kvpress); < 0: not given
  bool stats = false;
  bool json = false;

  // The validated configuration (throws qevict::Error on bad values).
  KvConfig Resolve() const;
};

// Which of the shared flags a command lists: every flag it lists does something in it.
struct KvFlagSet {
  bool policy = true;     // --kv-policy, --kv-budget, --kv-ratio, --kv-budget-bytes
  bool stats = true;      // --kv-stats
  std::string json_help;  // "" : no --json
};

void AddKvFlags(CLI::App& cmd, KvFlags& flags, const KvFlagSet& set = {});
// With --kv-prefill-chunk, prompts are fed in chunks of that size and routed between them.
void ApplyPrefillChunk(const KvFlags& flags, SessionOptions& options);
KvCacheFactory MakeKvCacheFactory(const KvFlags& flags);
// With --kv-stats (or --json): a short summary on stderr (budget, resident, reserved, saved vs
// the full cache in MiB and %, tiers, promotions, the process RSS, a peak over the budget
// flagged), then with --json the raw statistics as one JSON line.
void PrintKvStats(const KvFlags& flags, const KvStats& stats);
// The summary's lines, without printing (tested).
std::string KvStatsSummary(const std::string& policy, const KvStats& stats);
// One line on stderr when the budget cannot be met (the note names the smallest feasible
// budget); returns whether it printed.
bool WarnIfInfeasible(const KvStats& stats);

}  // namespace qevict::cli
