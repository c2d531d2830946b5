// Score hooks (engine/score_hooks.h) on the real models: the session asks its cache through the
// KvCache interface whether it wants external scores and hands them over before the run's first
// prompt end is routed -- once, for every policy layer (the global layers of an interleaved
// cache), with the same result as scoring by hand; never without a budget, never on a later
// turn, and never silently without a context (Prefill throws).
#include <cstring>
#include <memory>
#include <string>

#include "engine/reconstruction.h"
#include "engine/sampler.h"
#include "engine/score_hooks.h"
#include "engine/session.h"
#include "policy/registry.h"
#include "tests/test_support.h"

namespace qevict {
namespace {

// A cache that forwards everything to a real one and records the external scores handed over.
class ScoreRecordingCache : public KvCache {
 public:
  ScoreRecordingCache(std::unique_ptr<KvCache> inner, std::vector<int>* set_layers)
      : inner_(std::move(inner)), set_layers_(set_layers) {}
  void BeginRun(int64_t p, int64_t n) override { inner_->BeginRun(p, n); }
  void ContinueRun(int64_t p, int64_t n) override { inner_->ContinueRun(p, n); }
  void Store(int layer, int n, const int32_t* pos, const float* k, const float* v) override {
    inner_->Store(layer, n, pos, k, v);
  }
  void Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
              ThreadPool& pool) override {
    inner_->Attend(layer, n, pos, q, out, pool);
  }
  void BeginBatch(BatchKind kind) override { inner_->BeginBatch(kind); }
  void EndBatch(BatchKind kind, ThreadPool& pool) override { inner_->EndBatch(kind, pool); }
  KvStats Stats() const override { return inner_->Stats(); }
  const KvGeometry& geometry() const override { return inner_->geometry(); }
  void DenseLayer(int layer, std::vector<float>* k, std::vector<float>* v,
                  std::vector<int32_t>* p) const override {
    inner_->DenseLayer(layer, k, v, p);
  }
  int64_t n_tokens() const override { return inner_->n_tokens(); }
  ExternalScoreNeed wants_external_scores() const override {
    return inner_->wants_external_scores();
  }
  ExternalScoreLayout external_score_layout(int layer) const override {
    return inner_->external_score_layout(layer);
  }
  void SetExternalScores(int layer, std::vector<float> scores) override {
    set_layers_->push_back(layer);
    inner_->SetExternalScores(layer, std::move(scores));
  }

 private:
  std::unique_ptr<KvCache> inner_;
  std::vector<int>* set_layers_;
};

std::string HookFacts(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += "Fact " + std::to_string(i) + ": the parcel numbered " + std::to_string(4000 + 53 * i) +
            " is stored on shelf " + std::to_string(i % 7) + ". ";
  }
  return text;
}

struct HookRun {
  std::vector<int> set_layers;
  std::optional<ExternalScoreCost> cost;
  KvStats stats;
  std::vector<int32_t> tokens;  // greedy continuation
};

// One run of `policy` at `budget` over `text` with the session's hook (context: `context`, or
// none), or with the scores handed over by hand (ScoreByReconstruction) when `by_hand`.
HookRun RunWith(const LoadedModel& model, const std::string& policy, double budget,
            const std::string& text, const std::string* context, bool by_hand = false) {
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = model.EncodeRaw(text);
  KvConfig config;
  config.policy = policy;
  config.budget = budget;
  config.prefill_chunk = 0;
  SessionOptions options;
  options.n_ctx = static_cast<int64_t>(prompt.size()) + 40;
  options.prefill_chunk = 256;
  HookRun run;
  if (by_hand) {
    options.before_prompt_end = [&, done = false](Session& s) mutable {
      if (done) return;  // the first prompt only
      done = true;
      const std::shared_ptr<const ScoreContext> c = MakeScoreContext(*model.tokenizer, config, text);
      ScoreByReconstruction(s, c->repeat_prompt, c->context, c->reconstruction_chunk, pool);
    };
  }
  Session s(*model.model, pool, options, [&](const KvGeometry& g, const Rope& r) {
    return std::make_unique<ScoreRecordingCache>(CreateKvCache(config, g, r), &run.set_layers);
  });
  if (context != nullptr) s.set_score_context(MakeScoreContext(*model.tokenizer, config, *context));
  s.BeginRun(static_cast<int64_t>(prompt.size()), 40);
  std::span<const float> logits = s.Prefill(prompt);
  run.cost = s.external_score_cost();
  for (int i = 0; i < 8; ++i) {
    run.tokens.push_back(Sampler::Argmax(logits));
    logits = s.Decode(run.tokens.back());
  }
  // A further turn continues the run: its prompt end takes no external scores.
  s.ContinueRun(8, 8);
  s.Prefill(model.tokenizer->Encode(" More facts follow.", false, false));
  run.stats = s.kv_stats();
  return run;
}

void CheckScoreHook(const LoadedModel& model, const char* policy) {
  SCOPED_TRACE(policy);
  const std::string text = HookFacts(16);
  const int policy_layers = [&] {
    int n = 0;
    for (int l = 0; l < model.model->config().n_layers; ++l) n += !model.model->config().is_sliding(l);
    return n;
  }();
  const HookRun hooked = RunWith(model, policy, 0.2, text, &text);
  ASSERT_TRUE(hooked.cost.has_value());
  EXPECT_GT(hooked.cost->tokens, static_cast<int64_t>(model.EncodeRaw(text).size()));
  EXPECT_EQ(hooked.stats.external_score_tokens, hooked.cost->tokens);
  EXPECT_GT(hooked.stats.external_score_seconds, 0.0);
  // Once per policy layer, in order, at the first prompt end only (not at the further turn).
  ASSERT_EQ(hooked.set_layers.size(), static_cast<size_t>(policy_layers));
  for (int l = 0; l < policy_layers; ++l) EXPECT_EQ(hooked.set_layers[l], l);
  EXPECT_GT(hooked.stats.evictions, 0);

  // The same scores as handed over by hand: the same continuation.
  const HookRun by_hand = RunWith(model, policy, 0.2, text, nullptr, /*by_hand=*/true);
  EXPECT_FALSE(by_hand.cost.has_value());  // the cache asked for nothing more
  EXPECT_EQ(by_hand.set_layers, hooked.set_layers);
  EXPECT_EQ(by_hand.tokens, hooked.tokens);

  // Without a budget nothing routes on them: nothing is computed.
  const HookRun unlimited = RunWith(model, policy, 1.0, text, &text);
  EXPECT_FALSE(unlimited.cost.has_value());
  EXPECT_TRUE(unlimited.set_layers.empty());
  EXPECT_EQ(unlimited.stats.external_score_tokens, 0);

  // A cache that asks without a context refuses to route silently.
  EXPECT_THROW(RunWith(model, policy, 0.2, text, nullptr), Error);
  // Other score sources and policies ask for nothing.
  const HookRun qevict = RunWith(model, "qevict", 0.2, text, nullptr);
  EXPECT_TRUE(qevict.set_layers.empty());
}

TEST(ScoreHooksTest, SessionScoresWhatTheCacheAsksForSmolLM2) {
  const LoadedModel* model = testing::ReferenceModel();
  ASSERT_NE(model, nullptr) << testing::ReferenceModelPath();
  for (const char* policy : {"qevict-zip", "kvzip"}) CheckScoreHook(*model, policy);
}

TEST(ScoreHooksTest, InterleavedCacheForwardsToItsGlobalLayersGemma) {
  const LoadedModel* model = testing::GemmaModel();
  ASSERT_NE(model, nullptr) << testing::GemmaModelPath();
  CheckScoreHook(*model, "qevict-zip");
}

TEST(ScoreHooksTest, ChatContextIsTheUserText) {
  const std::vector<ChatMessage> messages = {
      {"system", "Be brief."}, {"user", "First."}, {"assistant", "Ok."}, {"user", "Second."}};
  EXPECT_EQ(ChatContextText(messages), "First.\n\nSecond.");
  EXPECT_EQ(ChatContextText({{"system", "Only a system message."}}), "");
}

}  // namespace
}  // namespace qevict
