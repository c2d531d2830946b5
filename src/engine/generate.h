// The generation loop shared by the CLI, the evaluator and the server.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampler.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace qevict {

struct GenerateOptions {
  int max_new_tokens = 128;
  SamplerOptions sampling;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  // Called with each chunk of complete UTF-8 text as it is produced; return false to stop.
  std::function<bool(std::string_view text)> on_text;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (end-of-generation token excluded)
  std::string text;
  std::string finish_reason;  // "stop" (EOG or stop string), "length", or "cancelled"
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
