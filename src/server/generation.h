// One generation on a slot, in two steps so that the HTTP layer can still answer with an error
// status when the first step fails: the constructor continues the kept conversation the job
// brings (prefilling only the tokens it does not hold) or makes a new one with the request's
// cache policy (the model's weights are shared, read-only) and prefills the prompt; Generate
// runs the sampling loop. Afterwards the conversation goes to the session store (when the job
// asks and the generation ended normally) or is freed. The cache's statistics are published to the
// metrics as tokens come out; the loop stops early when on_chunk returns false (client gone) or the
// server shuts down.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/conversation.h"
#include "engine/generate.h"
#include "engine/loaded_model.h"
#include "kv/kv_config.h"
#include "server/metrics.h"
#include "server/session_store.h"
#include "server/slot_scheduler.h"

namespace qevict::server {

using ChunkCallback =
    std::function<bool(std::string_view text, std::span<const TokenLogprob> logprobs)>;

struct GenerationJob {
  std::vector<int32_t> prompt;
  // What the cache's score hooks reconstruct when it asks (engine/score_hooks.h; qevict-zip,
  // kvzip): the request's text as `qevict run` would take it. Used only by a new run.
  std::shared_ptr<const ScoreContext> score_context;
  int64_t max_tokens = 16;
  int64_t budget_new_tokens = 16;  // new tokens the budget fraction counts (<= max_tokens)
  SamplerOptions sampling;
  std::vector<std::string> stop;
  int top_logprobs = -1;  // >= 0: report log-probabilities (GenerateOptions::top_logprobs)
  KvConfig kv;
  int batch = 256;  // prompt tokens per forward pass (kv.prefill_chunk overrides when > 0)
  int64_t n_ctx = 0;  // tokens the conversation may hold over all its turns (> 0)
  // Kept sessions: the conversation to continue (nullptr: a new one), and whether to keep this
  // one afterwards, under which name and kv key (session_store.h).
  std::unique_ptr<Conversation> conversation;
  bool keep = false;
  std::string session_id;
  std::string kv_key;
};

struct GenerationOutcome {
  GenerateResult result;  // finish_reason "stop", "length" or "cancelled"
  KvStats kv;             // the cache at the end of the run
  SessionTimings timings;
};

class GenerationRun {
 public:
  // Creates the session on the lease's slot and prefills the prompt. Throws qevict::Error (or
  // std::bad_alloc) when the engine fails; the slot is then released.
  GenerationRun(const LoadedModel& model, SlotLease lease, GenerationJob job,
                ServerMetrics& metrics, SessionStore* store);
  ~GenerationRun();
  GenerationRun(const GenerationRun&) = delete;
  GenerationRun& operator=(const GenerationRun&) = delete;

  // Once, before Finish. on_chunk receives each piece of text with the logprobs of the tokens
  // it releases (GenerateOptions::on_chunk; may be null); returning false cancels
  // (finish_reason "cancelled", as does a server shutdown).
  GenerationOutcome Generate(const ChunkCallback& on_chunk);
  // Keeps the conversation (a normal end, when the job asks) or frees its KV cache, closes the
  // slot's metrics, then releases the slot and its reserved bytes. Idempotent; the destructor
  // calls it.
  void Finish();

  bool finished() const { return finished_; }
  const GenerationJob& job() const { return job_; }
  // Prompt tokens the kept conversation already held (not prefilled).
  int64_t reused_tokens() const { return reused_tokens_; }
  // Wall time of this run's sampling loop (after Generate; the request log's decode speed).
  double decode_seconds() const { return decode_seconds_; }

 private:
  const LoadedModel& model_;
  SlotLease lease_;
  GenerationJob job_;
  ServerMetrics& metrics_;
  SessionStore* store_;
  std::unique_ptr<Conversation> conversation_;
  std::span<const float> logits_;
  int64_t reused_tokens_ = 0;
  bool keepable_ = false;  // the generation ended normally: its cache may be kept
  int64_t generated_ = 0;
  double decode_seconds_ = 0.0;
  KvStats final_stats_;
  bool finished_ = false;
};

}  // namespace qevict::server
