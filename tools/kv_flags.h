// --kv-* flags shared by run, bench and eval: which cache policy, its budget and options, and
// how its statistics are printed.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/session.h"
#include "kv/kv_cache.h"
#include "kv/kv_config.h"

namespace qevict::cli {

struct KvFlags {
  KvConfig config;
  std::string policy = "full";  // the CLI's default is the uncompressed cache
  std::string recovery = "paper";
  std::string score = "cumulative";
  bool stats = false;
  bool json = false;

  // The validated configuration (throws qevict::Error on bad values).
  KvConfig Resolve() const;
};

void AddKvFlags(CLI::App& cmd, KvFlags& flags);
// With --kv-prefill-chunk, prompts are fed in chunks of that size and routed between them.
void ApplyPrefillChunk(const KvFlags& flags, SessionOptions& options);
KvCacheFactory MakeKvCacheFactory(const KvFlags& flags);
// Prints per-tier statistics on stderr when --kv-stats was given (one JSON line with --json).
void PrintKvStats(const KvFlags& flags, const KvStats& stats);
// One line on stderr when the budget cannot be met (the note names the smallest feasible
// budget); returns whether it printed.
bool WarnIfInfeasible(const KvStats& stats);

}  // namespace qevict::cli
