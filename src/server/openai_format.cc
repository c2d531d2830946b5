#include "server/openai_format.h"

#include <chrono>
#include <random>

#include "engine/kv_stats_json.h"
#include "server/api_error.h"

namespace qevict::server {
namespace {

using nlohmann::json;

std::string RandomHex(int digits) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(static_cast<size_t>(digits), '0');
  for (char& c : out) c = kHex[rng() & 15];
  return out;
}

const char* ObjectName(Endpoint endpoint, bool chunk) {
  if (endpoint == Endpoint::kCompletion) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

json Envelope(const ResponseHeader& h, bool chunk, json choices) {
  return {{"id", h.id},
          {"object", ObjectName(h.endpoint, chunk)},
          {"created", h.created},
          {"model", h.model},
          {"system_fingerprint", nullptr},
          {"choices", std::move(choices)}};
}

// One streamed choice: a chat delta or a completion's text.
json ChunkChoice(const ResponseHeader& h, json delta, std::string_view text,
                 const json& finish_reason) {
  if (h.endpoint == Endpoint::kChat) {
    return {{"index", 0},
            {"delta", std::move(delta)},
            {"logprobs", nullptr},
            {"finish_reason", finish_reason}};
  }
  return {{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
}

}  // namespace

ResponseHeader NewResponseHeader(Endpoint endpoint, const std::string& model) {
  ResponseHeader h;
  h.endpoint = endpoint;
  h.id = (endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + RandomHex(24);
  h.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  h.model = model;
  return h;
}

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

// The engine's KvStats JSON (the same fields `qevict run --kv-stats --json` prints: the ledger,
// what the pools hold mapped, the process RSS), with the policy, and a warning a client can show
// when the budget could not be met.
json KvStatsJson(const std::string& policy, const KvStats& s) {
  json j = KvStatsToJson(s);
  j["policy"] = policy;
  if (s.infeasible) j["warning"] = "the KV budget cannot be met: " + s.note;
  return j;
}

json LogprobsJson(const ResponseHeader& h, const Tokenizer& tokenizer,
                  std::span<const TokenLogprob> logprobs, bool asked, size_t first_offset) {
  if (!asked) return nullptr;
  auto bytes = [](const std::string& piece) {
    json out = json::array();
    for (unsigned char c : piece) out.push_back(static_cast<int>(c));
    return out;
  };
  if (h.endpoint == Endpoint::kChat) {
    json content = json::array();
    for (const TokenLogprob& t : logprobs) {
      const std::string piece = tokenizer.TokenToPiece(t.token);
      json top = json::array();
      for (const auto& [id, lp] : t.top) {
        const std::string alt = tokenizer.TokenToPiece(id);
        top.push_back({{"token", alt}, {"logprob", lp}, {"bytes", bytes(alt)}});
      }
      content.push_back(
          {{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes(piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  size_t offset = first_offset;
  for (const TokenLogprob& t : logprobs) {
    const std::string piece = tokenizer.TokenToPiece(t.token);
    tokens.push_back(piece);
    token_logprobs.push_back(t.logprob);
    json alternatives = json::object();
    for (const auto& [id, lp] : t.top) alternatives[tokenizer.TokenToPiece(id)] = lp;
    top.push_back(alternatives);
    offsets.push_back(offset);
    offset += piece.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

json CompletionBody(const ResponseHeader& h, const std::string& text,
                    const std::string& finish_reason, const Usage& usage, const json& kv,
                    const json& logprobs) {
  json choice;
  if (h.endpoint == Endpoint::kChat) {
    choice = {{"index", 0},
              {"message", {{"role", "assistant"}, {"content", text}}},
              {"logprobs", logprobs},
              {"finish_reason", finish_reason}};
  } else {
    choice = {
        {"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
  }
  json body = Envelope(h, /*chunk=*/false, json::array({std::move(choice)}));
  body["usage"] = UsageJson(usage);
  if (!kv.is_null()) body["kv"] = kv;
  return body;
}

json RoleChunk(const ResponseHeader& h) {
  return Envelope(
      h, true,
      json::array({ChunkChoice(h, {{"role", "assistant"}, {"content", ""}}, "", nullptr)}));
}

json TextChunk(const ResponseHeader& h, std::string_view text, const json& logprobs) {
  json chunk = Envelope(h, true, json::array({ChunkChoice(h, {{"content", text}}, text, nullptr)}));
  if (!logprobs.is_null()) chunk["choices"][0]["logprobs"] = logprobs;
  return chunk;
}

json FinishChunk(const ResponseHeader& h, const std::string& finish_reason, const json& kv) {
  json chunk = Envelope(h, true, json::array({ChunkChoice(h, json::object(), "", finish_reason)}));
  if (!kv.is_null()) chunk["kv"] = kv;
  return chunk;
}

json UsageChunk(const ResponseHeader& h, const Usage& usage) {
  json chunk = Envelope(h, true, json::array());
  chunk["usage"] = UsageJson(usage);
  return chunk;
}

std::string SseEvent(const json& payload) { return "data: " + DumpJson(payload) + "\n\n"; }

json ModelObject(const std::string& model_id, int64_t created) {
  return {{"id", model_id}, {"object", "model"}, {"created", created}, {"owned_by", "qevict"}};
}

json ModelList(const std::string& model_id, int64_t created) {
  return {{"object", "list"}, {"data", json::array({ModelObject(model_id, created)})}};
}

}  // namespace qevict::server
