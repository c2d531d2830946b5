#include "engine/conversation.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace qevict {
namespace {
constexpr size_t kMaxSavedTokens = size_t{1} << 31;  // what a saved state may claim
}  // namespace

Conversation::Conversation(const TransformerModel& model, ThreadPool& pool,
                           const SessionOptions& options, const KvCacheFactory& make_cache)
    : session_(model, pool, options, make_cache) {}

int64_t Conversation::ReusableTokens(std::span<const int32_t> prompt) const {
  const bool equal_ok = !restored_logits_.empty();
  if (tokens_.empty() || tokens_.size() > prompt.size() ||
      (tokens_.size() == prompt.size() && !equal_ok)) {
    return 0;
  }
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
  if (fresh.empty()) {  // exactly the restored tokens: their logits came with them
    out.logits = restored_logits_;
    return out;
  }
  restored_logits_.clear();
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
    restored_logits_.clear();
    throw;
  }
  // Generated tokens enter the cache one decode step after they are sampled; the last one may
  // never have (length limit, stop string, cancellation).
  const int64_t fed = session_.position() - start;
  QEVICT_CHECK(fed >= 0 && fed <= static_cast<int64_t>(result.tokens.size()));
  tokens_.insert(tokens_.end(), result.tokens.begin(), result.tokens.begin() + fed);
  // Restored logits stay the next ones while Generate fed nothing.
  if (fed > 0) restored_logits_.clear();
  return result;
}

std::span<const float> Conversation::next_logits() const {
  if (tokens_.empty()) return {};
  if (!restored_logits_.empty()) return restored_logits_;
  return session_.logits();
}

void Conversation::SaveState(ByteWriter& out) const {
  const std::span<const float> logits = next_logits();
  QEVICT_CHECK(!tokens_.empty() && !logits.empty());
  out.Array<int32_t>(tokens_);
  out.Array<float>(logits);
  session_.SaveState(out);
}

std::vector<int32_t> Conversation::SavedTokens(ByteReader in) {
  return in.Array<int32_t>("tokens", kMaxSavedTokens);
}

void Conversation::LoadState(ByteReader& in) {
  tokens_.clear();
  restored_logits_.clear();
  const ModelConfig& config = session_.model().config();
  std::vector<int32_t> tokens = in.Array<int32_t>("tokens", kMaxSavedTokens);
  if (tokens.empty()) in.Fail("holds no tokens");
  for (int32_t t : tokens) {
    if (t < 0 || t >= config.n_vocab) in.Fail("a token is outside this model's vocabulary");
  }
  std::vector<float> logits = in.Array<float>("logits", static_cast<size_t>(config.n_vocab));
  if (logits.size() != static_cast<size_t>(config.n_vocab)) {
    in.Fail("holds logits over " + std::to_string(logits.size()) + " tokens, this model has " +
            std::to_string(config.n_vocab));
  }
  if (!std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); })) {
    in.Fail("holds logits that are not finite");
  }
  session_.LoadState(in);  // throws, and empties the session, on malformed state
  if (session_.position() != static_cast<int64_t>(tokens.size())) {
    session_.BeginRun(0, 0);
    in.Fail("its cache holds " + std::to_string(session_.position()) + " tokens, its token list " +
            std::to_string(tokens.size()));
  }
  tokens_ = std::move(tokens);
  restored_logits_ = std::move(logits);
}

}  // namespace qevict
