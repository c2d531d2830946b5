// The interface between the model and its KV cache. The model hands over keys before RoPE and
// queries after RoPE; the cache decides how keys and values are stored (fp16, quantized, evicted)
// and computes attention over whatever it holds. The model code never changes with the policy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/rope.h"
#include "util/byte_stream.h"
#include "util/thread_pool.h"

namespace qevict {

struct KvGeometry {
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (GQA: n_heads % n_kv_heads == 0)
  int head_dim = 0;
  int64_t max_tokens = 0;  // tokens the cache must be able to receive in one run (context size)
  // Sliding-window layers of the model (gemma3, Mistral), held beside this cache in rings of
  // ring_window tokens (kv/interleaved_cache.h). n_layers above counts the other (global)
  // layers only; the budget counts both (docs/kv-cache.md, "Sliding-window layers").
  int ring_layers = 0;
  int64_t ring_window = 0;

  // Bytes one token occupies in an fp16 cache: K and V, all (global) layers and KV heads.
  int64_t fp16_bytes_per_token() const {
    return int64_t{2} * n_layers * n_kv_heads * head_dim * 2;
  }
  // Bytes the sliding layers' rings hold after `tokens` tokens (fp16, at most ring_window each).
  int64_t ring_bytes(int64_t tokens) const {
    return int64_t{2} * ring_layers * n_kv_heads * head_dim * 2 *
           std::min<int64_t>(tokens, ring_window);
  }
  // What the `full` policy holds for `tokens` tokens: every global layer's tokens and the rings.
  // Budget fractions are fractions of this.
  int64_t full_bytes(int64_t tokens) const {
    return fp16_bytes_per_token() * tokens + ring_bytes(tokens);
  }
};

// What the batch that just went through every layer was.
enum class BatchKind {
  kPromptChunk,  // part of a prompt, more prompt follows
  kPromptEnd,    // the last chunk of a prompt (or a user turn): generation starts next
  kGenerated,    // one generated token
};

// Scores a cache asks the engine for before its run's first prompt end is routed, because they
// need a pass over the model it cannot make itself (engine/score_hooks.h).
enum class ExternalScoreNeed {
  kNone,
  kReconstruction,  // KVzip's reconstruction scores (engine/reconstruction.h)
};

// The windows of one layer that external scores are given for: scores go by window index (0 to
// n_windows - 1); the resident ones, in attention order after sink_tokens tokens, are the ones
// a pass over the cache sees, with their token counts.
struct ExternalScoreLayout {
  int64_t sink_tokens = 0;
  int64_t n_windows = 0;
  std::vector<int64_t> resident_index;
  std::vector<int> resident_tokens;
};

// Per-tier accounting; bytes are what the cache's allocator actually holds.
struct KvStats {
  int64_t tokens_seen = 0;      // tokens stored since the run began
  int64_t tokens_resident = 0;  // tokens attended now (fp16 + quantized)
  int64_t fp16_bytes = 0;       // fp16 tier, including sinks and the recent region
  int64_t quant_bytes = 0;      // codes + scales + zeros of quantized windows
  int64_t meta_bytes = 0;       // per-window bookkeeping charged to the budget
  int64_t cold_bytes = 0;       // exact-recovery cold store or cold tier on disk (outside the budget, reported)
  int64_t peak_bytes = 0;       // max of resident bytes over the run
  int64_t budget_bytes = -1;    // -1 when unlimited; sliding-window rings included
  // The global layers' part of budget_bytes, what the policy's cache may hold (-1 when
  // unlimited), and whether the budget was given for them alone (--kv-budget-scope global: then
  // budget_bytes is it plus the rings). Without sliding layers it equals budget_bytes.
  int64_t global_budget_bytes = -1;
  bool budget_scope_global = false;
  int64_t full_fp16_bytes = 0;  // what `full` would hold for tokens_seen tokens (rings included)
  int64_t fp16_windows = 0, quant_windows = 0, evicted_windows = 0;
  int64_t promotions = 0, demotions = 0, evictions = 0;
  int64_t routing_steps = 0;
  bool infeasible = false;  // the policy cannot meet the budget (kivi); explained in `note`
  std::string note;

  // Finer diagnostics of the tiered cache (left 0 by `full` unless stated).
  int64_t peak_fp16_bytes = 0;      // max of fp16_bytes over the run
  int64_t peak_quant_bytes = 0;     // max of quant_bytes over the run
  int64_t prefill_peak_bytes = 0;   // max resident bytes while prompt tokens were stored
  int64_t mean_resident_bytes = 0;  // mean over batches since the first routing step
  int64_t mean_fp16_bytes = 0;
  int64_t mean_quant_bytes = 0;
  int64_t cold_peak_bytes = 0;      // max of cold_bytes
  int64_t pool_reserved_bytes = 0;  // mapped by the block allocator (>= fp16 + quant bytes)
  // Everything the cache holds from the OS for its tokens: the pools' mapped slabs plus policy
  // buffers (observation queries). What the process is charged for the cache; >= the ledger's
  // fp16 + quant bytes. The server's --kv-memory-limit accounts these bytes.
  int64_t reserved_bytes = 0;
  int64_t peak_reserved_bytes = 0;  // max of reserved_bytes over the run
  int64_t compaction_moves = 0;     // blocks moved to return emptied slabs to the OS
  // Wall time the cache spent computing key-norm / expected-attention window scores
  // (KvConfig::score_source) at the first prompt end; 0 for every other policy.
  double prior_seconds = 0.0;
  // Wall time inside routing steps (score sources, the policy's plan, demotions, evictions to
  // the cold tier, recalls and promotions) and in the recalls a prompt batch makes before it
  // attends (KvConfig::recall_prompt), over the whole run: what keeping the cache within its
  // budget costs beside attention. Process-local (not saved in a prompt cache); 0 for caches
  // that never route (full, quest).
  double routing_seconds = 0.0;
  // Max of reserved_bytes right after each routing step (compaction done): what the cache keeps
  // mapped in its steady state, <= 1.25 x max(budget, floor) + 1 MiB (docs/kv-cache.md, "Memory").
  int64_t routed_reserved_peak_bytes = 0;
  // The least the cache holds whatever the budget: sinks, recent windows, the growing window,
  // positions and policy buffers, at their largest over the run (-1 without a budget).
  int64_t floor_bytes = -1;
  // Cold tier (qevict-recall; 0 without one): windows on disk, the RAM their records, digests
  // and liveness bits hold (inside meta_bytes and the budget), what the disk store wrote and read
  // (recall candidates scored at prompt ends, recalled windows, promotions), recalls made.
  int64_t cold_windows = 0;
  int64_t cold_ram_bytes = 0;
  int64_t cold_written_bytes = 0;
  int64_t cold_read_bytes = 0;
  int64_t cold_score_read_bytes = 0;  // of cold_read_bytes: candidates read to be scored
  // Of cold_bytes, what the OS page cache holds now (DiskColdStore::PageCacheBytes): reclaimable
  // by the kernel, in no process's RSS, never counted as resident; -1 where it cannot tell.
  int64_t cold_page_cache_bytes = 0;
  // Of the cold file, bytes the cache asked the kernel to read ahead (the next layer's cold
  // windows while a later prompt's batch scans this one: KvConfig::cold_prefetch). This
  // process's own, not carried in a prompt cache.
  int64_t cold_prefetch_bytes = 0;
  int64_t recalls = 0;
  // Sliding-window layers (kv/interleaved_cache.h): their rings' bytes, already counted in
  // fp16_bytes and every total above, how many layers and their window (0 without any).
  int64_t sliding_bytes = 0;
  int sliding_layers = 0;
  int64_t sliding_window = 0;
  // External scores the engine computed for the run's first prompt end (reconstruction): wall
  // time and tokens forwarded; 0 when the cache asked for none. Filled by the session
  // (Session::kv_stats), not by the cache.
  double external_score_seconds = 0.0;
  int64_t external_score_tokens = 0;
  // Query-aware sparse attention (quest: kv/quest_cache.h; 0 for every other cache): the fp16
  // K/V bytes one generated token's attention read over the global layers, mean over the
  // generated tokens, and what attention over every visible token would have read for them.
  // Their ratio is the attended fraction the budget sets; resident bytes stay the full cache's.
  int64_t mean_attended_bytes = 0;
  int64_t mean_visible_bytes = 0;

  int64_t resident_bytes() const { return fp16_bytes + quant_bytes + meta_bytes; }
};

class KvCache {
 public:
  virtual ~KvCache() = default;

  // Before the first token of a run: the budget is a fraction of the fp16 bytes of
  // prompt_tokens + max_new_tokens (docs/kv-cache.md, "Budget").
  virtual void BeginRun(int64_t prompt_tokens, int64_t max_new_tokens) = 0;

  // Before a further turn of the same run (a conversation's next message): prompt_tokens more
  // tokens will be fed, then up to max_new_tokens generated. Nothing stored is forgotten; the
  // budget becomes its fraction of the fp16 bytes of every token stored so far plus these.
  virtual void ContinueRun(int64_t prompt_tokens, int64_t max_new_tokens) {}

  // Stores n new tokens of one layer. k is before RoPE, v as is; both [n][n_kv_heads][head_dim]
  // fp32. pos[i] are absolute positions, strictly increasing across calls.
  virtual void Store(int layer, int n, const int32_t* pos, const float* k, const float* v) = 0;

  // Attention of n queries of one layer over the stored tokens whose position is <= the query's
  // position (causal). q: [n][n_heads][head_dim] fp32 with RoPE applied; out: same shape.
  virtual void Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
                      ThreadPool& pool) = 0;

  // Before a batch goes through the layers: what it is (a prompt chunk, a prompt's end, or a
  // generated token). Tiered caches keep the queries of prompts only (observation).
  virtual void BeginBatch(BatchKind kind) {}

  // After a batch has gone through every layer; tiered caches score and route here.
  virtual void EndBatch(BatchKind kind, ThreadPool& pool) = 0;

  virtual KvStats Stats() const = 0;
  // Asks the OS to drop the cold tier's file from its page cache (nothing without a cold tier):
  // the next reads go to the disk, as under memory pressure. For `bench --cold-page-cache
  // dropped`; the cache's contents are unchanged.
  virtual void DropColdPageCache() const {}

  // External scores. A cache says which scores it still needs for its next routing step (the
  // run's first prompt end; kNone once they were handed over or that step is behind it), and
  // the engine computes them over the stored tokens before that step (engine/score_hooks.h):
  // scores by window index of ExternalScoreLayout(layer), one vector per layer of the policy
  // (geometry().n_layers). A cache that asks for none takes none: SetExternalScores throws.
  virtual ExternalScoreNeed wants_external_scores() const { return ExternalScoreNeed::kNone; }
  virtual ExternalScoreLayout external_score_layout(int layer) const {
    throw Error("this KV cache has no windows to score (external scores need a compressing policy)");
  }
  virtual void SetExternalScores(int layer, std::vector<float> scores) {
    throw Error("this KV cache has no windows to score (external scores need a compressing policy)");
  }

  // The whole state between batches (after a prompt's end or a generated token), for the prompt
  // cache on disk (engine/prompt_cache.h). LoadState, on a cache built with the same options and
  // geometry (any max_tokens that holds the saved tokens), replaces everything it held by what
  // SaveState wrote: the continuation is the one the saved cache would have had. Positions must
  // be 0, 1, ... (a session's). Malformed state throws qevict::Error through the reader.
  virtual void SaveState(ByteWriter& out) const {
    throw Error("this KV cache cannot be saved to a prompt cache");
  }
  virtual void LoadState(ByteReader& in) {
    throw Error("this KV cache cannot be restored from a prompt cache");
  }

  virtual const KvGeometry& geometry() const = 0;
  // The resident keys (after RoPE) and values of one layer in fp32 as attention sees them, in
  // attention order, with their positions; keys/values: [tokens][n_kv_heads][head_dim]. For
  // read-only passes over the cache (reconstruction scoring: engine/reconstruction.h), tests and
  // diagnostics. Caches that cannot tell throw.
  virtual void DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                          std::vector<int32_t>* positions) const {
    throw std::logic_error("this KV cache does not expose its contents");
  }
  virtual int64_t n_tokens() const = 0;  // tokens stored so far in this run
};

}  // namespace qevict
