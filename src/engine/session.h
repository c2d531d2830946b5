// One sequence being decoded: its KV cache, position, scratch and timings. Prompts (and later
// user turns) go through Prefill in chunks; generated tokens through Decode. The cache policy is
// whatever KvCache the session was given; the session only tells it what each batch was.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/score_hooks.h"
#include "kv/kv_cache.h"
#include "model/transformer_model.h"

namespace qevict {

// Makes the policy's cache for the model's global layers (every layer, for models without
// sliding-window layers; those get rings beside it: kv/interleaved_cache.h).
using KvCacheFactory =
    std::function<std::unique_ptr<KvCache>(const KvGeometry& geometry, const Rope& rope)>;

class Session;

// The cache a session of this model holds: make_cache's for every layer, or, with
// sliding-window layers, rings for those beside make_cache's cache for the global layers.
std::unique_ptr<KvCache> MakeSessionCache(const TransformerModel& model, int64_t n_ctx,
                                          const RopeTables& ropes,
                                          const KvCacheFactory& make_cache);

struct SessionOptions {
  int64_t n_ctx = 0;         // tokens this session may hold in total (prompt + generated)
  int prefill_chunk = 256;   // tokens per forward pass while prefilling (each ends in EndBatch)
  // Called after every prefill chunk with the tokens of this Prefill call done so far and its
  // total (a progress line for long prompts); may be empty.
  std::function<void(int64_t done, int64_t total, const KvCache& cache)> on_prefill_chunk;
  // Called once a prompt's last chunk is stored and before the cache is told the prompt ended
  // (before its routing step), with the session at the position after the prompt: a
  // read-only pass over the cache can hand the cache scores for that step
  // (engine/reconstruction.h). May be empty. Runs before the session's own score hook
  // (set_score_context), which computes only what the cache still asks for.
  std::function<void(Session& session)> before_prompt_end;
};

struct SessionTimings {
  int64_t prompt_tokens = 0;
  double prompt_seconds = 0.0;
  int64_t generated_tokens = 0;
  double generate_seconds = 0.0;
};

class Session {
 public:
  Session(const TransformerModel& model, ThreadPool& pool, const SessionOptions& options,
          const KvCacheFactory& make_cache);

  // A session that continues where `prefix` stands (same model, pool, options, position and
  // timings) with the cache `fork` makes from prefix's policy cache and this session's rope (the
  // evaluator forks one prefilled prompt into every policy and budget: policy/registry.h);
  // sliding-window rings are copied.
  using CacheFork =
      std::function<std::unique_ptr<KvCache>(const KvCache& prefix_cache, const Rope& rope)>;
  Session(const Session& prefix, const CacheFork& fork);

  // Starts a new run (the cache forgets everything): prompt length and generation length size
  // the cache budget.
  void BeginRun(int64_t prompt_tokens, int64_t max_new_tokens);
  // Before a further turn of the run (a conversation's next message): what the cache holds is
  // kept, and its budget grows to cover prompt_tokens more prompt tokens and max_new_tokens
  // generated ones (KvCache::ContinueRun). Throws when they do not fit the context.
  void ContinueRun(int64_t prompt_tokens, int64_t max_new_tokens);
  // Feeds prompt tokens; returns the logits after the last one.
  std::span<const float> Prefill(std::span<const int32_t> tokens);
  // Feeds prompt tokens and returns logits for every one of them (perplexity scoring):
  // row i predicts the token after tokens[i]. Each row has n_vocab floats.
  std::vector<float> PrefillAllLogits(std::span<const int32_t> tokens);
  // Feeds one generated token; returns the logits for the next.
  std::span<const float> Decode(int32_t token);

  // The logits after the last token Prefill or Decode fed; empty when the last call was none of
  // them (a new run, PrefillAllLogits, LoadState) and after Trim().
  std::span<const float> logits() const;

  // The session's state between batches -- its cache; the position follows from it -- for a
  // prompt cache on disk (engine/prompt_cache.h). LoadState replaces everything the session
  // held (a session built with the same model and KV options); malformed state throws Error.
  void SaveState(ByteWriter& out) const { cache_->SaveState(out); }
  void LoadState(ByteReader& in);

  int64_t position() const { return position_; }
  const KvCache& cache() const { return *cache_; }
  KvCache& cache() { return *cache_; }
  // The cache the policy applies to: cache() itself, or its global layers' cache when the model
  // has sliding-window layers (nullptr when every layer slides).
  const KvCache* policy_cache() const;
  const SessionTimings& timings() const { return timings_; }

  // Score hooks (engine/score_hooks.h): the context the cache's external scores are computed
  // from when it asks for them, at the run's first prompt end (kept for later runs until
  // replaced; nullptr: none). A cache that asks without a context makes Prefill throw Error.
  void set_score_context(std::shared_ptr<const ScoreContext> context) {
    score_context_ = std::move(context);
  }
  // What the current run's external scores cost (nullopt: the cache asked for none).
  const std::optional<ExternalScoreCost>& external_score_cost() const {
    return external_score_cost_;
  }
  // The cache's statistics with the engine's part filled in (KvStats::external_score_*): what
  // --kv-stats and the server's responses report.
  KvStats kv_stats() const;
  const TransformerModel& model() const { return model_; }
  // Frees the forward pass's scratch buffers until the next Prefill or Decode (a conversation
  // kept between turns holds only its cache).
  void Trim() {
    scratch_.Release();
    has_logits_ = false;
  }
  // The threads later calls compute on (a kept conversation resumed on another server slot).
  void set_pool(ThreadPool& pool) { pool_ = &pool; }

 private:
  void CheckRoom(int64_t n) const;

  const TransformerModel& model_;
  ThreadPool* pool_;
  SessionOptions options_;
  RopeTables ropes_;
  std::unique_ptr<KvCache> cache_;
  ForwardScratch scratch_;
  int64_t position_ = 0;
  bool has_logits_ = false;  // scratch_.logits row 0 follows the last token fed
  std::vector<int32_t> positions_;
  SessionTimings timings_;
  std::shared_ptr<const ScoreContext> score_context_;
  std::optional<ExternalScoreCost> external_score_cost_;
};

}  // namespace qevict
