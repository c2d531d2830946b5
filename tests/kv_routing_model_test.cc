// Routing on the real model with scoring on (budget < 1): at 5% and 30% of the fp16 cache the
// cache routes, keeps resident bytes under the ceiling after every step, holds windows in the
// tiers each policy is documented to use, and at 30% starts the answer as the full cache does;
// and a question about an archived needle promotes the needle's own window.
#include <algorithm>
#include <cstring>
#include <map>

#include "engine/sampler.h"
#include "engine/session.h"
#include "eval/chat_turns.h"
#include "kv/tiered_cache.h"
#include "policy/registry.h"
#include "tests/test_support.h"

namespace qevict {
namespace {

std::string Records(int n, int first = 0) {
  std::string text;
  for (int i = first; i < first + n; ++i) {
    text += "Record " + std::to_string(i) + ": the crate with serial " +
            std::to_string(1000 + 37 * i) + " went to dock " + std::to_string(i % 9) + ". ";
  }
  return text;
}

// The documented floor (docs/kv-cache.md, "Infeasible budgets"), as in budget_invariant_test.
int64_t DocumentedFloor(const KvConfig& c, const KvGeometry& g, int64_t tokens) {
  const int64_t fp_window = 2 * int64_t{g.n_kv_heads} * c.window * g.head_dim * 2 + 28;
  const int64_t sinks = 2 * int64_t{g.n_kv_heads} * c.sinks * g.head_dim * 2;
  const int64_t recent_windows = (c.recent + c.window - 1) / c.window + 2;
  return g.n_layers * (sinks + recent_windows * fp_window) + (tokens + 1) * 4;
}

struct GreedyRun {
  std::vector<int32_t> tokens;
  std::vector<KvStats> stats;  // after the prompt and after every generated token
  int64_t band_windows_scored = 0, band_windows = 0;
};

// Greedy decoding of a fork of `prefix` (one prefill for every policy and budget; fork_test
// checks that a fork equals a cache that read the prompt itself).
GreedyRun Greedy(const Session& prefix, std::span<const float> prefix_logits,
                 const KvConfig& config, int n_new, ThreadPool& pool) {
  Session s(prefix, [&](const KvCache& p, const Rope& r) {
    return ForkKvCache(dynamic_cast<const TieredCache&>(p), config, r, pool);
  });
  GreedyRun run;
  std::span<const float> logits = prefix_logits;
  run.stats.push_back(s.cache().Stats());
  for (int i = 0; i < n_new; ++i) {
    const int32_t tok = Sampler::Argmax(logits);
    run.tokens.push_back(tok);
    logits = s.Decode(tok);
    run.stats.push_back(s.cache().Stats());
  }
  if (const auto* tiered = dynamic_cast<const TieredCache*>(&s.cache())) {
    for (int l = 0; l < s.cache().geometry().n_layers; ++l) {
      for (const WindowInfo& w : tiered->View(l).windows) {
        if (!w.in_band || w.tier == Tier::kEvicted) continue;
        ++run.band_windows;
        if (w.score > 0.0f) ++run.band_windows_scored;
      }
    }
  }
  return run;
}

TEST(KvRoutingModelTest, RoutesAtFiveAndThirtyPercentUnderTheCeiling) {
  QEVICT_REQUIRE_MODEL(m);
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = m->EncodeChat(
      {{"user", Records(150) + "\nWhich dock did the crate with serial 1370 go to?"}}, true);
  ASSERT_GT(prompt.size(), 1400u);
  const int n_new = 24;
  SessionOptions so;
  so.n_ctx = static_cast<int64_t>(prompt.size()) + n_new;
  Session prefix(*m->model, pool, so, [](const KvGeometry& g, const Rope& r) {
    return std::unique_ptr<KvCache>(CreatePrefixCache(KvConfig{}, g, r));
  });
  prefix.BeginRun(static_cast<int64_t>(prompt.size()), n_new);
  const std::span<const float> first = prefix.Prefill(prompt);
  const std::vector<float> prefix_logits(first.begin(), first.end());
  KvConfig full;
  full.policy = "full";
  const std::vector<int32_t> reference = Greedy(prefix, prefix_logits, full, n_new, pool).tokens;

  const KvGeometry geo = m->model->kv_geometry(so.n_ctx);
  for (double budget : {0.05, 0.3}) {
    for (const std::string name : {"qevict", "qevict-qa", "h2o", "snapkv", "mikv", "streaming"}) {
      SCOPED_TRACE(name + " @ " + std::to_string(budget));
      KvConfig c;
      c.policy = name;
      c.budget = budget;
      const GreedyRun run = Greedy(prefix, prefix_logits, c, n_new, pool);
      const KvStats& end = run.stats.back();
      const int64_t floor = DocumentedFloor(c, geo, so.n_ctx);
      ASSERT_GT(end.budget_bytes, 0);
      EXPECT_FALSE(end.infeasible) << end.note;  // both budgets fit this prompt
      for (const KvStats& s : run.stats) {  // the ceiling after the prompt and every token
        ASSERT_LE(s.resident_bytes(), s.infeasible ? std::max(s.budget_bytes, floor) : s.budget_bytes);
      }
      // It routed: after the prompt and every 8 tokens.
      EXPECT_GE(end.routing_steps, 1 + n_new / 8);
      EXPECT_GT(end.evictions, 0);
      // Tiers: the quantizing policies hold quantized windows, the others none.
      const bool quantizes = name == "qevict" || name == "qevict-qa" || name == "mikv";
      if (quantizes) {
        EXPECT_GT(end.quant_windows, 0);
      } else {
        EXPECT_EQ(end.quant_windows, 0);
      }
      EXPECT_GT(end.fp16_windows, 0);
      // Scores accumulate (except for the policies that do not rank by them).
      if (name != "snapkv" && name != "streaming") {
        EXPECT_EQ(run.band_windows_scored, run.band_windows);
      }
      // Tokens: at 0.3 every policy starts the answer as the full cache does (measured: the
      // first 16 tokens agree for all six; 8 are required); at 0.05 a full-length generation.
      ASSERT_EQ(run.tokens.size(), static_cast<size_t>(n_new));
      if (budget >= 0.3) {
        EXPECT_EQ(std::vector<int32_t>(run.tokens.begin(), run.tokens.begin() + 8),
                  std::vector<int32_t>(reference.begin(), reference.begin() + 8));
      }
    }
  }
}

// Finds the window (index within each layer's band numbering) holding the first token at which
// the decoded prompt contains `needle`.
int64_t WindowOf(const LoadedModel& m, const std::vector<int32_t>& tokens, const std::string& needle,
                 const KvConfig& c) {
  for (size_t n = 1; n <= tokens.size(); ++n) {
    const std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + n);
    if (m.tokenizer->Decode(prefix).find(needle) != std::string::npos) {
      return (static_cast<int64_t>(n - 1) - c.sinks) / c.window;
    }
  }
  return -1;
}

TEST(KvRoutingModelTest, AQuestionAboutAnArchivedNeedlePromotesTheNeedlesWindow) {
  QEVICT_REQUIRE_MODEL(m);
  ThreadPool pool(2);
  EvalTask task;
  task.context = Records(30) + "The secret code of the blue vault is 4729. " + Records(60, 30);
  task.turns = {{"Reply with the word OK.", {"OK"}}, {"What is the secret code of the blue vault?", {"4729"}}};
  const TurnTokens turns = BuildTurnTokens(*m, task);
  ASSERT_EQ(turns.later.size(), 1u);
  KvConfig c;
  c.policy = "qevict-qa";
  c.budget = 0.4;  // most of the band is quantized rather than evicted: the needle is archived
  const int64_t needle = WindowOf(*m, turns.first, "4729", c);
  ASSERT_GT(needle, 0);
  const int n_new = 8;
  SessionOptions so;
  so.n_ctx = static_cast<int64_t>(turns.first.size() + turns.later[0].size()) + 2 * n_new;
  Session s(*m->model, pool, so,
            [c](const KvGeometry& g, const Rope& r) { return CreateKvCache(c, g, r); });
  s.BeginRun(static_cast<int64_t>(turns.first.size()), so.n_ctx - turns.first.size());
  std::span<const float> logits = s.Prefill(turns.first);
  for (int i = 0; i < n_new; ++i) logits = s.Decode(Sampler::Argmax(logits));
  const auto& cache = dynamic_cast<const TieredCache&>(s.cache());
  const int n_layers = s.cache().geometry().n_layers;
  std::vector<std::vector<Tier>> before(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    for (const WindowInfo& w : cache.View(l).windows) before[l].push_back(w.tier);
  }
  logits = s.Prefill(turns.later[0]);  // the question: a prompt end, routed
  // Per layer where the needle's window was archived: was it promoted, and how many of the
  // other archived windows were?
  int archived = 0, promoted = 0;
  int64_t others_archived = 0, others_promoted = 0;
  for (int l = 0; l < n_layers; ++l) {
    if (before[l][needle] != Tier::kQuant) continue;
    const WindowView view = cache.View(l);
    ++archived;
    if (view.windows[needle].tier == Tier::kFp16) ++promoted;
    for (size_t k = 0; k < before[l].size(); ++k) {
      if (static_cast<int64_t>(k) == needle || before[l][k] != Tier::kQuant) continue;
      ++others_archived;
      if (view.windows[k].tier == Tier::kFp16) ++others_promoted;
    }
  }
  std::printf("needle window %lld archived in %d of %d layers, promoted in %d; other archived "
              "windows promoted: %lld of %lld\n",
              static_cast<long long>(needle), archived, n_layers, promoted,
              static_cast<long long>(others_promoted), static_cast<long long>(others_archived));
  ASSERT_GT(archived, 0) << "the needle was never archived: the test proves nothing";
  EXPECT_GT(promoted, 0);
  // The needle's window is promoted far more often than an archived window picked at random.
  EXPECT_GT(static_cast<double>(promoted) / archived,
            3.0 * static_cast<double>(others_promoted) / std::max<int64_t>(1, others_archived));
  EXPECT_LE(cache.Stats().resident_bytes(), cache.Stats().budget_bytes);
}

}  // namespace
}  // namespace qevict
