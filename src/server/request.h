// Request parsing and validation for the OpenAI-compatible endpoints. Pure functions from the
// body text to a validated request or an ApiError (status + OpenAI error object): no model, no
// I/O, no globals, so they can be fuzzed on their own. Checks that need the prompt's token count
// (prompt + max_tokens within the context) happen after tokenization, in the handler.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kv/kv_config.h"
#include "server/api_error.h"
#include "tokenizer/chat_template.h"

namespace qevict::server {

// What a request inherits when it does not say: the server's flags.
struct RequestDefaults {
  KvConfig kv;                 // the --kv-* flags, already validated
  int64_t context_tokens = 0;  // most prompt + completion tokens one request may use (> 0)
  int32_t vocab_size = 0;      // token-id prompts must stay below this (> 0)
};

// Fields shared by /v1/chat/completions and /v1/completions.
struct GenerationParams {
  std::string model;                  // as sent ("" when absent); the server has one model
  std::optional<int64_t> max_tokens;  // nullopt: the endpoint's default
  // Sampling defaults are `qevict run`'s and llama.cpp's (docs/server.md, "Sampling"), not
  // OpenAI's temperature 1 / top_p 1: one meaning for an absent field in every command.
  float temperature = 0.8f;  // 0 = greedy
  float top_p = 0.95f;
  int top_k = 40;                 // extension (llama.cpp's); 0 = off
  float min_p = 0.05f;            // extension (llama.cpp's); 0 = off
  float repeat_penalty = 1.0f;    // extension (llama.cpp's); 1 = off
  // Extension (llama.cpp's): the penalties' window, the last N tokens of prompt + generated;
  // -1 = all of them, 0 = no penalties.
  int repeat_last_n = 64;
  float presence_penalty = 0.0f;  // OpenAI's, [-2, 2]
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // OpenAI's: token id -> [-100, 100]
  std::optional<uint64_t> seed;   // nullopt: a fresh random seed
  // Log-probabilities: -1 none; else each token's and this many alternatives (chat: logprobs
  // true + top_logprobs 0-20; completions: logprobs 0-5).
  int top_logprobs = -1;
  std::vector<std::string> stop;  // at most 4, none empty
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  KvConfig kv;                 // defaults with the request's "kv" object applied, validated
  // Kept sessions (docs/server.md): the conversation this request continues, by name ("" = any
  // kept conversation whose tokens the prompt extends), and whether to reuse and keep a cache
  // at all (llama.cpp's cache_prompt).
  std::string session_id;
  bool cache_prompt = true;
};

// A session id from the body or the X-Session-Id header: 1-128 characters of [A-Za-z0-9._:-].
bool ValidSessionId(std::string_view id);

// The body as a JSON object (at most kMaxJsonDepth levels); throws RequestRejected otherwise.
nlohmann::json ParseRequestBody(std::string_view body);

struct ChatRequest {
  std::vector<ChatMessage> messages;  // roles normalized to system / user / assistant
  GenerationParams params;
};

struct CompletionRequest {
  // Exactly one of the two: a text prompt, or a prompt given as token ids.
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_tokens;
  GenerationParams params;
};

// Largest body the parsers are meant for; the HTTP layer rejects larger ones with 413.
inline constexpr size_t kDefaultMaxBodyBytes = size_t{8} << 20;
// JSON nested deeper than this is rejected (no request needs more than a few levels).
inline constexpr int kMaxJsonDepth = 64;

std::variant<ChatRequest, ApiError> ParseChatRequest(std::string_view body,
                                                     const RequestDefaults& defaults);
std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body,
                                                                 const RequestDefaults& defaults);

}  // namespace qevict::server
