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
  std::vector<std::string> stop;  // stop strings (not included in the output)
  // Called with each chunk of complete UTF-8 text as it is produced; return false to stop.
  std::function<bool(std::string_view text)> on_text;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (end-of-generation token excluded)
  std::string text;
  std::string finish_reason;  // "stop" (EOG or stop string), "length", or "cancelled"
  std::vector<TokenLogprob> logprobs;  // one per token, with options.top_logprobs >= 0
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
