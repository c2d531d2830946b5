// `qevict chat`: an interactive multi-turn chat over an optional document, in the model's chat
// template. Each turn continues the same compressed cache (engine/conversation.h): only the new
// message is prefilled, and windows archived while earlier questions were answered can be
// promoted back when a later one needs them. A document (-f) opens the first message; with a
// budget it is read in --kv-prefill-chunk chunks routed after each, so all but its last chunk
// is compressed before the question is read. With --prompt-cache the document is a turn of its
// own, read (or restored from the file) and compressed at its end before the first message is
// asked for, as in the context-only protocol. Answers stream to stdout, each followed by a line
// "---"; after each, one status line on stderr (tokens, KV bytes: ledger, reserved,
// full-cache equivalent; promotions; RSS).
// Reads one user turn per line from stdin, so a pipe can drive it; "/exit" or end of input ends.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string_view>

#include "engine/chat_prompt.h"
#include "engine/conversation.h"
#include "engine/loaded_model.h"
#include "tools/commands.h"
#include "tools/generation_flags.h"
#include "tools/kv_flags.h"
#include "tools/kv_stats_summary.h"
#include "tools/prompt_cache_use.h"
#include "util/error.h"
#include "util/memory_stats.h"

namespace qevict::cli {
namespace {

struct ChatFlags {
  std::string model;
  std::string document;
  std::string system;
  std::string chat_template;
  int n_predict = 512;
  SamplingFlags sampling;
  int threads = 0;
  int64_t ctx = 0;
  int batch = 256;
  KvFlags kv;
  std::string prompt_cache;
  bool prompt_cache_ro = false;
};

// The first user message: the document, a blank line, the message.
constexpr std::string_view kDocumentSeparator = "\n\n";

// The document turn before any question: the rendered conversation up to the document's end
// (system message, the first user turn's header, the document), which every turn's prompt
// starts with. Read once, routed at its end (the context-only protocol), and with
// --prompt-cache read from or saved to the file.
std::vector<int32_t> DocumentTokens(const LoadedModel& m, const std::vector<ChatMessage>& opening,
                                    const std::string& document) {
  std::vector<ChatMessage> messages = opening;
  messages.push_back({"user", document + std::string(kDocumentSeparator) + "?"});
  SplitChatPrompt split = EncodeChatSplit(m, messages, messages.size() - 1, document.size());
  split.tokens.resize(split.stable);
  return split.tokens;
}

// What stands for the document when a chat starts from a saved document turn without -f: only
// the rendering after it is used (the file holds the tokens up to the document's end).
const std::string kStandInDocument = "document";

// Restores the document turn `f.prompt_cache` holds into the conversation and returns its
// tokens; a file that does not exist is an error (nothing to start from without -f).
std::vector<int32_t> StartFromPromptCache(const ChatFlags& f, Conversation& conversation) {
  const PromptCacheKey key = MakePromptCacheKey(f.model, f.kv.Resolve());
  std::optional<PromptCacheFile> file = PromptCacheFile::Open(f.prompt_cache, key);
  if (!file) {
    throw Error("prompt cache '" + f.prompt_cache + "' does not exist: give the document with -f "
                "to read it once and save it there");
  }
  if (file->tokens().empty()) {
    throw Error("prompt cache '" + f.prompt_cache + "' holds no tokens: give the document with -f");
  }
  file->RestoreInto(conversation);
  std::fprintf(stderr,
               "[document] %zu tokens from the prompt cache '%s' (its document turn: the "
               "conversation starts there)\n",
               file->tokens().size(), f.prompt_cache.c_str());
  return file->tokens();
}

// Reads the document into the conversation before the first question (from --prompt-cache when
// the file holds it) and says what it cost on stderr.
void ReadDocument(const ChatFlags& f, const std::vector<int32_t>& document,
                  Conversation& conversation) {
  std::optional<PromptCacheUse> cache;
  if (!f.prompt_cache.empty()) {
    cache = RestorePromptCache(f.prompt_cache, f.prompt_cache_ro, f.model, f.kv.Resolve(),
                               document, conversation);
  }
  const SessionTimings before = conversation.session().timings();
  const TurnStart start = conversation.Prefill(document, f.n_predict);
  const double seconds = conversation.session().timings().prompt_seconds - before.prompt_seconds;
  const int64_t restored = cache ? cache->restored : 0;
  std::fprintf(stderr, "[document] %zu tokens: %lld from the prompt cache, %lld read in %.2f s%s\n",
               document.size(), static_cast<long long>(restored),
               static_cast<long long>(static_cast<int64_t>(document.size()) - restored), seconds,
               f.kv.policy == "full" ? ""
                                     : "; compressed before the first question (the context-only "
                                       "protocol: no question steers what is kept)");
  if (cache && start.reused_tokens < static_cast<int64_t>(document.size())) {
    SavePromptCacheFile(*cache, conversation);
  }
}

double ToMiB(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

void PrintStatus(int turn, int64_t prompt_tokens, const TurnStart& start,
                 const GenerateResult& result, const SessionTimings& before,
                 const SessionTimings& after, const KvStats& kv, int64_t promotions_before) {
  const double prefill_s = after.prompt_seconds - before.prompt_seconds;
  const double decode_s = after.generate_seconds - before.generate_seconds;
  const int64_t steps = after.generated_tokens - before.generated_tokens;
  const MemoryStats memory = ReadMemoryStats();
  std::fprintf(stderr,
               "[turn %d] prompt %lld tokens (%lld reused, %lld prefilled in %.2f s) | %zu "
               "generated (%.1f tok/s, %s) | KV %.2f MiB resident, %.2f MiB reserved, %.2f MiB "
               "as fp16 (%.1f%%) | promotions +%lld | RSS %.0f MiB\n",
               turn, static_cast<long long>(prompt_tokens),
               static_cast<long long>(start.reused_tokens),
               static_cast<long long>(prompt_tokens - start.reused_tokens), prefill_s,
               result.tokens.size(), decode_s > 0 ? steps / decode_s : 0.0,
               result.finish_reason.c_str(), ToMiB(kv.resident_bytes()), ToMiB(kv.reserved_bytes),
               ToMiB(kv.full_fp16_bytes),  // rings included (kv/interleaved_cache.cc)
               kv.full_fp16_bytes > 0 ? 100.0 * static_cast<double>(kv.resident_bytes()) /
                                            static_cast<double>(kv.full_fp16_bytes)
                                      : 0.0,
               static_cast<long long>(kv.promotions - promotions_before), ToMiB(memory.rss_bytes));
  if (kv.infeasible) std::fprintf(stderr, "warning: the KV budget cannot be met: %s\n",
                                  kv.note.c_str());
  std::fflush(stderr);
}

int Chat(const ChatFlags& f) {
  if (f.n_predict < 1) {
    throw Error("-n " + std::to_string(f.n_predict) +
                ": -n must be >= 1 for chat (the most tokens per answer)");
  }
  const std::string document = f.document.empty() ? "" : ReadTextFile(f.document, "document");
  LoadedModel m = LoadedModel::Load(f.model);
  if (!f.chat_template.empty()) m.OverrideChatTemplate(f.chat_template);
  const int64_t model_ctx = m.model->config().context_length;
  const int64_t context = f.ctx > 0 ? std::min(f.ctx, model_ctx) : model_ctx;
  ThreadPool pool(f.threads > 0 ? f.threads : ThreadPool::HardwareThreads());
  SessionOptions so;
  so.n_ctx = context;
  so.prefill_chunk = f.batch;
  ApplyPrefillChunk(f.kv, so);
  so.on_prefill_chunk = PrefillProgressLine();
  Conversation conversation(*m.model, pool, so, MakeKvCacheFactory(f.kv));

  std::vector<ChatMessage> messages;
  if (!f.system.empty()) messages.push_back({"system", f.system});
  // With --prompt-cache the document turn is a prompt of its own, which the file holds; without,
  // the document and the first message are one prompt, as the server reads the same
  // conversation (its kept sessions continue exactly as this command does).
  const bool document_turn = !f.prompt_cache.empty();
  // --prompt-cache without -f: the conversation starts from the document turn the file holds
  // (saved by `chat -f DOC --prompt-cache` or `run --chat --prompt-cache`); every turn's prompt
  // is its tokens, then the rest of the rendering after the document (the chat template renders
  // it the same whatever the document: DocumentTokens splits there).
  std::vector<int32_t> saved_opening;
  if (document_turn && document.empty()) {
    if (!f.system.empty()) {
      throw Error("--system with --prompt-cache and no -f: the file's document turn already "
                  "holds its system message; give the document with -f to start another");
    }
    saved_opening = StartFromPromptCache(f, conversation);
  }
  if (document_turn && saved_opening.empty()) {
    const std::vector<int32_t> tokens = DocumentTokens(m, messages, document);
    if (static_cast<int64_t>(tokens.size()) + f.n_predict > context) {
      throw Error("the document (" + std::to_string(tokens.size()) + " tokens) + -n " +
                  std::to_string(f.n_predict) + " exceeds the context of " +
                  std::to_string(context) + " tokens: shorten it, lower -n, or raise -c up to the "
                  "model's " + std::to_string(model_ctx));
    }
    // The run's first prompt is the document turn: its user text is the document.
    conversation.session().set_score_context(
        MakeScoreContext(*m.tokenizer, f.kv.Resolve(), document));
    ReadDocument(f, tokens, conversation);
    if (const auto& cost = conversation.session().external_score_cost()) {
      std::fprintf(stderr, "%s\n", DescribeExternalScoreCost(*cost).c_str());
    }
  }

  const bool interactive = isatty(STDIN_FILENO) != 0;
  if (interactive) {
    std::fprintf(stderr,
                 "qevict chat: %s, kv policy %s%s. One message per line; /exit or Ctrl-D ends.\n",
                 f.model.c_str(), f.kv.policy.c_str(),
                 !saved_opening.empty() ? ", the saved document opens the conversation"
                 : document.empty()     ? ""
                                        : ", the document opens your first message");
  }
  const size_t first_user = messages.size();
  std::string line;
  int turn = 0;
  while (true) {
    if (interactive) {
      std::fputs("> ", stderr);
      std::fflush(stderr);
    }
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/exit" || line == "/quit") break;
    if (line.empty()) continue;
    ++turn;
    const bool first = turn == 1;
    // From a saved document turn alone, a stand-in document marks where the file's tokens end.
    const std::string& opening_text = saved_opening.empty() ? document : kStandInDocument;
    messages.push_back({"user", first && !opening_text.empty()
                                    ? opening_text + std::string(kDocumentSeparator) + line
                                    : line});
    // With a document turn, split where DocumentTokens ends: every turn starts with its tokens.
    std::vector<int32_t> prompt;
    if (!document_turn) {
      prompt = m.EncodeChat(messages, /*add_generation_prompt=*/true);
    } else {
      SplitChatPrompt split = EncodeChatSplit(m, messages, first_user, opening_text.size());
      if (saved_opening.empty()) {
        prompt = std::move(split.tokens);
      } else {
        prompt = saved_opening;
        prompt.insert(prompt.end(), split.tokens.begin() + static_cast<ptrdiff_t>(split.stable),
                      split.tokens.end());
      }
    }
    const int64_t needed = static_cast<int64_t>(prompt.size()) + f.n_predict;
    if (needed > context) {
      throw Error("the conversation (" + std::to_string(prompt.size()) + " tokens) + -n " +
                  std::to_string(f.n_predict) + " exceeds the context of " +
                  std::to_string(context) +
                  " tokens; compression keeps fewer bytes, not more positions: start a new chat, "
                  "lower -n, or raise -c up to the model's " + std::to_string(model_ctx));
    }
    const SessionTimings before = conversation.session().timings();
    const int64_t promotions_before =
        conversation.tokens().empty() ? 0 : conversation.session().cache().Stats().promotions;
    // The run's context for score hooks: its first prompt's user text (engine/score_hooks.h).
    if (first && !document_turn) {
      conversation.session().set_score_context(
          MakeScoreContext(*m.tokenizer, f.kv.Resolve(), ChatContextText(messages)));
    }
    const TurnStart start = conversation.Prefill(prompt, f.n_predict);
    if (const auto& cost = conversation.session().external_score_cost();
        first && !document_turn && cost) {
      std::fprintf(stderr, "%s\n", DescribeExternalScoreCost(*cost).c_str());
    }
    GenerateOptions go;
    go.max_new_tokens = f.n_predict;
    go.sampling = f.sampling.Options(static_cast<uint64_t>(turn - 1));
    go.seen_tokens = prompt;  // the whole conversation, as the penalties' window sees it
    go.stop = f.sampling.stop;
    go.on_text = [](std::string_view t) {
      std::fwrite(t.data(), 1, t.size(), stdout);
      std::fflush(stdout);
      return true;
    };
    const GenerateResult result = conversation.Generate(*m.tokenizer, start.logits, go);
    // Each answer ends with a line of its own, so that answers read from a pipe or a file can
    // be told apart (the status line goes to stderr).
    std::fputs("\n---\n", stdout);
    std::fflush(stdout);
    messages.push_back({"assistant", result.text});
    PrintStatus(turn, static_cast<int64_t>(prompt.size()), start, result, before,
                conversation.session().timings(), conversation.session().cache().Stats(),
                start.reused_tokens > 0 ? promotions_before : 0);
  }
  if (turn > 0) {
    PrintKvStats(f.kv, conversation.session().kv_stats(), m.model->config().n_layers);
  }
  return 0;
}

}  // namespace

std::function<int()> RegisterChat(CLI::App& app) {
  auto flags = std::make_shared<ChatFlags>();
  CLI::App* cmd = app.add_subcommand(
      "chat", "multi-turn chat over an optional document, one compressed cache for the whole "
              "conversation; reads one message per line (a pipe works)");
  cmd->add_option("-m,--model", flags->model, "GGUF model file")->required();
  cmd->add_option("-f,--file", flags->document,
                  "a document put before the first message (the conversation is about it)");
  cmd->add_option("--system,--system-prompt", flags->system, "system message");
  cmd->add_option("-n,--n-predict", flags->n_predict, "most tokens per answer")
      ->capture_default_str();
  AddSamplingFlags(*cmd, flags->sampling, "sampling seed (turn k uses seed + k - 1)");
  AddEngineFlags(*cmd, flags->chat_template, flags->threads, flags->batch);
  cmd->add_option("-c,--ctx,--ctx-size", flags->ctx,
                  "tokens the whole conversation may hold (default: the model's context)");
  AddKvFlags(*cmd, flags->kv, {true, true, kStatsJsonHelp});
  CLI::Option* cache = cmd->add_option(
      "--prompt-cache", flags->prompt_cache,
      "file of the compressed KV cache after the document (-f): read from it when it holds "
      "this document, saved to it otherwise (as `run --chat --prompt-cache` saves it); without "
      "-f the conversation starts from the document the file holds");
  cmd->add_flag("--prompt-cache-ro", flags->prompt_cache_ro,
                "read --prompt-cache but never write it")
      ->needs(cache);
  return [flags] { return Chat(*flags); };
}

}  // namespace qevict::cli
