// --kv-* flags shared by run, bench and eval: which cache policy, its budget and options, and
// how its statistics are printed.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/session.h"
#include "kv/kv_cache.h"

namespace qevict::cli {

struct KvFlags {
  std::string policy = "full";
  bool stats = false;
  bool json = false;
};

void AddKvFlags(CLI::App& cmd, KvFlags& flags);
void ApplyPrefillChunk(const KvFlags& flags, SessionOptions& options);
KvCacheFactory MakeKvCacheFactory(const KvFlags& flags);
// Prints per-tier statistics on stderr when --kv-stats was given (one JSON line with --json).
void PrintKvStats(const KvFlags& flags, const KvStats& stats);

}  // namespace qevict::cli
