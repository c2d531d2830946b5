#include "engine/conversation.h"

#include <algorithm>

#include "util/error.h"

namespace qevict {

Conversation::Conversation(const TransformerModel& model, ThreadPool& pool,
                           const SessionOptions& options, const KvCacheFactory& make_cache)
    : session_(model, pool, options, make_cache) {}

int64_t Conversation::ReusableTokens(std::span<const int32_t> prompt) const {
  if (tokens_.empty() || tokens_.size() >= prompt.size()) return 0;
  return std::equal(tokens_.begin(), tokens_.end(), prompt.begin())
             ? static_cast<int64_t>(tokens_.size())
             : 0;
}

TurnStart Conversation::Prefill(std::span<const int32_t> prompt, int64_t max_new_tokens) {
  QEVICT_CHECK(!prompt.empty());
  TurnStart out;
  out.reused_tokens = ReusableTokens(prompt);
  const std::span<const int32_t> fresh = prompt.subspan(static_cast<size_t>(out.reused_tokens));
  if (out.reused_tokens == 0) {
    tokens_.clear();
    session_.BeginRun(static_cast<int64_t>(prompt.size()), max_new_tokens);
  } else {
    session_.ContinueRun(static_cast<int64_t>(fresh.size()), max_new_tokens);
  }
  // Recorded before the forward passes: if they throw, the cache's contents are unknown and
  // nothing may be reused (tokens_ no longer matches the position).
  const size_t before = tokens_.size();
  tokens_.insert(tokens_.end(), fresh.begin(), fresh.end());
  try {
    out.logits = session_.Prefill(fresh);
  } catch (...) {
    tokens_.clear();
    throw;
  }
  QEVICT_CHECK(static_cast<int64_t>(before + fresh.size()) == session_.position());
  return out;
}

GenerateResult Conversation::Generate(const Tokenizer& tokenizer, std::span<const float> logits,
                                      const GenerateOptions& options) {
  const int64_t start = session_.position();
  GenerateResult result;
  try {
    result = qevict::Generate(session_, tokenizer, logits, options);
  } catch (...) {
    tokens_.clear();
    throw;
  }
  // Generated tokens enter the cache one decode step after they are sampled; the last one may
  // never have (length limit, stop string, cancellation).
  const int64_t fed = session_.position() - start;
  QEVICT_CHECK(fed >= 0 && fed <= static_cast<int64_t>(result.tokens.size()));
  tokens_.insert(tokens_.end(), result.tokens.begin(), result.tokens.begin() + fed);
  return result;
}

}  // namespace qevict
