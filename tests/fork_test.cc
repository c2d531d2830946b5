// One prefill, every policy (policy/registry.h, CreatePrefixCache / ForkKvCache): a cache forked
// from a prefix cache after the prompt must behave exactly like a cache of that policy and
// budget that read the prompt itself — same tokens, bit-identical logits, same tier counters —
// because the evaluator's comparisons rest on it.
#include <cstring>
#include <map>

#include "engine/sampler.h"
#include "engine/session.h"
#include "policy/registry.h"
#include "tests/test_support.h"

namespace qevict {
namespace {

std::vector<int32_t> Prompt(const LoadedModel& m) {
  std::string text;
  for (int i = 0; text.size() < 1600; ++i) {
    text += "Entry " + std::to_string(i) + ": the parcel marked " + std::to_string(500 + 41 * i) +
            " was stored on shelf " + std::to_string(i % 7) + ". ";
  }
  text += "\nWhich shelf holds the parcel marked 664?";
  return m.EncodeChat({{"user", text}}, true);
}

struct Trace {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
  KvStats stats;
};

Trace Continue(Session& s, std::span<const float> logits, int n_new) {
  Trace t;
  for (int i = 0; i < n_new; ++i) {
    t.logits.emplace_back(logits.begin(), logits.end());
    const int32_t tok = Sampler::Argmax(logits);
    t.tokens.push_back(tok);
    logits = s.Decode(tok);
  }
  t.stats = s.cache().Stats();
  return t;
}

// A prefix cache of the default layout that has read the prompt (logits of its last token in
// *logits), leaving room for n_ctx - prompt tokens.
std::unique_ptr<Session> PrefilledPrefix(const LoadedModel& m, ThreadPool& pool,
                                         const SessionOptions& so,
                                         const std::vector<int32_t>& prompt,
                                         std::vector<float>* logits) {
  const KvConfig geometry;
  auto prefix = std::make_unique<Session>(*m.model, pool, so, [&](const KvGeometry& g,
                                                                   const Rope& r) {
    return std::unique_ptr<KvCache>(CreatePrefixCache(geometry, g, r));
  });
  const int64_t n = static_cast<int64_t>(prompt.size());
  prefix->BeginRun(n, so.n_ctx - n);
  const std::span<const float> l = prefix->Prefill(prompt);
  logits->assign(l.begin(), l.end());
  return prefix;
}

TEST(ForkTest, ForkedCachesMatchCachesThatReadThePrompt) {
  QEVICT_REQUIRE_MODEL(m);
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = Prompt(*m);
  const int n_new = 12;  // past one routing step (every 8 tokens)
  SessionOptions so;
  so.n_ctx = static_cast<int64_t>(prompt.size()) + n_new;
  so.prefill_chunk = 128;  // several chunks: scores accumulate across EndBatch calls

  // One prefill (defaults: W = 8); a policy of another layout (kivi's 32-token key groups:
  // PolicyLayout) forks from that prefix re-windowed, never reading the prompt again.
  const KvConfig geometry;  // defaults: the prefix cache's sinks, recent, bits
  std::vector<float> prefix_logits;
  const std::unique_ptr<Session> prefix_session =
      PrefilledPrefix(*m, pool, so, prompt, &prefix_logits);
  const Session& prefix = *prefix_session;
  std::map<int, std::unique_ptr<Session>> relayouts;
  auto prefix_for = [&](const KvConfig& c) -> const Session& {
    const int window = PolicyLayout(c).window;
    if (c.policy == "full" || window == geometry.window) return prefix;
    std::unique_ptr<Session>& slot = relayouts[window];
    if (!slot) {
      slot = std::make_unique<Session>(prefix, [&](const KvCache& p, const Rope& r) {
        return std::unique_ptr<KvCache>(
            RelayoutPrefixCache(dynamic_cast<const TieredCache&>(p), c, so.prefill_chunk, r));
      });
    }
    return *slot;
  };

  for (const char* name : {"full", "streaming", "h2o", "tova", "snapkv", "pyramidkv", "kivi",
                           "mikv", "qevict", "qevict-qa", "quest", "recall-oracle"}) {
    for (double budget : {0.12, 0.3}) {
      // Every policy at a tight budget; the two that promote or decide once at a loose one too.
      if (budget > 0.2 && std::string(name) != "qevict" && std::string(name) != "qevict-qa" &&
          std::string(name) != "snapkv") {
        break;
      }
      SCOPED_TRACE(std::string(name) + " @ " + std::to_string(budget));
      KvConfig c;
      c.policy = name;
      c.budget = std::string(name) == "full" ? 1.0 : budget;
      c.prefill_chunk = 0;  // a fork is routed after the whole prompt: so is the fresh cache
      Session fresh(*m->model, pool, so, [&](const KvGeometry& g, const Rope& r) {
        return CreateKvCache(c, g, r);
      });
      fresh.BeginRun(static_cast<int64_t>(prompt.size()), n_new);
      const Trace expected = Continue(fresh, fresh.Prefill(prompt), n_new);

      Session forked(prefix_for(c), [&](const KvCache& p, const Rope& r) {
        return ForkKvCache(dynamic_cast<const TieredCache&>(p), c, r, pool);
      });
      const Trace got = Continue(forked, prefix_logits, n_new);

      ASSERT_EQ(got.tokens, expected.tokens);
      for (size_t i = 0; i < got.logits.size(); ++i) {
        ASSERT_EQ(0, std::memcmp(got.logits[i].data(), expected.logits[i].data(),
                                 got.logits[i].size() * sizeof(float)))
            << "logits differ at step " << i;
      }
      EXPECT_EQ(got.stats.resident_bytes(), expected.stats.resident_bytes());
      EXPECT_EQ(got.stats.peak_bytes, expected.stats.peak_bytes);
      EXPECT_EQ(got.stats.prefill_peak_bytes, expected.stats.prefill_peak_bytes);
      EXPECT_EQ(got.stats.peak_fp16_bytes, expected.stats.peak_fp16_bytes);
      EXPECT_EQ(got.stats.reserved_bytes, expected.stats.reserved_bytes);
      EXPECT_EQ(got.stats.peak_reserved_bytes, expected.stats.peak_reserved_bytes);
      EXPECT_EQ(got.stats.promotions, expected.stats.promotions);
      EXPECT_EQ(got.stats.demotions, expected.stats.demotions);
      EXPECT_EQ(got.stats.evictions, expected.stats.evictions);
      EXPECT_EQ(got.stats.routing_steps, expected.stats.routing_steps);
      EXPECT_EQ(got.stats.infeasible, expected.stats.infeasible);
      if (std::string(name) == "full") break;  // full has no budget
    }
  }
}

TEST(ForkTest, ARewindowedPrefixRefusesPoliciesThatRouteOnScores) {
  QEVICT_REQUIRE_MODEL(m);
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = Prompt(*m);
  SessionOptions so;
  so.n_ctx = static_cast<int64_t>(prompt.size()) + 4;
  std::vector<float> first;
  const std::unique_ptr<Session> prefix_session = PrefilledPrefix(*m, pool, so, prompt, &first);
  Session& prefix = *prefix_session;
  KvConfig kivi;
  kivi.policy = "kivi";
  kivi.budget = 0.3;
  Session relayout(prefix, [&](const KvCache& p, const Rope& r) {
    return std::unique_ptr<KvCache>(
        RelayoutPrefixCache(dynamic_cast<const TieredCache&>(p), kivi, so.prefill_chunk, r));
  });
  const auto& cache = dynamic_cast<const TieredCache&>(relayout.cache());
  EXPECT_EQ(cache.config().window, kivi.option("kivi_group"));
  EXPECT_EQ(cache.n_tokens(), static_cast<int64_t>(prompt.size()));
  // The same keys and values, in attention order, whatever the windows.
  const auto& original = dynamic_cast<const TieredCache&>(prefix.cache());
  for (int layer = 0; layer < cache.geometry().n_layers; ++layer) {
    std::vector<float> k1, v1, k2, v2;
    std::vector<int32_t> p1, p2;
    original.DenseLayer(layer, &k1, &v1, &p1);
    cache.DenseLayer(layer, &k2, &v2, &p2);
    ASSERT_EQ(k1, k2);
    ASSERT_EQ(v1, v2);
    ASSERT_EQ(p1, p2);
  }
  const RopeTables ropes = m->model->MakeRopes(so.n_ctx);
  for (const char* name : {"h2o", "tova", "qevict"}) {
    KvConfig c = kivi;
    c.policy = name;
    c.window = static_cast<int>(kivi.option("kivi_group"));  // the layout matches: only the missing scores are in the way
    EXPECT_THROW(ForkKvCache(cache, c, *ropes.global, pool), Error)
        << name;
  }
  // The evaluator's shadow of a kivi row (a never-routing fp16 copy) is allowed, and sees the
  // whole prompt.
  const auto shadow = ForkShadowCache(cache, *ropes.global, pool);
  EXPECT_EQ(shadow->n_tokens(), static_cast<int64_t>(prompt.size()));
}

TEST(ForkTest, ShadowSeesTheFullCachesAttention) {
  QEVICT_REQUIRE_MODEL(m);
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = Prompt(*m);
  SessionOptions so;
  so.n_ctx = static_cast<int64_t>(prompt.size()) + 4;
  std::vector<float> first;
  const std::unique_ptr<Session> prefix_session = PrefilledPrefix(*m, pool, so, prompt, &first);
  Session& prefix = *prefix_session;
  const int32_t tok = Sampler::Argmax(first);
  Session shadow(prefix, [&](const KvCache& p, const Rope& r) {
    return std::unique_ptr<KvCache>(ForkShadowCache(dynamic_cast<const TieredCache&>(p), r, pool));
  });
  KvConfig full;
  full.policy = "full";
  Session reference(prefix, [&](const KvCache& p, const Rope& r) {
    return ForkKvCache(dynamic_cast<const TieredCache&>(p), full, r, pool);
  });
  const std::span<const float> a = shadow.Decode(tok);
  const std::span<const float> b = reference.Decode(tok);
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  const auto& cache = dynamic_cast<const TieredCache&>(shadow.cache());
  for (int layer = 0; layer < cache.geometry().n_layers; ++layer) {
    const WindowView view = cache.View(layer);
    double mass = 0.0;
    for (const WindowInfo& w : view.windows) {
      EXPECT_EQ(w.tier, Tier::kFp16);
      mass += w.last_mass;
    }
    // Windows hold everything but the sinks: most of the mass, never more than all of it.
    EXPECT_GT(mass, 0.0);
    EXPECT_LE(mass, 1.0 + 1e-4);
  }
}

}  // namespace
}  // namespace qevict
