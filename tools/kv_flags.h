// --kv-* flags shared by run, bench and eval: which cache policy, its budget and options, and
// how its statistics are printed.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "engine/session.h"
#include "kv/kv_cache.h"
#include "kv/kv_config.h"
#include "tokenizer/tokenizer.h"

namespace qevict::cli {

struct KvFlags {
  KvConfig config;              // the base the given --kv-* options are laid over
  std::string policy = "full";  // the CLI's default is the uncompressed cache
  // Option key -> the text its --kv-* flag gave (flags generated from kv/kv_options.h).
  std::map<std::string, std::string> given;
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

// One --kv-<option> flag per option descriptor (kv/kv_options.h: the cache's and every
// registered policy's), plus --kv-policy, --kv-ratio and --kv-stats.
void AddKvFlags(CLI::App& cmd, KvFlags& flags, const KvFlagSet& set = {});
// With --kv-prefill-chunk, prompts are fed in chunks of that size and routed between them.
void ApplyPrefillChunk(const KvFlags& flags, SessionOptions& options);
KvCacheFactory MakeKvCacheFactory(const KvFlags& flags);
// qevict-zip / kvzip with --kv-score-source reconstruction: once the first prompt is stored and
// before its end is routed, `context` is repeated over the cache (engine/reconstruction.h) and
// the cost said on stderr. Without a context the first step has no reconstruction scores (said
// on stderr): qevict-zip then ranks like qevict, kvzip keeps the newest windows.
void ApplyReconstruction(const KvFlags& flags, const Tokenizer& tokenizer,
                         const std::string& context, ThreadPool& pool, SessionOptions& options);

}  // namespace qevict::cli
