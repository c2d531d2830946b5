// The cold tier and recall of qevict-recall (docs/kv-cache.md, "Cold tier and recall"): windows
// that leave RAM are kept bit-exact on disk, a later prompt whose queries point at one brings it
// back into fp16 with the very bytes a full cache holds, and a damaged or unwritable cold file
// is an error that names it.
#include <unistd.h>

#include <gtest/gtest.h>

#include "kv/full_cache.h"
#include "kv/kv_test_util.h"
#include "kv/tiered_cache.h"
#include "policy/registry.h"
#include "util/byte_stream.h"
#include "util/error.h"

namespace qevict {
namespace {

constexpr int kPrompt = 400;    // the document
constexpr int kQuestion = 24;   // a later prompt (a question)

struct Fixture {
  KvGeometry geo = testing::SmallGeometry(2, 4, 2, 32, 4096);
  Rope rope{testing::TestRopeConfig(32), 8192};
  KvConfig config;
  Fixture() {
    config.policy = "qevict-recall";
    config.budget = 0.3;
    config.prefill_chunk = 0;
  }
  TieredCache& Make(std::unique_ptr<KvCache>& owned) {
    owned = CreateKvCache(config, geo, rope);
    return static_cast<TieredCache&>(*owned);
  }
};

// The first cold window of every layer after the document (the test's "needle").
int64_t FirstColdWindow(const TieredCache& cache, int layer) {
  for (const WindowInfo& w : cache.View(layer).windows) {
    if (w.tier == Tier::kCold) return w.index;
  }
  return -1;
}

TEST(ColdTier, AQuestionRecallsTheColdWindowItPointsAtBitExact) {
  Fixture f;
  // Each layer's own recall (windows shared across layers go first and would fill this small
  // budget's fp16 share: their placement is the policy's, tested on models by the evaluation).
  f.config.recall_shared = 0;
  std::unique_ptr<KvCache> owned;
  TieredCache& cache = f.Make(owned);
  FullCache full(f.geo, f.rope);
  testing::SyntheticModel model(f.geo, 7, 1.0f);
  ThreadPool pool(2);
  cache.BeginRun(kPrompt, 8);
  full.BeginRun(kPrompt, 8);
  testing::RunBatch(cache, model, 0, kPrompt, BatchKind::kPromptEnd, pool);
  testing::RunBatch(full, model, 0, kPrompt, BatchKind::kPromptEnd, pool);
  ASSERT_NO_THROW(cache.CheckInvariants());
  KvStats s = cache.Stats();
  ASSERT_FALSE(s.infeasible) << s.note;
  EXPECT_GT(s.cold_windows, 0);
  EXPECT_EQ(s.evicted_windows, 0);  // nothing is dropped: what left RAM is cold
  EXPECT_GT(s.cold_bytes, 0);
  EXPECT_EQ(s.recalls, 0);

  // The question's queries, in every head of every layer, are the needle's first key (after
  // RoPE, as the cache holds it), scaled up: that window is what it asks for.
  std::vector<int64_t> needle(f.geo.n_layers);
  std::vector<std::vector<float>> needle_key(f.geo.n_layers);
  const int hd = f.geo.head_dim;
  for (int layer = 0; layer < f.geo.n_layers; ++layer) {
    needle[layer] = FirstColdWindow(cache, layer);
    ASSERT_GE(needle[layer], 0);
    const int32_t pos = static_cast<int32_t>(f.config.sinks + needle[layer] * f.config.window);
    std::vector<float> q(f.geo.n_heads * hd), k(f.geo.n_kv_heads * hd), v(k.size());
    model.Activations(layer, pos, q.data(), k.data(), v.data());
    f.rope.Apply(k.data(), f.geo.n_kv_heads, hd, pos);
    needle_key[layer] = k;
  }
  model.query_override = [&](int layer, int32_t pos, float* q) {
    if (pos < kPrompt) return;
    const int group = f.geo.n_heads / f.geo.n_kv_heads;
    for (int h = 0; h < f.geo.n_heads; ++h) {
      for (int c = 0; c < hd; ++c) q[h * hd + c] = 4.0f * needle_key[layer][(h / group) * hd + c];
    }
  };
  cache.ContinueRun(kQuestion, 8);
  full.ContinueRun(kQuestion, 8);
  testing::RunBatch(cache, model, kPrompt, kQuestion, BatchKind::kPromptEnd, pool);
  testing::RunBatch(full, model, kPrompt, kQuestion, BatchKind::kPromptEnd, pool);
  ASSERT_NO_THROW(cache.CheckInvariants());
  s = cache.Stats();
  EXPECT_GT(s.recalls, 0);
  EXPECT_GT(s.cold_read_bytes, 0);
  EXPECT_LE(s.resident_bytes(), *cache.budget());

  for (int layer = 0; layer < f.geo.n_layers; ++layer) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    const WindowView view = cache.View(layer);
    ASSERT_EQ(view.windows[needle[layer]].tier, Tier::kFp16);
    // Its keys and values are the full cache's, bit for bit.
    std::vector<float> k, v, fk, fv;
    std::vector<int32_t> pos, fpos;
    cache.DenseLayer(layer, &k, &v, &pos);
    full.DenseLayer(layer, &fk, &fv, &fpos);
    const int32_t first = view.windows[needle[layer]].first_pos;
    const auto at = std::find(pos.begin(), pos.end(), first);
    ASSERT_NE(at, pos.end());
    const int64_t row = int64_t{f.geo.n_kv_heads} * hd;
    const int64_t r = at - pos.begin();
    for (int t = 0; t < f.config.window; ++t) {
      ASSERT_EQ(pos[r + t], fpos[first + t]);
      for (int64_t c = 0; c < row; ++c) {
        ASSERT_EQ(k[(r + t) * row + c], fk[(first + t) * row + c]);
        ASSERT_EQ(v[(r + t) * row + c], fv[(first + t) * row + c]);
      }
    }
  }
  // Decoding goes on within the budget.
  for (int i = 0; i < 16; ++i) {
    testing::RunBatch(cache, model, kPrompt + kQuestion + i, 1, BatchKind::kGenerated, pool);
    ASSERT_NO_THROW(cache.CheckInvariants());
    ASSERT_LE(cache.Stats().resident_bytes(), *cache.budget());
  }
}

// A prompt cache holds the cold tier: a cache loaded from a saved one has the same windows cold
// (in its own file), the same bytes, and a question recalls from it what it would have recalled
// from the original, bit for bit.
TEST(ColdTier, APromptCacheHoldsTheColdTierAndRecallsFromIt) {
  Fixture f;
  std::unique_ptr<KvCache> owned, loaded_owned;
  TieredCache& cache = f.Make(owned);
  testing::SyntheticModel model(f.geo, 7, 1.0f);
  ThreadPool pool(1);
  cache.BeginRun(kPrompt, 8);
  testing::RunBatch(cache, model, 0, kPrompt, BatchKind::kPromptEnd, pool);
  ASSERT_GT(cache.Stats().cold_windows, 0);
  ByteWriter out;
  cache.SaveState(out);
  TieredCache& loaded = f.Make(loaded_owned);
  ByteReader in(out.bytes(), "saved cache");
  loaded.LoadState(in);
  ASSERT_NO_THROW(loaded.CheckInvariants());
  EXPECT_EQ(loaded.Stats().cold_windows, cache.Stats().cold_windows);
  EXPECT_EQ(loaded.Stats().cold_bytes, cache.Stats().cold_bytes);
  EXPECT_EQ(loaded.Stats().resident_bytes(), cache.Stats().resident_bytes());
  EXPECT_NE(loaded.cold_fd_for_testing(), cache.cold_fd_for_testing());  // a file of its own
  for (int layer = 0; layer < f.geo.n_layers; ++layer) {
    const WindowView a = cache.View(layer), b = loaded.View(layer);
    ASSERT_EQ(a.windows.size(), b.windows.size());
    for (size_t w = 0; w < a.windows.size(); ++w) EXPECT_EQ(a.windows[w].tier, b.windows[w].tier);
  }
  // The same question to both: the same windows come back, with the same bytes.
  model.query_override = [&](int layer, int32_t pos, float* q) {
    if (pos < kPrompt) return;
    for (int i = 0; i < f.geo.n_heads * f.geo.head_dim; ++i) q[i] *= 3.0f;
  };
  for (TieredCache* c : {&cache, &loaded}) {
    c->ContinueRun(kQuestion, 8);
    testing::RunBatch(*c, model, kPrompt, kQuestion, BatchKind::kPromptEnd, pool);
    ASSERT_NO_THROW(c->CheckInvariants());
  }
  EXPECT_EQ(loaded.Stats().recalls, cache.Stats().recalls);
  EXPECT_GT(cache.Stats().recalls, 0);
  for (int layer = 0; layer < f.geo.n_layers; ++layer) {
    std::vector<float> k, v, lk, lv;
    std::vector<int32_t> pos, lpos;
    cache.DenseLayer(layer, &k, &v, &pos);
    loaded.DenseLayer(layer, &lk, &lv, &lpos);
    EXPECT_EQ(pos, lpos);
    EXPECT_EQ(k, lk);
    EXPECT_EQ(v, lv);
  }
}

TEST(ColdTier, AnUnwritableDirectoryIsAnErrorNamingIt) {
  Fixture f;
  f.config.cold_store_dir = "/nonexistent-qevict-cold-dir";
  std::unique_ptr<KvCache> owned;
  try {
    f.Make(owned);
    FAIL() << "a cache with a cold tier in a missing directory was made";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-qevict-cold-dir"), std::string::npos)
        << e.what();
  }
}

TEST(ColdTier, ATruncatedColdFileIsAnErrorAtRecall) {
  Fixture f;
  std::unique_ptr<KvCache> owned;
  TieredCache& cache = f.Make(owned);
  testing::SyntheticModel model(f.geo, 7, 1.0f);
  ThreadPool pool(1);
  cache.BeginRun(kPrompt, 8);
  testing::RunBatch(cache, model, 0, kPrompt, BatchKind::kPromptEnd, pool);
  ASSERT_GT(cache.Stats().cold_windows, 0);
  ASSERT_GE(cache.cold_fd_for_testing(), 0);
  ASSERT_EQ(ftruncate(cache.cold_fd_for_testing(), 0), 0);  // as another process could
  cache.ContinueRun(kQuestion, 8);
  try {
    testing::RunBatch(cache, model, kPrompt, kQuestion, BatchKind::kPromptEnd, pool);
    FAIL() << "recall read a truncated cold file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qevict-cold"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qevict
