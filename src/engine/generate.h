// The generation loop shared by the CLI, the evaluator and the server.
#pragma once

#include <functional>
#include <span>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampler.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace qevict {

// A generated token's log-probability and the most likely alternatives at its step.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // most likely first
};

// Log-probabilities under the model's own distribution (softmax of the logits at temperature 1,
// before sampling's temperature, penalties and truncation, as OpenAI reports them).
TokenLogprob TokenLogprobs(std::span<const float> logits, int32_t token, int top);

struct GenerateOptions {
  int max_new_tokens = 128;
  int top_logprobs = -1;  // >= 0: record each token's logprob and this many alternatives
  SamplerOptions sampling;
  // The tokens the model has seen before this generation (the prompt; in a conversation, all of
  // it): the repetition penalties' window starts in them (SamplerOptions::repeat_last_n).
  std::span<const int32_t> seen_tokens;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  // Called with each chunk of complete UTF-8 text as it is produced; return false to stop.
  std::function<bool(std::string_view text)> on_text;
  // Instead of on_text when set: each chunk with the logprobs of the tokens it releases (see
  // GenerateResult::logprobs), called with empty text when a chunk releases logprobs only.
  std::function<bool(std::string_view text, std::span<const TokenLogprob> logprobs)> on_chunk;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (end-of-generation token excluded)
  std::string text;
  std::string finish_reason;  // "stop" (EOG or stop string), "length", or "cancelled"
  // With options.top_logprobs >= 0: one per token whose text is in `text`, in order. A token is
  // released with the chunk that releases the end of its text (text held back for a stop string
  // or an incomplete UTF-8 character waits); at a stop string, a token whose text begins before
  // the cut is released with the last chunk, and the tokens whose text lies wholly in the stop
  // string or after it are dropped (they count in `tokens`, not here).
  std::vector<TokenLogprob> logprobs;
};

// Continues a session whose prompt has been prefilled; `logits` are those Prefill returned.
GenerateResult Generate(Session& session, const Tokenizer& tokenizer, std::span<const float> logits,
                        const GenerateOptions& options);

// Splits a byte stream into complete UTF-8 characters, holding back a partial sequence.
class Utf8Stream {
 public:
  std::string Push(std::string_view bytes);  // complete text available now
  std::string Flush();                       // whatever is left (possibly invalid)

 private:
  std::string pending_;
};

}  // namespace qevict
