// Every option of the KV cache: which policy, the byte budget, the window geometry of the tiered
// cache, and (by key) the options of each policy. Defaults follow the paper as docs/kv-cache.md
// writes it; values it marks *(choice)* are ours and are flagged in KvOptionDocs() and
// docs/kv-cache.md. Each option is described once, in kv/kv_options.h's descriptors (the cache's
// fields below: in kv_options.cc; a policy's options: in its src/policy/<name>_policy.cc); the
// command line, the server, the evaluator's variants, Validate(), KvConfigKey() and the docs are
// generated from them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv/window_digest.h"

namespace qevict {
struct KvGeometry;
}

namespace qevict {

// What a promoted window holds (docs/kv-cache.md, "Recovery fidelity").
enum class RecoveryFidelity {
  kPaper,  // the dequantized codes: detail lost at the first demotion stays lost
  kExact,  // the fp16 original, read back from a memory-mapped cold store
};

// How attention mass becomes a window's importance (docs/kv-cache.md, "Attention over the tiers").
enum class ScoreMode {
  kCumulative,  // plain sum over all queries (H2O)
  kDecay,       // exponentially decayed sum: score = decay^n * score + mass of the n new queries
  kNormalized,  // sum divided by the number of queries that could attend the window (ZipCache)
};

// Where the window scores of a policy that routes on external scores (qevict-zip, kvzip) come
// from at the end of the run's first prompt (docs/kv-cache.md, "Score sources").
enum class ScoreSource {
  kReconstruction,     // KVzip: max attention from a reconstruction pass (engine/reconstruction.h)
  kExpectedAttention,  // Expected Attention: recent queries' statistics projected forward with RoPE
  kKeyNorm,            // L2 norm of the keys: low norm = important
};

// What a budget fraction (or byte cap) is of, on a model with sliding-window layers
// (docs/kv-cache.md, "Budget"). Without sliding layers both are the same.
enum class BudgetScope {
  kAll,     // the whole cache: the global layers and the sliding layers' rings (`full`'s bytes)
  kGlobal,  // the global layers only (what grows with the context); the rings are paid on top
};

struct KvConfig {
  std::string policy = "qevict";  // see PolicyNames() (src/policy/registry.h)

  // Budget: a fraction of the fp16 cache of the whole run (prompt + max_new_tokens), or an
  // absolute byte cap. budget == 1.0 without budget_bytes means "no limit".
  double budget = 1.0;
  int64_t budget_bytes = -1;  // > 0 replaces `budget`
  // What `budget` and `budget_bytes` are of: the whole cache (rings included) or the global
  // layers only, the rings paid on top (BudgetBytes / GlobalBudgetBytes below).
  BudgetScope budget_scope = BudgetScope::kAll;

  // Tiered cache geometry.
  int window = 8;        // W: tokens per window
  int sinks = 5;         // S: first tokens, always fp16
  int recent = 32;       // R: last tokens, always fp16
  int bits = 2;          // Q tier bit-width: 2, 4 or 8
  int value_group = 32;  // values are quantized per token in groups of this many channels (choice)

  // Routing.
  int route_every = 8;        // Ω: generated tokens between routing steps
  double q_share = 0.5;       // share of the band's bytes given to the Q tier (choice)
  // qevict / qevict-qa at the routing steps between prompt chunks (bounded prefill): the Q tier's
  // share while the prompt is still being read. 1 archives the band in 2 bits rather than
  // evicting it before the prompt's end can rank it (choice; docs/kv-cache.md).
  double prefill_q_share = 1.0;
  double hysteresis = 0.0;    // a Q window must beat an FP window's score by this fraction (choice)
  // Bounded prefill: with a budget, the prompt is routed after every chunk of this many tokens,
  // so the cache peaks at the budget plus one chunk (docs/kv-cache.md, "Budget"). 0: the paper's
  // prompt-end mode (the whole prompt in fp16, routed once it is read). Ignored without a budget.
  int prefill_chunk = 512;
  ScoreMode score = ScoreMode::kCumulative;
  double score_decay = 0.95;  // per query, for ScoreMode::kDecay (choice)
  RecoveryFidelity recovery = RecoveryFidelity::kPaper;
  // qevict-zip / kvzip: the score source of the first routing step, and its parameters.
  ScoreSource score_source = ScoreSource::kReconstruction;
  int reconstruction_chunk = 512;  // context tokens per reconstruction forward pass (choice)
  int expected_future = 512;       // expected attention: future positions averaged over (choice)
  // Exact recovery and the cold tier: directory of the cold-store file ("" = $TMPDIR or /tmp).
  std::string cold_store_dir;
  // Cold tier (a policy that keeps_cold(): qevict-recall): the digest of each cold window, and
  // the most bytes the cold file may hold on disk (-1: no limit but the disk's).
  DigestKind cold_digest = DigestKind::kMeanKeyQ2C;
  // Windows that share one digest (consecutive indices): the digest of their keys as one window
  // of G * W tokens, 1 / G of its bytes a window (1: a digest per window).
  int cold_digest_group = 8;
  int64_t cold_disk_limit = -1;
  // At a prompt, every cold window is read back and ranked exactly (true: scan), or the digests
  // shortlist recall_candidates of them; decoding steps always shortlist recall_candidates / 4.
  bool recall_scan = true;
  int recall_candidates = 32;  // cold windows per layer read back and scored exactly per prompt
  // Windows per layer a later prompt batch recalls before it attends (0: none; recall only at
  // the prompt's end routing step).
  int recall_prompt = 4;
  int recall_shared = 8;       // windows every layer recalls: the best recall finds in any layer
  // While a prompt batch ranks one layer's cold windows, the next layer's are read ahead into the
  // page cache (posix_fadvise on a thread of its own), overlapping the disk with this layer's
  // compute. Off by default: no gain measured here (docs/kv-cache.md, "Reads and compute").
  bool cold_prefetch = false;

  // Observation window: the last prompt queries whose attention the cache keeps for the
  // policies that score the question (snapkv, pyramidkv, qevict-qa; expected attention).
  int snapkv_window = 32;

  // The options policies declare in their own files (KvPolicyOption), by key, where set: a key
  // that is absent has its registered default. Read with option(); the descriptors say which.
  std::map<std::string, double, std::less<>> policy_options;
  double option(std::string_view key) const;            // throws Error for an unregistered key
  void set_option(std::string_view key, double value);  // throws Error for an unregistered key

  bool print_stats = false;  // --kv-stats: the CLI prints KvStats after a run (not used by the cache)

  // The byte budget of a run of run_tokens tokens, or std::nullopt for "no limit". The one place
  // where the options' encodings (budget == 1.0 without a byte cap: unlimited; budget_bytes > 0:
  // an absolute cap; else a fraction of the run's fp16 cache) become a budget. Inside the cache
  // "no budget" is only ever this nullopt; KvStats::budget_bytes prints it as -1 and policies see
  // RoutingContext::kUnlimited, each converted in one place.
  // BudgetBytes is the whole cache's budget, the sliding-window layers' rings included;
  // GlobalBudgetBytes the global layers' part of it, where the policy applies. With
  // BudgetScope::kAll a fraction is of what `full` holds (KvGeometry::full_bytes) and the global
  // layers get what the rings leave (0 when the rings alone exceed it). With kGlobal a fraction
  // (or cap) is of the global layers' fp16 cache alone and the whole budget is it plus the rings.
  std::optional<int64_t> BudgetBytes(int64_t run_tokens, const KvGeometry& geometry) const;
  std::optional<int64_t> GlobalBudgetBytes(int64_t run_tokens, const KvGeometry& geometry) const;
  // The --kv-budget fraction (in this scope) whose global part holds global_bytes over a run of
  // run_tokens tokens: what an infeasible run's note asks for. May exceed 1.
  double BudgetFractionFor(int64_t global_bytes, int64_t run_tokens,
                           const KvGeometry& geometry) const;
  bool limited() const { return budget_bytes > 0 || budget < 1.0; }

  // Tokens per forward pass while prefilling, given the engine's batch: with bounded prefill the
  // largest divisor of the chunk that is <= batch, so that routing steps fall exactly on chunk
  // boundaries and the cache never holds more than the budget plus one chunk.
  int ForwardBatch(int batch) const {
    if (prefill_chunk <= 0) return batch;
    int d = std::min(batch, prefill_chunk);
    while (d > 1 && prefill_chunk % d != 0) --d;
    return std::max(d, 1);
  }

  // Throws qevict::Error naming the option and the accepted values when one is out of range.
  void Validate() const;
};

RecoveryFidelity ParseRecoveryFidelity(std::string_view text);  // "paper" | "exact"; throws Error
ScoreMode ParseScoreMode(std::string_view text);  // "cumulative" | "decay" | "normalized"; throws
// "reconstruction" | "expected-attention" | "key-norm"; throws Error
ScoreSource ParseScoreSource(std::string_view text);
const char* ScoreSourceName(ScoreSource source);
const char* RecoveryFidelityName(RecoveryFidelity fidelity);
const char* ScoreModeName(ScoreMode mode);
BudgetScope ParseBudgetScope(std::string_view text);  // "all" | "global"; throws Error
const char* BudgetScopeName(BudgetScope scope);

// Every option that shapes a cache's contents (every descriptor of kv_options.h: all but
// print_stats), as one string: a kept or saved cache continues only under the same key
// (server/session_store.h, engine/prompt_cache.h).
std::string KvConfigKey(const KvConfig& config);

// Names of every policy CreateKvCache() accepts, in a fixed order (validated by KvConfig): those
// the policy files register (policy/registry.h, PolicyRegistration), by their order keys.
const std::vector<std::string_view>& KnownKvPolicyNames();

// One line per option, for --help texts and docs: CLI flag, default, meaning, and whether the
// default is our choice (the spec leaves it open) rather than the paper's.
// Generated from the descriptors (kv/kv_options.h), with --kv-policy first and --kv-stats last.
struct KvOptionDoc {
  std::string flag;
  std::string default_value;
  std::string help;
  bool our_choice;
};
const std::vector<KvOptionDoc>& KvOptionDocs();

}  // namespace qevict
