#include "engine/score_hooks.h"

#include <cstdio>

#include "engine/reconstruction.h"
#include "engine/session.h"
#include "util/error.h"

namespace qevict {
namespace {

std::shared_ptr<const ScoreContext> WithContext(const Tokenizer& tokenizer, const KvConfig& config,
                                                std::vector<int32_t> context) {
  auto out = std::make_shared<ScoreContext>();
  out->repeat_prompt = RepeatPromptTokens(tokenizer);
  out->context = std::move(context);
  out->reconstruction_chunk = config.reconstruction_chunk;
  return out;
}

}  // namespace

std::shared_ptr<const ScoreContext> MakeScoreContext(const Tokenizer& tokenizer,
                                                     const KvConfig& config,
                                                     std::string_view text) {
  return WithContext(tokenizer, config,
                     tokenizer.Encode(text, /*add_bos=*/false,
                                      /*parse_special=*/false));
}

std::shared_ptr<const ScoreContext> MakeScoreContext(const Tokenizer& tokenizer,
                                                     const KvConfig& config,
                                                     std::vector<int32_t> prompt_tokens) {
  if (!prompt_tokens.empty() && prompt_tokens.front() == tokenizer.bos()) {
    prompt_tokens.erase(prompt_tokens.begin());
  }
  return WithContext(tokenizer, config, std::move(prompt_tokens));
}

std::string ChatContextText(const std::vector<ChatMessage>& messages) {
  std::string text;
  for (const ChatMessage& m : messages) {
    if (m.role != "user") continue;
    if (!text.empty()) text += "\n\n";
    text += m.content;
  }
  return text;
}

std::string DescribeExternalScoreCost(const ExternalScoreCost& cost) {
  char line[160];
  std::snprintf(line, sizeof line,
                "reconstruction scoring: %lld tokens in %lld chunks, %.2f s, %.1f MiB scratch",
                static_cast<long long>(cost.tokens), static_cast<long long>(cost.chunks),
                cost.seconds, static_cast<double>(cost.scratch_bytes) / (1 << 20));
  return line;
}

std::optional<ExternalScoreCost> ScoreWhatTheCacheWants(Session& session,
                                                        const ScoreContext* context,
                                                        ThreadPool& pool) {
  switch (session.cache().wants_external_scores()) {
    case ExternalScoreNeed::kNone:
      return std::nullopt;
    case ExternalScoreNeed::kReconstruction:
      if (context == nullptr || context->context.empty()) {
        throw Error(
            "the KV policy routes on reconstruction scores (--kv-score-source reconstruction) "
            "but this run has no context to reconstruct: give a prompt with text, or choose "
            "--kv-score-source expected-attention or key-norm");
      }
      return ScoreByReconstruction(session, context->repeat_prompt, context->context,
                                   context->reconstruction_chunk, pool);
  }
  return std::nullopt;
}

}  // namespace qevict
