// Fuzz target "http_request": arbitrary bytes as the body of POST /v1/chat/completions and
// POST /v1/completions. The parsers are pure functions from the body to a validated request or
// an OpenAI-style error; whatever the bytes, the result must be one of the two, an error must
// carry a 4xx status and a message, and an accepted request must satisfy what the handlers rely
// on (validated KV settings, max_tokens within the context, ids within the vocabulary).
//
// Input: one flags byte (bit 0: completions instead of chat), then the body.
//
// Links: qevict_server
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_target.h"
#include "server/request.h"

namespace qevict::fuzz {

inline void CheckError(const server::ApiError& e) {
  Require(e.status >= 400 && e.status < 500, "request parser returned a non-4xx error");
  Require(!e.message.empty(), "request parser returned an error without a message");
  // The body the server sends (messages may quote invalid UTF-8 from the request; Body()
  // replaces it) must itself be valid JSON.
  Require(!nlohmann::json::parse(e.Body(), nullptr, false).is_discarded(),
          "error body is not valid JSON");
}

inline void CheckParams(const server::GenerationParams& p, const server::RequestDefaults& d) {
  p.kv.Validate();  // throws qevict::Error (not caught below) if the parser let a bad one through
  Require(!p.max_tokens || (*p.max_tokens >= 0 && *p.max_tokens <= d.context_tokens),
          "accepted max_tokens outside [0, context]");
  Require(p.stop.size() <= 4, "accepted more than 4 stop strings");
  for (const auto& s : p.stop) Require(!s.empty(), "accepted an empty stop string");
}

inline int FuzzHttpRequestBytes(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  server::RequestDefaults defaults;
  defaults.kv.policy = "full";
  defaults.context_tokens = 8192;
  defaults.vocab_size = 49152;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) {
    auto r = server::ParseCompletionRequest(body, defaults);
    if (auto* e = std::get_if<server::ApiError>(&r)) {
      CheckError(*e);
    } else {
      const auto& c = std::get<server::CompletionRequest>(r);
      CheckParams(c.params, defaults);
      Require(c.prompt_text.has_value() == c.prompt_tokens.empty(),
              "completion request with neither or both prompt forms");
      for (int32_t id : c.prompt_tokens) {
        Require(id >= 0 && id < defaults.vocab_size, "accepted a token id outside the vocab");
      }
    }
  } else {
    auto r = server::ParseChatRequest(body, defaults);
    if (auto* e = std::get_if<server::ApiError>(&r)) {
      CheckError(*e);
    } else {
      const auto& c = std::get<server::ChatRequest>(r);
      CheckParams(c.params, defaults);
      Require(!c.messages.empty(), "accepted a chat request without messages");
    }
  }
  return 0;
}

inline const bool kHttpRequestTargetRegistered =
    RegisterFuzzTarget("http_request", &FuzzHttpRequestBytes);

}  // namespace qevict::fuzz
