#include "server/request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <utility>

#include "server/json_fields.h"
#include "server/kv_overrides.h"

namespace qevict::server {
namespace {

using nlohmann::json;


// Options of OpenAI's API that this server does not implement: rejected rather than silently
// ignored when they would change the result.
void RejectUnsupported(const json& body) {
  if (const json* n = OptionalField(body, "n")) {
    if (GetInteger(*n, "n") != 1) {
      Reject("only n = 1 is supported: send one request per choice (with different seeds)", "n",
             "unsupported");
    }
  }
  if (const json* best_of = OptionalField(body, "best_of")) {
    if (GetInteger(*best_of, "best_of") != 1) {
      Reject("only best_of = 1 is supported: leave best_of out", "best_of", "unsupported");
    }
  }
  if (const json* echo = OptionalField(body, "echo")) {
    if (GetBool(*echo, "echo")) {
      Reject("echo is not supported: leave it out and prepend the prompt yourself", "echo",
             "unsupported");
    }
  }
  if (const json* suffix = OptionalField(body, "suffix")) {
    if (!(suffix->is_string() && suffix->get<std::string>().empty())) {
      Reject("suffix is not supported: leave it out (no fill-in-the-middle)", "suffix",
             "unsupported");
    }
  }
  for (const char* key : {"tools", "functions"}) {
    if (const json* v = OptionalField(body, key)) {
      if (!(v->is_array() && v->empty())) {
        Reject(std::string(key) + " (function calling) are not supported: leave '" + key +
                   "' out and describe the tools in the messages",
               key, "unsupported");
      }
    }
  }
  if (const json* format = OptionalField(body, "response_format")) {
    if (!format->is_object()) {
      Reject("'response_format' must be an object, e.g. {\"type\": \"text\"}", "response_format",
             "invalid_type");
    }
    const json* type = OptionalField(*format, "type");
    if (type != nullptr && GetString(*type, "response_format.type") != "text") {
      Reject(
          "only response_format {\"type\": \"text\"} is supported (no JSON mode): leave it "
          "out",
          "response_format", "unsupported");
    }
  }
}

std::vector<std::pair<int32_t, float>> ParseLogitBias(const json& bias, int32_t vocab_size) {
  if (!bias.is_object()) {
    Reject(std::string("'logit_bias' must be an object of token id -> bias, got ") +
               JsonTypeName(bias),
           "logit_bias", "invalid_type");
  }
  if (bias.size() > 1024) {
    Reject("'logit_bias' may hold at most 1024 tokens, got " + std::to_string(bias.size()),
           "logit_bias");
  }
  std::vector<std::pair<int32_t, float>> out;
  for (auto it = bias.begin(); it != bias.end(); ++it) {
    const std::string& key = it.key();
    int64_t id = -1;
    if (!key.empty() && key.size() <= 10 &&
        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      id = std::stoll(key);
    }
    if (id < 0 || id >= vocab_size) {
      Reject("'logit_bias' keys must be token ids in [0, " + std::to_string(vocab_size) +
                 "), got '" + key + "'",
             "logit_bias", "invalid_value");
    }
    out.emplace_back(static_cast<int32_t>(id),
                     static_cast<float>(GetNumberIn(it.value(), "logit_bias." + key, -100, 100)));
  }
  return out;
}

}  // namespace

json ParseRequestBody(std::string_view body) {
  bool too_deep = false;
  json::parser_callback_t depth_guard = [&too_deep](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  json parsed;
  try {
    parsed = json::parse(body.begin(), body.end(), depth_guard);
  } catch (const json::exception& e) {
    // e.what() names the byte position and what was expected (or a number out of range).
    Reject(std::string("the request body is not valid JSON: ") + e.what(), "", "invalid_json");
  }
  if (too_deep) {
    Reject("the request body nests JSON deeper than " + std::to_string(kMaxJsonDepth) + " levels",
           "", "invalid_json");
  }
  if (!parsed.is_object()) {
    Reject(std::string("the request body must be a JSON object, got ") + JsonTypeName(parsed), "",
           "invalid_type");
  }
  return parsed;
}

bool ValidSessionId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' ||
           c == '-';
  });
}

namespace {

std::vector<std::string> ParseStop(const json& stop) {
  std::vector<std::string> out;
  if (stop.is_string()) {
    out.push_back(stop.get<std::string>());
  } else if (stop.is_array()) {
    if (stop.size() > 4) {
      Reject("'stop' may hold at most 4 sequences, got " + std::to_string(stop.size()), "stop",
             "invalid_value");
    }
    for (size_t i = 0; i < stop.size(); ++i) {
      out.push_back(GetString(stop[i], "stop[" + std::to_string(i) + "]"));
    }
  } else {
    Reject(std::string("'stop' must be a string or an array of strings, got ") + JsonTypeName(stop),
           "stop", "invalid_type");
  }
  std::erase_if(out, [](const std::string& s) { return s.empty(); });
  return out;
}

GenerationParams ParseGenerationParams(const json& body, const RequestDefaults& defaults,
                                       const char* max_tokens_key) {
  RejectUnsupported(body);
  GenerationParams p;
  if (const json* v = OptionalField(body, "model")) p.model = GetString(*v, "model");
  const json* max_tokens = OptionalField(body, max_tokens_key);
  if (max_tokens == nullptr) max_tokens = OptionalField(body, "max_tokens");
  if (max_tokens != nullptr) {
    const int64_t n = GetInteger(*max_tokens, "max_tokens");
    if (n < 1) {
      Reject("'max_tokens' must be at least 1, got " + std::to_string(n), "max_tokens",
             "invalid_value");
    }
    if (n >= defaults.context_tokens) {
      Reject("'max_tokens' of " + std::to_string(n) + " does not fit this model's context of " +
                 std::to_string(defaults.context_tokens) +
                 " tokens (prompt + max_tokens must fit); lower max_tokens",
             "max_tokens", "context_length_exceeded");
    }
    p.max_tokens = n;
  }
  if (const json* v = OptionalField(body, "temperature")) {
    p.temperature = static_cast<float>(GetNumberIn(*v, "temperature", 0.0, 2.0));
  }
  if (const json* v = OptionalField(body, "top_p")) {
    const double top_p = GetNumberIn(*v, "top_p", 0.0, 1.0);
    // top_p 0 keeps only the most likely token, as the smallest positive nucleus does.
    p.top_p = top_p > 0.0 ? static_cast<float>(top_p) : std::numeric_limits<float>::min();
  }
  if (const json* v = OptionalField(body, "top_k")) {
    p.top_k = static_cast<int>(GetIntegerIn(*v, "top_k", 0, defaults.vocab_size));
  }
  if (const json* v = OptionalField(body, "min_p")) {
    p.min_p = static_cast<float>(GetNumberIn(*v, "min_p", 0.0, 1.0));
  }
  if (const json* v = OptionalField(body, "repeat_penalty")) {
    p.repeat_penalty = static_cast<float>(GetNumberIn(*v, "repeat_penalty", 0.01, 100.0));
  }
  if (const json* v = OptionalField(body, "repeat_last_n")) {
    p.repeat_last_n = static_cast<int>(
        GetIntegerIn(*v, "repeat_last_n", -1, std::numeric_limits<int32_t>::max()));
  }
  if (const json* v = OptionalField(body, "presence_penalty")) {
    p.presence_penalty = static_cast<float>(GetNumberIn(*v, "presence_penalty", -2.0, 2.0));
  }
  if (const json* v = OptionalField(body, "frequency_penalty")) {
    p.frequency_penalty = static_cast<float>(GetNumberIn(*v, "frequency_penalty", -2.0, 2.0));
  }
  if (const json* v = OptionalField(body, "logit_bias")) {
    p.logit_bias = ParseLogitBias(*v, defaults.vocab_size);
  }
  if (const json* v = OptionalField(body, "seed")) {
    p.seed = static_cast<uint64_t>(GetInteger(*v, "seed"));
  }
  if (const json* v = OptionalField(body, "stop")) p.stop = ParseStop(*v);
  if (const json* v = OptionalField(body, "stream")) p.stream = GetBool(*v, "stream");
  if (const json* v = OptionalField(body, "stream_options")) {
    if (!p.stream) {
      Reject(
          "'stream_options' is only allowed when 'stream' is true: add \"stream\": true or "
          "drop stream_options",
          "stream_options", "invalid_value");
    }
    if (!v->is_object()) {
      Reject(std::string("'stream_options' must be an object, got ") + JsonTypeName(*v),
             "stream_options", "invalid_type");
    }
    if (const json* usage = OptionalField(*v, "include_usage")) {
      p.include_usage = GetBool(*usage, "stream_options.include_usage");
    }
  }
  const json* kv = OptionalField(body, "kv");
  p.kv = kv != nullptr ? ApplyKvOverrides(*kv, defaults.kv) : defaults.kv;
  if (const json* v = OptionalField(body, "session_id")) {
    p.session_id = GetString(*v, "session_id");
    if (!ValidSessionId(p.session_id)) {
      Reject("'session_id' must be 1-128 characters of letters, digits and . _ : -",
             "session_id", "invalid_value");
    }
  }
  if (const json* v = OptionalField(body, "cache_prompt")) {
    p.cache_prompt = GetBool(*v, "cache_prompt");
  }
  return p;
}

std::string MessageContent(const json& content, const std::string& param) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    Reject(
        "'" + param + "' must be a string or an array of text parts, got " + JsonTypeName(content),
        param, "invalid_type");
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string part_param = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) {
      Reject("'" + part_param + "' must be an object, e.g. {\"type\": \"text\", \"text\": ...}",
             part_param, "invalid_type");
    }
    const json* type = OptionalField(part, "type");
    if (type == nullptr || GetString(*type, part_param + ".type") != "text") {
      Reject("only text content parts are supported ('" + part_param +
                 ".type' must be \"text\"): send the text as {\"type\": \"text\", \"text\": ...}",
             part_param + ".type", "unsupported");
    }
    const json* part_text = OptionalField(part, "text");
    if (part_text == nullptr) Reject("'" + part_param + ".text' is required", part_param + ".text");
    text += GetString(*part_text, part_param + ".text");
  }
  return text;
}

std::vector<ChatMessage> ParseMessages(const json& body) {
  const json* messages = OptionalField(body, "messages");
  if (messages == nullptr) Reject("'messages' is required", "messages", "missing_required_field");
  if (!messages->is_array()) {
    Reject(std::string("'messages' must be an array, got ") + JsonTypeName(*messages), "messages",
           "invalid_type");
  }
  if (messages->empty()) {
    Reject("'messages' must not be empty: give at least one {\"role\": \"user\", \"content\": ...}",
           "messages", "invalid_value");
  }
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) {
      Reject("'" + param + "' must be an object, got " + JsonTypeName(m), param, "invalid_type");
    }
    const json* role = OptionalField(m, "role");
    if (role == nullptr) Reject("'" + param + ".role' is required", param + ".role");
    std::string r = GetString(*role, param + ".role");
    if (r == "developer") r = "system";  // OpenAI's newer name for system instructions
    if (r != "system" && r != "user" && r != "assistant") {
      Reject("'" + param + ".role' must be 'system', 'developer', 'user' or 'assistant', got '" +
                 r + "'",
             param + ".role", "invalid_value");
    }
    if (!m.contains("content")) Reject("'" + param + ".content' is required", param + ".content");
    out.push_back({r, MessageContent(m["content"], param + ".content")});
  }
  return out;
}

void ParsePrompt(const json& body, int32_t vocab_size, CompletionRequest& request) {
  const json* prompt = OptionalField(body, "prompt");
  if (prompt == nullptr) Reject("'prompt' is required", "prompt", "missing_required_field");
  const json* one = prompt;
  if (prompt->is_array() && !prompt->empty() && !(*prompt)[0].is_number()) {
    if (prompt->size() != 1) {
      Reject("only one prompt per request is supported, got " + std::to_string(prompt->size()),
             "prompt", "unsupported");
    }
    one = &(*prompt)[0];
  }
  if (one->is_string()) {
    request.prompt_text = one->get<std::string>();
    return;
  }
  if (!one->is_array()) {
    Reject(std::string("'prompt' must be a string, an array of token ids, or an array of one of "
                       "those, got ") +
               JsonTypeName(*one),
           "prompt", "invalid_type");
  }
  if (one->empty()) Reject("'prompt' must not be empty", "prompt", "invalid_value");
  for (size_t i = 0; i < one->size(); ++i) {
    request.prompt_tokens.push_back(static_cast<int32_t>(
        GetIntegerIn((*one)[i], "prompt[" + std::to_string(i) + "]", 0, vocab_size - 1)));
  }
}

}  // namespace

std::variant<ChatRequest, ApiError> ParseChatRequest(std::string_view body,
                                                     const RequestDefaults& defaults) {
  try {
    const json parsed = ParseRequestBody(body);
    ChatRequest request;
    request.messages = ParseMessages(parsed);
    request.params = ParseGenerationParams(parsed, defaults, "max_completion_tokens");
    const json* logprobs = OptionalField(parsed, "logprobs");
    const bool wants = logprobs != nullptr && GetBool(*logprobs, "logprobs");
    if (const json* top = OptionalField(parsed, "top_logprobs")) {
      if (!wants) {
        Reject("'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value");
      }
      request.params.top_logprobs = static_cast<int>(GetIntegerIn(*top, "top_logprobs", 0, 20));
    } else if (wants) {
      request.params.top_logprobs = 0;
    }
    return request;
  } catch (const RequestRejected& rejected) {
    return rejected.error;
  }
}

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body,
                                                                 const RequestDefaults& defaults) {
  try {
    const json parsed = ParseRequestBody(body);
    CompletionRequest request;
    ParsePrompt(parsed, defaults.vocab_size, request);
    request.params = ParseGenerationParams(parsed, defaults, "max_tokens");
    if (const json* logprobs = OptionalField(parsed, "logprobs")) {
      request.params.top_logprobs = static_cast<int>(GetIntegerIn(*logprobs, "logprobs", 0, 5));
    }
    return request;
  } catch (const RequestRejected& rejected) {
    return rejected.error;
  }
}

}  // namespace qevict::server
