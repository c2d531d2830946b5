// OpenAI response bodies: completions and chat completions (whole, and as server-sent-event
// chunks), usage, the model list, and the "kv" extension object with the cache's statistics.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "engine/generate.h"
#include "kv/kv_cache.h"
#include "tokenizer/tokenizer.h"

namespace qevict::server {

enum class Endpoint { kChat, kCompletion };

// What every body and chunk of one response repeats.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::kChat;
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens a kept conversation already held (not prefilled)
};

ResponseHeader NewResponseHeader(Endpoint endpoint, const std::string& model);

nlohmann::json UsageJson(const Usage& usage);
// Extension: the cache's policy and statistics at the end of the run.
nlohmann::json KvStatsJson(const std::string& policy, const KvStats& stats);

// OpenAI's logprobs object for generated tokens (chat: {"content": [...]}; completions:
// tokens / token_logprobs / top_logprobs / text_offset, the offsets counted from
// `first_offset`, where the first token's text begins in the answer); null when none were
// asked for. A streamed chunk carries the tokens it releases (GenerateResult::logprobs).
nlohmann::json LogprobsJson(const ResponseHeader& header, const Tokenizer& tokenizer,
                            std::span<const TokenLogprob> logprobs, bool asked,
                            size_t first_offset = 0);

// A whole (non-streamed) response.

nlohmann::json CompletionBody(const ResponseHeader& header, const std::string& text,
                              const std::string& finish_reason, const Usage& usage,
                              const nlohmann::json& kv,
                              const nlohmann::json& logprobs = nullptr);

// Streamed chunks. The first chat chunk carries the role; text chunks carry content; the last
// carries the finish reason (and the kv extension object); with stream_options.include_usage a
// final chunk with empty choices carries the usage.
nlohmann::json RoleChunk(const ResponseHeader& header);
nlohmann::json TextChunk(const ResponseHeader& header, std::string_view text,
                         const nlohmann::json& logprobs = nullptr);
nlohmann::json FinishChunk(const ResponseHeader& header, const std::string& finish_reason,
                           const nlohmann::json& kv);
nlohmann::json UsageChunk(const ResponseHeader& header, const Usage& usage);

// "data: <json>\n\n"
std::string SseEvent(const nlohmann::json& payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

nlohmann::json ModelObject(const std::string& model_id, int64_t created);
nlohmann::json ModelList(const std::string& model_id, int64_t created);

}  // namespace qevict::server
