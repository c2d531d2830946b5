// Score hooks: scores a KV cache asks for (KvCache::wants_external_scores) that need a pass over
// the model, which the cache cannot make itself -- today KVzip's reconstruction scores
// (engine/reconstruction.h) for qevict-zip and kvzip. The session runs the hook once its run's
// first prompt is stored and before that prompt's end is routed, with the ScoreContext every
// entry point gives it the same way (MakeScoreContext), so that `run`, `chat`, `serve`, `eval`
// and a run continued from a prompt cache compute the same scores for the same prompt
// (docs/kv-cache.md, "Score sources").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace qevict {

class Session;

// What computing a cache's external scores cost.
struct ExternalScoreCost {
  double seconds = 0.0;       // wall time of the whole pass
  int64_t tokens = 0;         // tokens forwarded (repeat prompts + repeated context)
  int64_t chunks = 0;
  int64_t scratch_bytes = 0;  // peak scratch: forward buffers + attention copies + maxima
};

// What a reconstruction pass repeats over the cache: the repeat prompt, then the context.
struct ScoreContext {
  std::vector<int32_t> repeat_prompt;  // RepeatPromptTokens
  std::vector<int32_t> context;        // the context's text as plain tokens (no BOS, no specials)
  int reconstruction_chunk = 512;      // KvConfig::reconstruction_chunk
};

// The context of a run is the text of its first prompt as the user gave it, encoded as plain
// text (no BOS, special tokens not parsed): a raw prompt's text (`run -p/-f`, the server's
// /completion and /v1/completions), or for a chat prompt its user messages' contents joined by
// blank lines (ChatContextText; system messages and the template's markup are not context).
std::shared_ptr<const ScoreContext> MakeScoreContext(const Tokenizer& tokenizer,
                                                     const KvConfig& config,
                                                     std::string_view text);
// A prompt given as token ids (the server's /completion with a token array): those tokens
// without a leading BOS.
std::shared_ptr<const ScoreContext> MakeScoreContext(const Tokenizer& tokenizer,
                                                     const KvConfig& config,
                                                     std::vector<int32_t> prompt_tokens);
std::string ChatContextText(const std::vector<ChatMessage>& messages);

// The line `run`, `chat` and the server's log say once scores were computed:
// "reconstruction scoring: 1234 tokens in 3 chunks, 0.52 s, 12.0 MiB scratch".
std::string DescribeExternalScoreCost(const ExternalScoreCost& cost);

// Before a prompt's end is routed: when the session's cache asks for external scores, computes
// them from `context` and hands them over through the cache's interface; returns their cost,
// or nullopt when the cache asks for none. Throws Error when it asks and there is no context.
std::optional<ExternalScoreCost> ScoreWhatTheCacheWants(Session& session,
                                                        const ScoreContext* context,
                                                        ThreadPool& pool);

}  // namespace qevict
