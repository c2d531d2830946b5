#include "server/completion_handler.h"

#include <chrono>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <variant>

#include "kv/disk_cold_store.h"
#include "policy/registry.h"
#include "server/generation.h"
#include "server/kv_reservation.h"
#include "server/request_log.h"
#include "util/error.h"

namespace qevict::server {
namespace {

using nlohmann::json;

constexpr int64_t kCompletionDefaultMaxTokens = 16;  // OpenAI's default for /v1/completions
// A chat request without max_tokens may generate until the context is full (OpenAI), but its KV
// budget counts the prompt and this many new tokens, as `qevict run -n`'s default does, so that
// a budget fraction means the same in both (docs/server.md, "The budget").
constexpr int64_t kBudgetDefaultNewTokens = 128;

// A validated request with its prompt tokenized and its length settled.
struct PreparedRequest {
  GenerationParams params;
  std::vector<int32_t> prompt;
  // What score hooks reconstruct (engine/score_hooks.h): the same rule as `qevict run`'s.
  std::shared_ptr<const ScoreContext> score_context;
  int64_t max_tokens = 0;
  int64_t budget_new_tokens = 0;  // new tokens the budget fraction counts (<= max_tokens)
};

std::variant<PreparedRequest, ApiError> Prepare(const ServerContext& ctx, Endpoint endpoint,
                                                const std::string& body) {
  PreparedRequest out;
  try {
    if (endpoint == Endpoint::kChat) {
      auto parsed = ParseChatRequest(body, ctx.defaults);
      if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
      ChatRequest& chat = std::get<ChatRequest>(parsed);
      if (!ctx.model->chat) {
        return InvalidRequest(
            "this model has no chat template qevict can render: send a raw "
            "prompt to /v1/completions, or restart the server with "
            "--chat-template NAME (chatml, llama3, llama2, gemma, phi3)",
            "messages");
      }
      out.params = std::move(chat.params);
      out.prompt = ctx.model->EncodeChat(chat.messages, /*add_generation_prompt=*/true);
      out.score_context = MakeScoreContext(*ctx.model->tokenizer, out.params.kv,
                                           ChatContextText(chat.messages));
    } else {
      auto parsed = ParseCompletionRequest(body, ctx.defaults);
      if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
      CompletionRequest& completion = std::get<CompletionRequest>(parsed);
      out.params = std::move(completion.params);
      out.prompt = completion.prompt_text ? ctx.model->EncodeRaw(*completion.prompt_text)
                                          : std::move(completion.prompt_tokens);
      out.score_context =
          completion.prompt_text
              ? MakeScoreContext(*ctx.model->tokenizer, out.params.kv, *completion.prompt_text)
              : MakeScoreContext(*ctx.model->tokenizer, out.params.kv, out.prompt);
    }
  } catch (const Error& e) {  // the chat template refuses these messages
    return InvalidRequest(e.what(), endpoint == Endpoint::kChat ? "messages" : "prompt");
  }
  if (out.prompt.empty()) {
    return InvalidRequest("the prompt encodes to no tokens: send a non-empty prompt", "prompt",
                          "empty_prompt");
  }
  // A policy that routes on reconstruction scores needs text to reconstruct (a request of only
  // special tokens, or only a system message, has none): refused, never run without them.
  const KvConfig& kv = out.params.kv;
  if (out.score_context->context.empty() && IsTieredPolicy(kv.policy) &&
      kv.score_source == ScoreSource::kReconstruction && MakePolicy(kv)->wants_external_scores()) {
    return InvalidRequest("kv policy '" + kv.policy +
                              "' routes on reconstruction scores, and this prompt has no user "
                              "text to reconstruct: send one, or set kv.score_source to "
                              "\"expected-attention\" or \"key-norm\"",
                          endpoint == Endpoint::kChat ? "messages" : "prompt");
  }
  const int64_t context = ctx.defaults.context_tokens;
  const int64_t prompt = static_cast<int64_t>(out.prompt.size());
  const int64_t room = context - prompt;
  if (out.params.max_tokens) {
    out.max_tokens = *out.params.max_tokens;
  } else if (ctx.default_max_tokens > 0) {
    out.max_tokens = std::min(ctx.default_max_tokens, room);
  } else {
    out.max_tokens =
        endpoint == Endpoint::kChat ? room : std::min(kCompletionDefaultMaxTokens, room);
  }
  const bool open_ended =
      !out.params.max_tokens && ctx.default_max_tokens <= 0 && endpoint == Endpoint::kChat;
  out.budget_new_tokens =
      open_ended ? std::min(out.max_tokens, kBudgetDefaultNewTokens) : out.max_tokens;
  if (room < 1 || prompt + out.max_tokens > context) {
    const int64_t requested = prompt + std::max<int64_t>(out.max_tokens, 1);
    return InvalidRequest(
        "this model's maximum context length is " + std::to_string(context) + " tokens, but " +
            std::to_string(requested) + " were requested (" + std::to_string(prompt) +
            " in the prompt, " + std::to_string(out.max_tokens) +
            " for the completion); shorten the prompt or lower max_tokens",
        out.params.max_tokens ? "max_tokens"
                              : (endpoint == Endpoint::kChat ? "messages" : "prompt"),
        "context_length_exceeded");
  }
  return out;
}

GenerationJob MakeJob(const ServerContext& ctx, PreparedRequest& request) {
  GenerationJob job;
  job.n_ctx = ctx.defaults.context_tokens;
  job.prompt = std::move(request.prompt);
  job.score_context = std::move(request.score_context);
  job.max_tokens = request.max_tokens;
  job.budget_new_tokens = request.budget_new_tokens;
  job.sampling.temperature = request.params.temperature;
  job.sampling.top_p = request.params.top_p;
  job.sampling.top_k = request.params.top_k;
  job.sampling.min_p = request.params.min_p;
  job.sampling.repeat_penalty = request.params.repeat_penalty;
  job.sampling.repeat_last_n = request.params.repeat_last_n;
  job.sampling.presence_penalty = request.params.presence_penalty;
  job.sampling.frequency_penalty = request.params.frequency_penalty;
  job.sampling.logit_bias = request.params.logit_bias;
  job.sampling.seed = request.params.seed ? *request.params.seed : std::random_device{}();
  job.stop = request.params.stop;
  job.top_logprobs = request.params.top_logprobs;
  job.kv = request.params.kv;
  job.batch = ctx.batch;
  job.keep = request.params.cache_prompt;
  job.session_id = request.params.session_id;
  job.kv_key = KvConfigKey(request.params.kv);
  return job;
}

// A kept conversation found for a request and pinned until the request takes it or gives up.
class PinnedConversation {
 public:
  PinnedConversation(SessionStore* store, std::optional<SessionStore::Found> found)
      : store_(store), found_(found) {}
  ~PinnedConversation() {
    if (found_) store_->Unpin(found_->id);
  }
  PinnedConversation(const PinnedConversation&) = delete;
  PinnedConversation& operator=(const PinnedConversation&) = delete;

  int64_t bytes() const { return found_ ? found_->bytes : 0; }
  std::unique_ptr<Conversation> Take() {
    if (!found_) return nullptr;
    auto out = store_->Take(found_->id, found_->reusable_tokens);
    found_.reset();
    return out;
  }

 private:
  SessionStore* store_;
  std::optional<SessionStore::Found> found_;
};

// Non-streamed responses are written only when the generation is done; until then a space (JSON
// allows leading whitespace) goes out after every second without output, which is how a client
// that went away is noticed: the write fails and the generation is cancelled.
constexpr auto kHeartbeatInterval = std::chrono::seconds(1);

bool WriteEvent(httplib::DataSink& sink, std::string_view event) {
  return sink.is_writable() && sink.write(event.data(), event.size());
}

// The request log's figures of a generation that ran to its end (request_log.h).
void LogGeneration(const GenerationRun& run, const GenerationOutcome& outcome) {
  GenerationLogFields fields;
  fields.prompt_tokens = static_cast<int64_t>(run.job().prompt.size());
  fields.cached_tokens = run.reused_tokens();
  fields.generated_tokens = static_cast<int64_t>(outcome.result.tokens.size());
  if (fields.generated_tokens > 0 && run.decode_seconds() > 0.0) {  // as /metrics computes it
    fields.decode_tokens_per_second =
        static_cast<double>(fields.generated_tokens) / run.decode_seconds();
  }
  fields.policy = run.job().kv.policy;
  fields.resident_bytes = outcome.kv.resident_bytes();
  CurrentRequestLog().generation = fields;
}

// A fault of the request's cold tier (kv/disk_cold_store.h), during `what` ("prefill",
// "generation"): 507 cold_store_full when it ran out of room (the disk, or the session's
// --kv-cold-disk-limit, or the server's --kv-cold-disk-total), 500 cold_store_error when its file was damaged or could not be read or
// written. The message names the file and the way out. The conversation is not kept: its cache
// is freed with its cold file, and its disk space returns (GenerationRun::Finish).
ApiError ColdStoreFailure(const std::string& what, const ColdStoreError& e) {
  if (e.kind() == ColdStoreError::Kind::kNoRoom) {
    return InsufficientStorage(what + " failed: the session's cold tier has no room: " + e.what() +
                                   ". In a request: a larger kv.budget (more in RAM) "
                                   "or a shorter conversation; the server's operator sets "
                                   "--kv-cold-disk-limit, --kv-cold-disk-total and "
                                   "--kv-cold-dir. The session was "
                                   "dropped",
                               "cold_store_full");
  }
  ApiError error = InternalError(what + " failed: the session's cold tier failed: " + e.what() +
                                 ". The session was dropped");
  error.code = "cold_store_error";
  return error;
}

// Generate, with engine failures turned into an ApiError.
std::variant<GenerationOutcome, ApiError> GenerateOrError(GenerationRun& run,
                                                          const ChunkCallback& on_chunk) {
  try {
    return run.Generate(on_chunk);
  } catch (const ColdStoreError& e) {
    return ColdStoreFailure("generation", e);
  } catch (const Error& e) {
    return InternalError(std::string("generation failed: ") + e.what());
  } catch (const std::bad_alloc&) {
    return InternalError("generation failed: out of memory");
  }
}

// Streams the generation as server-sent events; returns false when the client went away (the
// connection is then closed).
bool StreamGeneration(const ServerContext& ctx, GenerationRun& run, const ResponseHeader& h,
                      bool include_usage, httplib::DataSink& sink) {
  bool client_gone = false;
  if (h.endpoint == Endpoint::kChat && !WriteEvent(sink, SseEvent(RoleChunk(h)))) {
    client_gone = true;
    run.Finish();
  }
  std::variant<GenerationOutcome, ApiError> result = ApiError{};
  if (!client_gone) {
    // Each chunk carries the logprobs of the tokens it releases; completions' text_offset
    // counts on from the tokens sent before.
    const bool logprobs_asked = run.job().top_logprobs >= 0;
    size_t text_offset = 0;
    // This thread's entry: the chunks come on the slot's thread.
    RequestLogEntry& log_entry = CurrentRequestLog();
    result =
        GenerateOrError(run, [&](std::string_view text, std::span<const TokenLogprob> logprobs) {
          NoteFirstToken(log_entry);
          const json chunk_logprobs =
              LogprobsJson(h, *ctx.model->tokenizer, logprobs, logprobs_asked, text_offset);
          for (const TokenLogprob& t : logprobs) {
            text_offset += ctx.model->tokenizer->TokenToPiece(t.token).size();
          }
          if (WriteEvent(sink, SseEvent(TextChunk(h, text, chunk_logprobs)))) return true;
          client_gone = true;
          return false;
        });
  }
  if (client_gone) {
    ctx.metrics->CountCancelled();
    return false;
  }
  if (auto* error = std::get_if<ApiError>(&result)) {
    WriteEvent(sink, SseEvent(error->ToJson()));
  } else {
    const GenerationOutcome& outcome = std::get<GenerationOutcome>(result);
    LogGeneration(run, outcome);
    if (outcome.result.finish_reason == "cancelled") {  // the server is shutting down
      WriteEvent(
          sink,
          SseEvent(ServiceUnavailable("the server is shutting down", "shutting_down").ToJson()));
    } else {
      const Usage usage{static_cast<int64_t>(run.job().prompt.size()),
                        static_cast<int64_t>(outcome.result.tokens.size()), run.reused_tokens()};
      if (!WriteEvent(sink, SseEvent(FinishChunk(h, outcome.result.finish_reason,
                                                 KvStatsJson(run.job().kv.policy, outcome.kv))))) {
        return false;
      }
      if (include_usage && !WriteEvent(sink, SseEvent(UsageChunk(h, usage)))) return false;
    }
  }
  if (!WriteEvent(sink, kSseDone)) return false;
  sink.done();
  return true;
}

// Generates, then writes the whole JSON body (after heartbeat spaces, if it took long).
bool WholeGeneration(const ServerContext& ctx, GenerationRun& run, const ResponseHeader& h,
                     httplib::DataSink& sink) {
  bool client_gone = false;
  auto last_write = std::chrono::steady_clock::now();
  // This thread's entry: the chunks come on the slot's thread.
  RequestLogEntry& log_entry = CurrentRequestLog();
  auto result = GenerateOrError(run, [&](std::string_view, std::span<const TokenLogprob>) {
    NoteFirstToken(log_entry);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_write < kHeartbeatInterval) return true;
    last_write = now;
    if (WriteEvent(sink, " ")) return true;
    client_gone = true;
    return false;
  });
  if (client_gone) {
    ctx.metrics->CountCancelled();
    return false;
  }
  json body;
  if (auto* error = std::get_if<ApiError>(&result)) {
    body = error->ToJson();
  } else {
    const GenerationOutcome& outcome = std::get<GenerationOutcome>(result);
    LogGeneration(run, outcome);
    if (outcome.result.finish_reason == "cancelled") {
      body = ServiceUnavailable("the server is shutting down", "shutting_down").ToJson();
    } else {
      const Usage usage{static_cast<int64_t>(run.job().prompt.size()),
                        static_cast<int64_t>(outcome.result.tokens.size()), run.reused_tokens()};
      body = CompletionBody(h, outcome.result.text, outcome.result.finish_reason, usage,
                            KvStatsJson(run.job().kv.policy, outcome.kv),
                            LogprobsJson(h, *ctx.model->tokenizer, outcome.result.logprobs,
                                         run.job().top_logprobs >= 0));
    }
  }
  if (!WriteEvent(sink, DumpJson(body))) return false;
  sink.done();
  return true;
}

}  // namespace

void SendError(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  if (error.status == 503) res.set_header("Retry-After", "1");
  res.set_content(error.Body(), "application/json");
}

void HandleCompletion(const ServerContext& ctx, Endpoint endpoint, const httplib::Request& req,
                      httplib::Response& res) {
  auto prepared = Prepare(ctx, endpoint, req.body);
  if (auto* error = std::get_if<ApiError>(&prepared)) return SendError(res, *error);
  PreparedRequest& request = std::get<PreparedRequest>(prepared);
  if (request.params.session_id.empty() && req.has_header("X-Session-Id")) {
    request.params.session_id = req.get_header_value("X-Session-Id");
    if (!ValidSessionId(request.params.session_id)) {
      return SendError(res, InvalidRequest("the X-Session-Id header must be 1-128 characters of "
                                           "letters, digits and . _ : -",
                                           "session_id", "invalid_value"));
    }
  }
  const int64_t prompt_tokens = static_cast<int64_t>(request.prompt.size());
  const KvGeometry geometry = ctx.model->model->kv_geometry(prompt_tokens + request.max_tokens);
  // The reservation covers the whole conversation (a kept cache holds its earlier turns within
  // the same budget fraction), so it is the same whether a kept conversation is continued.
  const int64_t reserve = KvReservationBytes(request.params.kv, geometry, prompt_tokens,
                                             request.max_tokens, request.budget_new_tokens);
  GenerationJob job = MakeJob(ctx, request);
  const bool reuse = request.params.cache_prompt && ctx.sessions != nullptr &&
                     ctx.sessions->enabled();
  PinnedConversation pinned(ctx.sessions,
                            reuse ? ctx.sessions->Find(job.session_id, job.kv_key, job.prompt)
                                  : std::nullopt);
  // The kept conversation leaves the store as the reservation that covers it is made.
  auto acquired = ctx.scheduler->Acquire(
      reserve, DescribeKvRequest(request.params.kv, geometry, prompt_tokens, request.max_tokens),
      pinned.bytes(), [&] { job.conversation = pinned.Take(); });
  if (auto* error = std::get_if<ApiError>(&acquired)) return SendError(res, *error);

  // Session and prefill before any byte is written, so that a failure still gets its status.
  std::shared_ptr<GenerationRun> run;
  try {
    run = std::make_shared<GenerationRun>(*ctx.model, std::move(std::get<SlotLease>(acquired)),
                                          std::move(job), *ctx.metrics, ctx.sessions);
  } catch (const ColdStoreError& e) {
    return SendError(res, ColdStoreFailure("prefill", e));
  } catch (const Error& e) {
    return SendError(res, InternalError(std::string("prefill failed: ") + e.what()));
  } catch (const std::bad_alloc&) {
    return SendError(res, InternalError("prefill failed: out of memory"));
  }
  const ResponseHeader header = NewResponseHeader(endpoint, ctx.model_id);
  res.status = 200;
  // The provider owns the run: if the response is dropped before the provider runs (client
  // gone during the headers), destroying the provider frees the slot. Both responses are
  // chunked: the body is not known until the generation ends.
  if (request.params.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    const bool include_usage = request.params.include_usage;
    res.set_chunked_content_provider(
        "text/event-stream", [&ctx, run, header, include_usage](size_t, httplib::DataSink& sink) {
          if (run->finished()) return false;  // called again after the end
          return StreamGeneration(ctx, *run, header, include_usage, sink);
        });
  } else {
    // With the charset parameter cpp-httplib does not compress the body: a compressor would
    // buffer the heartbeat spaces, and a client that hung up would go unnoticed.
    res.set_chunked_content_provider("application/json; charset=utf-8",
                                     [&ctx, run, header](size_t, httplib::DataSink& sink) {
                                       if (run->finished()) return false;
                                       return WholeGeneration(ctx, *run, header, sink);
                                     });
  }
}

}  // namespace qevict::server
