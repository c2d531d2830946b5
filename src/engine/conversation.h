// A session kept between turns: the exact token sequence its cache holds, in order, beside the
// session. A later prompt that extends that sequence (the same conversation, one message
// further) is fed from where the cache stands: only the new tokens are prefilled, and the
// compressed cache -- tiers, scores, promotions -- carries on as one run would. A prompt that
// does not extend it starts a new run. `qevict chat` and the server's kept sessions
// (server/session_store.h) are both this class.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/generate.h"
#include "engine/session.h"

namespace qevict {

struct TurnStart {
  std::span<const float> logits;  // after the prompt's last token (valid until the next call)
  int64_t reused_tokens = 0;      // leading prompt tokens the cache already held
};

class Conversation {
 public:
  // options.n_ctx bounds the whole conversation (every turn's prompt and generated tokens).
  Conversation(const TransformerModel& model, ThreadPool& pool, const SessionOptions& options,
               const KvCacheFactory& make_cache);

  // How many leading tokens of `prompt` the cache holds and can continue from: all it holds
  // when they are a strict prefix of `prompt` (at least one new token is needed for the next
  // logits), or all of `prompt` when it is exactly what a restored state holds (the state
  // carries the logits after its last token); else 0.
  int64_t ReusableTokens(std::span<const int32_t> prompt) const;

  // Feeds `prompt` (the whole conversation so far, rendered) and prepares for up to
  // max_new_tokens generated tokens: continues the run from ReusableTokens(prompt), or starts a
  // new run (the cache forgets everything) when nothing is reusable.
  TurnStart Prefill(std::span<const int32_t> prompt, int64_t max_new_tokens);

  // Generates from the logits Prefill returned; the tokens that went into the cache are
  // appended to tokens() (every generated token but a last one no forward pass needed).
  GenerateResult Generate(const Tokenizer& tokenizer, std::span<const float> logits,
                          const GenerateOptions& options);

  // The tokens the cache holds, in the order they were fed.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // The logits after tokens().back(): empty when unknown (nothing fed, or the session trimmed).
  std::span<const float> next_logits() const;

  // The conversation between turns, for a prompt cache on disk (engine/prompt_cache.h): its
  // tokens, the logits after the last one, the session's state. SaveState needs next_logits().
  // LoadState replaces everything (a conversation built with the same model and KV options);
  // the next Prefill may then continue from every restored token, the last included. Malformed
  // state throws Error and leaves the conversation empty.
  void SaveState(ByteWriter& out) const;
  // Nothing is reusable any more: the next Prefill starts a new run.
  void Forget() {
    tokens_.clear();
    restored_logits_.clear();
  }
  void LoadState(ByteReader& in);
  // The tokens a saved state holds (read from a copy of the reader; nothing is restored).
  static std::vector<int32_t> SavedTokens(ByteReader in);
  Session& session() { return session_; }
  const Session& session() const { return session_; }

 private:
  Session session_;
  std::vector<int32_t> tokens_;
  std::vector<float> restored_logits_;  // after tokens_.back(), until the next forward pass
};

}  // namespace qevict
