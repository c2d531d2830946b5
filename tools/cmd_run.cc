// `qevict run`: generate text from a prompt, streaming it to stdout; timings to stderr.
#include <cstdio>
#include <optional>

#include "engine/chat_prompt.h"
#include "engine/conversation.h"
#include "engine/generate.h"
#include "engine/loaded_model.h"
#include "tools/commands.h"
#include "tools/generation_flags.h"
#include "tools/kv_flags.h"
#include "tools/kv_stats_summary.h"
#include "tools/prompt_cache_use.h"
#include "util/error.h"

namespace qevict::cli {
namespace {

struct RunFlags {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  std::string system;
  std::string chat_template;
  int n_predict = 128;
  bool chat = false;
  SamplingFlags sampling;
  int threads = 0;
  int64_t ctx = 0;
  int batch = 256;
  KvFlags kv;
  std::string prompt_cache;
  bool prompt_cache_all = false;
  bool prompt_cache_ro = false;
};

int Run(const RunFlags& f) {
  if (f.prompt.empty() == f.prompt_file.empty()) {
    throw Error(f.prompt.empty() ? "no prompt: give -p PROMPT or -f FILE"
                                 : "give exactly one of -p PROMPT or -f FILE, not both");
  }
  if (f.n_predict < -1) {
    throw Error("-n " + std::to_string(f.n_predict) +
                ": give the tokens to generate (>= 0), or -1 to fill the context");
  }
  const std::string text = f.prompt_file.empty() ? f.prompt : ReadTextFile(f.prompt_file, "prompt file");
  LoadedModel m = LoadedModel::Load(f.model);
  if (!f.chat_template.empty()) m.OverrideChatTemplate(f.chat_template);
  std::vector<int32_t> tokens;
  // With --prompt-cache, the leading tokens a later prompt will start with: the whole raw prompt;
  // in chat, the conversation up to the end of the user's text (the template's closing of the
  // turn and the assistant header come after it), encoded apart from what follows
  // (tools/chat_prompt.h), so that a later run's prompt, the same text and a question, starts
  // with exactly those tokens.
  size_t stable = 0;
  if (f.chat || !f.system.empty()) {  // a system message implies the chat template
    std::vector<ChatMessage> messages;
    if (!f.system.empty()) messages.push_back({"system", f.system});
    messages.push_back({"user", text});
    if (f.prompt_cache.empty()) {
      tokens = m.EncodeChat(messages, /*add_generation_prompt=*/true);
    } else {
      SplitChatPrompt split = EncodeChatSplit(m, messages, messages.size() - 1, text.size());
      tokens = std::move(split.tokens);
      stable = split.stable;
    }
  } else {
    tokens = m.EncodeRaw(text);
  }
  if (stable == 0) stable = tokens.size();
  if (tokens.empty()) throw Error("the prompt encodes to no tokens: give a non-empty -p or -f");
  const int64_t limit = m.model->config().context_length;
  const int64_t context = f.ctx > 0 ? std::min(f.ctx, limit) : limit;
  const int64_t prompt = static_cast<int64_t>(tokens.size());
  // -n -1 (llama.cpp's): generate until the context is full.
  const int64_t n_predict = f.n_predict < 0 ? std::max<int64_t>(0, context - prompt) : f.n_predict;
  const int64_t needed = prompt + n_predict;
  if (needed > context || (f.n_predict < 0 && n_predict == 0)) {
    throw Error("the prompt (" + std::to_string(prompt) + " tokens) + " +
                std::to_string(n_predict) + " new tokens exceed the context of " +
                std::to_string(context) + " tokens" +
                (context < limit ? " (-c " + std::to_string(f.ctx) + "; the model's is " +
                                       std::to_string(limit) + ")"
                                 : " (the model's)") +
                ": shorten the prompt, lower -n" +
                (context < limit ? ", or raise -c" : "") +
                ". A compressed KV cache holds fewer bytes, not more positions: --kv-budget "
                "does not extend the context");
  }
  ThreadPool pool(f.threads > 0 ? f.threads : ThreadPool::HardwareThreads());
  SessionOptions so;
  so.n_ctx = f.ctx > 0 ? context : needed;
  so.prefill_chunk = f.batch;
  ApplyPrefillChunk(f.kv, so);
  so.on_prefill_chunk = PrefillProgressLine();
  Conversation conversation(*m.model, pool, so, MakeKvCacheFactory(f.kv));
  Session& session = conversation.session();
  session.set_score_context(MakeScoreContext(*m.tokenizer, f.kv.Resolve(), text));
  if (session.policy_cache() == nullptr && f.kv.policy != "full") {
    std::fprintf(stderr,
                 "warning: every layer of this model is a sliding-window layer of %d tokens: the "
                 "cache holds only the windows, and --kv-policy %s has nothing to compress\n",
                 m.model->config().sliding_window, f.kv.policy.c_str());
  }
  std::optional<PromptCacheUse> cache;
  if (!f.prompt_cache.empty()) {
    cache = RestorePromptCache(f.prompt_cache, f.prompt_cache_ro, f.model, f.kv.Resolve(), tokens,
                               conversation);
  }
  // llama.cpp's default: the prompt is saved (when there was anything new to save); with
  // --prompt-cache-all the generated tokens too, after generation. A chat prompt is saved up to
  // the end of the user's text: the document turn a later question continues.
  const bool save_prompt = cache && !f.prompt_cache_ro && !f.prompt_cache_all;
  if (save_prompt && stable < tokens.size() && cache->restored < static_cast<int64_t>(stable)) {
    conversation.Prefill(std::span<const int32_t>(tokens).first(stable), n_predict);
    SavePromptCacheFile(*cache, conversation);
  }
  const TurnStart turn = conversation.Prefill(tokens, n_predict);
  std::span<const float> logits = turn.logits;
  if (const auto& cost = session.external_score_cost()) {
    std::fprintf(stderr, "%s\n", DescribeExternalScoreCost(*cost).c_str());
  }
  if (save_prompt && stable == tokens.size() && turn.reused_tokens < prompt) {
    SavePromptCacheFile(*cache, conversation);
  }
  // An impossible budget is said, whatever --kv-stats: the cache keeps its floor instead.
  bool warned = WarnIfInfeasible(session.cache().Stats());

  GenerateOptions go;
  go.max_new_tokens = static_cast<int>(n_predict);
  go.sampling = f.sampling.Options();
  go.seen_tokens = tokens;
  go.stop = f.sampling.stop;
  go.on_text = [](std::string_view t) {
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  GenerateResult result = conversation.Generate(*m.tokenizer, logits, go);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (cache && f.prompt_cache_all) SavePromptCacheFile(*cache, conversation);

  const SessionTimings& t = session.timings();
  const std::string from_cache =
      cache && cache->restored > 0
          ? " (+" + std::to_string(cache->restored) + " from the prompt cache)"
          : "";
  std::fprintf(stderr,
               "\nprompt: %lld tokens%s in %.2f s (%.1f tok/s) | generated: %zu tokens, %lld "
               "decode steps in %.2f s (%.1f tok/s) | threads %d | finish: %s\n",
               static_cast<long long>(t.prompt_tokens),
               from_cache.c_str(),
               t.prompt_seconds,
               t.prompt_seconds > 0 ? t.prompt_tokens / t.prompt_seconds : 0.0,
               result.tokens.size(), static_cast<long long>(t.generated_tokens),
               t.generate_seconds,
               t.generate_seconds > 0 ? t.generated_tokens / t.generate_seconds : 0.0,
               pool.size(), result.finish_reason.c_str());
  if (!warned) warned = WarnIfInfeasible(session.cache().Stats());
  PrintKvStats(f.kv, session.kv_stats(), m.model->config().n_layers);
  return 0;
}

}  // namespace

std::function<int()> RegisterRun(CLI::App& app) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt");
  cmd->add_option("-m,--model", flags->model, "GGUF model file")->required();
  cmd->add_option("-p,--prompt", flags->prompt, "prompt text");
  cmd->add_option("-f,--file", flags->prompt_file, "read the prompt from a file");
  cmd->add_option("-n,--n-predict", flags->n_predict,
                  "tokens to generate (-1: until the context is full)")
      ->capture_default_str();
  cmd->add_flag("--chat", flags->chat, "wrap the prompt as a user message in the chat template");
  cmd->add_option("--system,--system-prompt", flags->system,
                  "system message (implies --chat)");
  AddSamplingFlags(*cmd, flags->sampling, "sampling seed");
  AddEngineFlags(*cmd, flags->chat_template, flags->threads, flags->batch);
  cmd->add_option("-c,--ctx,--ctx-size", flags->ctx,
                  "context size (default: prompt + n-predict; with -n -1 the model's)");
  AddKvFlags(*cmd, flags->kv, {true, true, kStatsJsonHelp});
  CLI::Option* cache = cmd->add_option("--prompt-cache", flags->prompt_cache,
                  "file of the compressed KV cache after the prompt (with --chat: after the "
                  "user's text, before the assistant's turn): a later run whose prompt starts "
                  "with the saved tokens (same model and --kv-* options) reads them from it "
                  "instead of prefilling them");
  cmd->add_flag("--prompt-cache-all", flags->prompt_cache_all,
                "save the generated tokens to --prompt-cache too")
      ->needs(cache);
  cmd->add_flag("--prompt-cache-ro", flags->prompt_cache_ro,
                "read --prompt-cache but never write it")
      ->needs(cache);
  return [flags] { return Run(*flags); };
}

}  // namespace qevict::cli
