// A conversation kept between turns (engine/conversation.h): the next turn's rendered prompt
// extends the tokens the cache holds, so only the new tokens are prefilled; with the full cache
// that must give what a fresh prefill of the whole conversation gives, with a compressed cache
// the run carries on (budget regrown, tiers and counters kept), and a prompt that diverges
// starts over exactly as a new conversation would.
#include <algorithm>
#include <cmath>

#include "engine/conversation.h"
#include "engine/sampler.h"
#include "policy/registry.h"
#include "tests/test_support.h"

namespace qevict {
namespace {

std::string Document() {
  std::string text;
  for (int i = 0; text.size() < 3000; ++i) {
    text += "Entry " + std::to_string(i) + ": the parcel marked " + std::to_string(500 + 41 * i) +
            " was stored on shelf " + std::to_string(i % 7) + ". ";
  }
  return text;
}

struct TwoTurns {
  std::vector<int32_t> first_prompt, second_prompt;
  GenerateResult first, second;
  int64_t first_reused = -1, second_reused = -1;
  std::vector<float> second_logits;
  KvStats after_first, after_second;
};

// Turn 1: the document and a question; turn 2: the answer as the assistant's message and a
// second question, rendered as a whole and handed to the same conversation.
TwoTurns RunTwoTurns(const LoadedModel& m, Conversation& c) {
  TwoTurns t;
  std::vector<ChatMessage> messages = {
      {"user", Document() + "\nWhich shelf holds the parcel marked 664?"}};
  t.first_prompt = m.EncodeChat(messages, true);
  TurnStart start = c.Prefill(t.first_prompt, 24);
  t.first_reused = start.reused_tokens;
  t.first = c.Generate(*m.tokenizer, start.logits, testing::Greedy(24));
  t.after_first = c.session().cache().Stats();
  messages.push_back({"assistant", t.first.text});
  messages.push_back({"user", "And which shelf holds the parcel marked 1033?"});
  t.second_prompt = m.EncodeChat(messages, true);
  start = c.Prefill(t.second_prompt, 16);
  t.second_reused = start.reused_tokens;
  t.second_logits.assign(start.logits.begin(), start.logits.end());
  t.second = c.Generate(*m.tokenizer, start.logits, testing::Greedy(16));
  t.after_second = c.session().cache().Stats();
  return t;
}

SessionOptions Options(const LoadedModel& m) {
  SessionOptions o;
  o.n_ctx = m.model->config().context_length;
  o.prefill_chunk = 128;
  return o;
}

TEST(ConversationTest, FullCacheSecondTurnMatchesAFreshPrefill) {
  QEVICT_REQUIRE_MODEL(m);
  ThreadPool pool(2);
  Conversation c(*m->model, pool, Options(*m), testing::FullCacheFactory());
  const TwoTurns t = RunTwoTurns(*m, c);
  EXPECT_EQ(t.first_reused, 0);
  // Everything of turn 1 that entered the cache is reused: its prompt and its answer.
  EXPECT_GE(t.second_reused, static_cast<int64_t>(t.first_prompt.size() + t.first.tokens.size()) - 1);
  EXPECT_GE(t.second_reused, static_cast<int64_t>(0.8 * t.second_prompt.size()));
  EXPECT_EQ(t.after_second.tokens_seen, c.session().position());

  // The same forward passes in a session that never stopped: turn 1's prompt in chunks, its
  // answer one token at a time, then the rest of turn 2's prompt. Bit-identical logits. (A fresh
  // prefill of the whole conversation reads the answer in a batch instead; the engine's batched
  // and single-token paths differ by up to ~0.7 in these logits, so that is not the reference.)
  Session single(*m->model, pool, Options(*m), testing::FullCacheFactory());
  single.BeginRun(static_cast<int64_t>(t.first_prompt.size()), 24);
  single.Prefill(t.first_prompt);
  const std::vector<int32_t>& held = c.tokens();
  const size_t answered = static_cast<size_t>(t.second_reused);
  for (size_t i = t.first_prompt.size(); i < answered; ++i) single.Decode(held[i]);
  single.ContinueRun(static_cast<int64_t>(t.second_prompt.size() - answered), 16);
  const std::span<const float> logits =
      single.Prefill(std::span<const int32_t>(t.second_prompt).subspan(answered));
  ASSERT_EQ(logits.size(), t.second_logits.size());
  EXPECT_TRUE(std::equal(logits.begin(), logits.end(), t.second_logits.begin()));
}

TEST(ConversationTest, CompressedCacheCarriesOnAcrossTurns) {
  QEVICT_REQUIRE_MODEL(m);
  ThreadPool pool(2);
  KvConfig config;
  config.policy = "qevict";
  config.budget = 0.1;
  Conversation c(*m->model, pool, Options(*m), testing::PolicyCacheFactory(config));
  const TwoTurns t = RunTwoTurns(*m, c);
  ASSERT_GT(t.second_reused, 0);
  EXPECT_GE(t.second_reused, static_cast<int64_t>(t.first_prompt.size()));
  // One run: the counters of turn 1 go on, the budget covers both turns' tokens.
  EXPECT_EQ(t.after_second.tokens_seen, c.session().position());
  EXPECT_GT(t.after_second.routing_steps, t.after_first.routing_steps);
  EXPECT_GE(t.after_second.evicted_windows + t.after_second.quant_windows,
            t.after_first.evicted_windows + t.after_first.quant_windows);
  const KvGeometry g = c.session().cache().geometry();
  const int64_t second_run = static_cast<int64_t>(t.second_prompt.size()) + 16;
  EXPECT_EQ(t.after_second.budget_bytes, *config.BudgetBytes(second_run, g));
  EXPECT_GT(t.after_second.budget_bytes, t.after_first.budget_bytes);
  EXPECT_FALSE(t.after_second.infeasible) << t.after_second.note;
  EXPECT_LE(t.after_second.resident_bytes(), t.after_second.budget_bytes);
}

TEST(ConversationTest, DivergentPromptStartsOverLikeANewConversation) {
  QEVICT_REQUIRE_MODEL(m);
  ThreadPool pool(2);
  KvConfig config;
  config.policy = "qevict";
  config.budget = 0.2;
  Conversation kept(*m->model, pool, Options(*m), testing::PolicyCacheFactory(config));
  RunTwoTurns(*m, kept);
  // The same question about another document: the first message differs, nothing is reusable.
  const std::vector<int32_t> other =
      m->EncodeChat({{"user", "Entry 0: the parcel marked 17 was stored on shelf 3. " +
                                  Document() + "\nWhich shelf holds the parcel marked 17?"}},
                    true);
  ASSERT_EQ(kept.ReusableTokens(other), 0);
  const TurnStart a = kept.Prefill(other, 16);
  EXPECT_EQ(a.reused_tokens, 0);
  const GenerateResult from_kept = kept.Generate(*m->tokenizer, a.logits, testing::Greedy(16));

  Conversation fresh(*m->model, pool, Options(*m), testing::PolicyCacheFactory(config));
  const TurnStart b = fresh.Prefill(other, 16);
  const GenerateResult from_fresh = fresh.Generate(*m->tokenizer, b.logits, testing::Greedy(16));
  EXPECT_EQ(from_kept.tokens, from_fresh.tokens);
  EXPECT_EQ(kept.tokens(), fresh.tokens());
  EXPECT_EQ(kept.session().cache().Stats().routing_steps,
            fresh.session().cache().Stats().routing_steps);
}

}  // namespace
}  // namespace qevict
