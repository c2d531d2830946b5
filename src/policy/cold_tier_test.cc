// The cold tier and recall of qevict-recall (docs/kv-cache.md, "Cold tier and recall"): windows
// that leave RAM are kept bit-exact on disk, a later prompt whose queries point at one brings it
// back into fp16 with the very bytes a full cache holds, and a damaged or unwritable cold file
// is an error that names it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <memory>
#include <string>

#include "kv/disk_cold_store.h"
#include "kv/full_cache.h"
#include "kv/kv_test_util.h"
#include "kv/tiered_cache.h"
#include "kv/window_digest.h"
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

// Makes every query from position kPrompt on point at the first cold window of its layer (the
// needle's first key after RoPE, as the cache holds it, scaled up): that window is what the
// question asks for. Returns the needle of each layer.
std::vector<int64_t> AskForTheFirstColdWindows(const Fixture& f, const TieredCache& cache,
                                               testing::SyntheticModel& model) {
  const int hd = f.geo.head_dim;
  std::vector<int64_t> needle(f.geo.n_layers);
  auto keys = std::make_shared<std::vector<std::vector<float>>>(f.geo.n_layers);
  for (int layer = 0; layer < f.geo.n_layers; ++layer) {
    needle[layer] = FirstColdWindow(cache, layer);
    if (needle[layer] < 0) continue;
    const int32_t pos = static_cast<int32_t>(f.config.sinks + needle[layer] * f.config.window);
    std::vector<float> q(f.geo.n_heads * hd), k(f.geo.n_kv_heads * hd), v(k.size());
    model.Activations(layer, pos, q.data(), k.data(), v.data());
    f.rope.Apply(k.data(), f.geo.n_kv_heads, hd, pos);
    (*keys)[layer] = k;
  }
  const int group = f.geo.n_heads / f.geo.n_kv_heads, n_heads = f.geo.n_heads;
  model.query_override = [keys, group, n_heads, hd](int layer, int32_t pos, float* q) {
    if (pos < kPrompt) return;
    for (int h = 0; h < n_heads; ++h) {
      for (int c = 0; c < hd; ++c) q[h * hd + c] = 4.0f * (*keys)[layer][(h / group) * hd + c];
    }
  };
  return needle;
}

// The document read by a cache under test and by the full cache beside it, routed at its end.
void ReadDocument(KvCache& cache, FullCache& full, const testing::SyntheticModel& model,
                  ThreadPool& pool, int64_t max_new_tokens) {
  cache.BeginRun(kPrompt, max_new_tokens);
  full.BeginRun(kPrompt, max_new_tokens);
  testing::RunBatch(cache, model, 0, kPrompt, BatchKind::kPromptEnd, pool);
  testing::RunBatch(full, model, 0, kPrompt, BatchKind::kPromptEnd, pool);
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
  ReadDocument(cache, full, model, pool, 8);
  ASSERT_NO_THROW(cache.CheckInvariants());
  KvStats s = cache.Stats();
  ASSERT_FALSE(s.infeasible) << s.note;
  EXPECT_GT(s.cold_windows, 0);
  EXPECT_EQ(s.evicted_windows, 0);  // nothing is dropped: what left RAM is cold
  EXPECT_GT(s.cold_bytes, 0);
  EXPECT_EQ(s.recalls, 0);

  // The question's queries point at the first cold window of each layer.
  const std::vector<int64_t> needle = AskForTheFirstColdWindows(f, cache, model);
  for (int64_t n : needle) ASSERT_GE(n, 0);
  const int hd = f.geo.head_dim;
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

// A long prompt read in chunks (bounded prefill) with the question at its end: the earlier
// chunks sent the needle to the cold tier, and the last chunk recalls it before it attends, as a
// later prompt would, so the question's attention output is the full cache's. Without that
// recall (recall_prompt = 0: the prompt's end routing recalls it only after the question has
// attended) the output is far from it.
TEST(ColdTier, TheLastChunkOfABoundedPromptRecallsBeforeItAttends) {
  double error[2] = {0.0, 0.0};  // [recall_prompt on] the question's output against the full cache
  for (const bool recall : {true, false}) {
    SCOPED_TRACE(recall ? "recall_prompt 4" : "recall_prompt 0");
    Fixture f;
    f.config.recall_shared = 0;
    f.config.prefill_chunk = 100;
    f.config.recall_prompt = recall ? 4 : 0;
    std::unique_ptr<KvCache> owned;
    TieredCache& cache = f.Make(owned);
    FullCache full(f.geo, f.rope);
    testing::SyntheticModel model(f.geo, 7, 1.0f);
    ThreadPool pool(2);
    cache.BeginRun(kPrompt + kQuestion, 8);
    full.BeginRun(kPrompt + kQuestion, 8);
    for (int p = 0; p < kPrompt; p += 100) {
      testing::RunBatch(cache, model, p, 100, BatchKind::kPromptChunk, pool);
      testing::RunBatch(full, model, p, 100, BatchKind::kPromptChunk, pool);
    }
    ASSERT_NO_THROW(cache.CheckInvariants());
    ASSERT_GT(cache.Stats().cold_windows, 0);
    ASSERT_EQ(cache.Stats().recalls, 0);
    // The question's queries point at the first cold window of each layer.
    for (int64_t n : AskForTheFirstColdWindows(f, cache, model)) ASSERT_GE(n, 0);
    std::vector<float> out, full_out;
    testing::RunBatch(cache, model, kPrompt, kQuestion, BatchKind::kPromptEnd, pool, &out);
    testing::RunBatch(full, model, kPrompt, kQuestion, BatchKind::kPromptEnd, pool, &full_out);
    ASSERT_NO_THROW(cache.CheckInvariants());
    EXPECT_LE(cache.Stats().resident_bytes(), *cache.budget());
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < out.size(); ++i) {
      diff += (out[i] - full_out[i]) * (out[i] - full_out[i]);
      norm += full_out[i] * full_out[i];
    }
    error[recall] = std::sqrt(diff / norm);
    if (recall) EXPECT_GT(cache.Stats().recalls, 0);
  }
  EXPECT_LT(error[1], 0.05);
  EXPECT_GT(error[0], 4.0 * error[1]);
}

// A later prompt reads every cold window of each layer in turn (recall_rank=scan): while a layer
// scans and attends, the next layer's cold windows are asked of the kernel (cold_prefetch), all
// of them and only them, and the last layer asks for nothing. The advice changes no result.
TEST(ColdTier, AQuestionAsksTheKernelForTheNextLayersColdWindows) {
  std::vector<float> outputs[2];
  for (const bool prefetch : {true, false}) {
    SCOPED_TRACE(prefetch ? "next-layer" : "off");
    Fixture f;
    f.geo = testing::SmallGeometry(3, 4, 2, 32, 4096);
    f.config.cold_prefetch = prefetch;
    std::unique_ptr<KvCache> owned;
    TieredCache& cache = f.Make(owned);
    testing::SyntheticModel model(f.geo, 7, 1.0f);
    ThreadPool pool(2);
    cache.BeginRun(kPrompt, 8);
    testing::RunBatch(cache, model, 0, kPrompt, BatchKind::kPromptEnd, pool);
    const KvStats after_prompt = cache.Stats();
    ASSERT_GT(after_prompt.cold_windows, 0);
    EXPECT_EQ(after_prompt.cold_prefetch_bytes, 0);  // the document's own prompt scans nothing
    // A window's slot on disk: its fp16 keys and values, and their checksum.
    const int64_t block = 2 * int64_t{f.geo.n_kv_heads} * f.config.window * f.geo.head_dim * 2 +
                          DiskColdStore::kChecksumBytes;
    std::vector<int64_t> cold_in_layer(f.geo.n_layers);
    for (int layer = 0; layer < f.geo.n_layers; ++layer) {
      for (const WindowInfo& w : cache.View(layer).windows) cold_in_layer[layer] += w.tier == Tier::kCold;
      ASSERT_GT(cold_in_layer[layer], 0);
    }
    cache.ContinueRun(kQuestion, 8);
    int64_t asked = after_prompt.cold_prefetch_bytes;
    testing::RunBatch(cache, model, kPrompt, kQuestion, BatchKind::kPromptEnd, pool, &outputs[prefetch],
                      [&](int layer) {
                        const int64_t now = cache.Stats().cold_prefetch_bytes;
                        const bool last = layer + 1 == f.geo.n_layers;
                        EXPECT_EQ(now - asked, prefetch && !last ? cold_in_layer[layer + 1] * block : 0)
                            << "after layer " << layer;
                        asked = now;
                      });
    ASSERT_NO_THROW(cache.CheckInvariants());
  }
  EXPECT_EQ(outputs[0], outputs[1]);
}

// Digest groups (--kv-cold-digest-group G): G consecutive windows share one digest, built from
// their exact keys as one window of G W tokens; the cold tier's RAM per window falls by about
// (G - 1) / G of a digest, which goes to the band; a prompt cache rebuilds the same digests.
TEST(ColdTier, DigestGroupsShareOneDigestBuiltFromTheGroupsExactKeys) {
  KvStats stats[2];
  for (const int group : {1, 4}) {
    SCOPED_TRACE("group " + std::to_string(group));
    Fixture f;
    f.config.cold_digest_group = group;
    std::unique_ptr<KvCache> owned, loaded_owned;
    TieredCache& cache = f.Make(owned);
    FullCache full(f.geo, f.rope);
    testing::SyntheticModel model(f.geo, 7, 1.0f);
    ThreadPool pool(2);
    ReadDocument(cache, full, model, pool, 16);
    ASSERT_NO_THROW(cache.CheckInvariants());
    stats[group > 1] = cache.Stats();
    ASSERT_FALSE(stats[group > 1].infeasible) << stats[group > 1].note;
    ASSERT_GT(stats[group > 1].cold_windows, 0);
    EXPECT_LE(stats[group > 1].resident_bytes(), *cache.budget());
    if (group == 1) continue;
    // Every cold window's digest is its group's, from the group's exact keys.
    const WindowTable& table = cache.table_for_testing();
    const int hd = f.geo.head_dim, n_kv = f.geo.n_kv_heads, W = f.config.window;
    const DigestGeometry dg{n_kv, hd, W};
    int64_t checked = 0;
    for (int layer = 0; layer < f.geo.n_layers; ++layer) {
      const LayerWindows& l = table.layer(layer);
      std::vector<float> fk, fv;
      std::vector<int32_t> fpos;
      full.DenseLayer(layer, &fk, &fv, &fpos);
      for (size_t k = 0; k < l.cold.size(); ++k) {
        const int64_t g = l.cold[k].index / group;
        std::vector<std::vector<float>> blocks;
        for (int64_t i = g * group; i < (g + 1) * group; ++i) {
          std::vector<float> b(static_cast<size_t>(n_kv) * W * hd);
          const int64_t first = f.config.sinks + i * W;
          for (int h = 0; h < n_kv; ++h) {
            for (int t = 0; t < W; ++t) {
              for (int c = 0; c < hd; ++c) {
                b[(static_cast<size_t>(h) * W + t) * hd + c] = fk[(first + t) * n_kv * hd + h * hd + c];
              }
            }
          }
          blocks.push_back(std::move(b));
        }
        std::vector<const float*> ptrs;
        for (const auto& b : blocks) ptrs.push_back(b.data());
        std::vector<uint8_t> want(static_cast<size_t>(table.digest_bytes()));
        WindowDigest::BuildIntoFromWindows(f.config.cold_digest, dg, ptrs, want.data(),
                                           l.has_digest_context ? &l.digest_context : nullptr);
        const uint8_t* got = table.Digest(l, k);
        ASSERT_EQ(std::vector<uint8_t>(got, got + table.digest_bytes()), want)
            << "layer " << layer << ", cold window " << l.cold[k].index;
        ++checked;
      }
    }
    EXPECT_GT(checked, 0);
    // A prompt cache gives the loaded cache the same digests.
    ByteWriter out;
    cache.SaveState(out);
    TieredCache& loaded = f.Make(loaded_owned);
    ByteReader in(out.bytes(), "saved cache");
    loaded.LoadState(in);
    ASSERT_NO_THROW(loaded.CheckInvariants());
    for (int layer = 0; layer < f.geo.n_layers; ++layer) {
      const LayerWindows& a = table.layer(layer);
      const WindowTable& loaded_table = loaded.table_for_testing();
      const LayerWindows& b = loaded_table.layer(layer);
      ASSERT_EQ(a.cold.size(), b.cold.size());
      for (size_t k = 0; k < a.cold.size(); ++k) {
        const uint8_t* da = table.Digest(a, k);
        const uint8_t* db = loaded_table.Digest(b, k);
        EXPECT_EQ(std::vector<uint8_t>(da, da + table.digest_bytes()),
                  std::vector<uint8_t>(db, db + table.digest_bytes()));
      }
    }
    // Decoding goes on within the budget, recalling by the group digests.
    model.query_override = [&](int, int32_t pos, float* q) {
      if (pos < kPrompt) return;
      for (int i = 0; i < f.geo.n_heads * hd; ++i) q[i] *= 3.0f;
    };
    for (int i = 0; i < 16; ++i) {
      testing::RunBatch(cache, model, kPrompt + i, 1, BatchKind::kGenerated, pool);
      ASSERT_NO_THROW(cache.CheckInvariants());
      ASSERT_LE(cache.Stats().resident_bytes(), *cache.budget());
    }
  }
  // The digests' RAM per cold window: a quarter of a digest and its mask, the records as before.
  const double per_window[2] = {
      static_cast<double>(stats[0].cold_ram_bytes) / static_cast<double>(stats[0].cold_windows),
      static_cast<double>(stats[1].cold_ram_bytes) / static_cast<double>(stats[1].cold_windows)};
  EXPECT_LT(per_window[1], per_window[0]);
}

TEST(ColdTier, DigestGroupsNeedADigestThatDoesNotGrowWithTheWindow) {
  Fixture f;
  f.config.cold_digest_group = 4;
  f.config.cold_digest = DigestKind::kSignSketch;
  std::unique_ptr<KvCache> owned;
  try {
    f.Make(owned);
    FAIL() << "sign-sketch in groups of 4 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-cold-digest-group 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sign-sketch"), std::string::npos) << e.what();
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

// A prompt cache saves the cold tier's counters: a cache loaded from it reports the run's
// windows, bytes and I/O (written, read, read to score) and recalls as the saved cache did, and
// saving it again gives the same bytes.
TEST(ColdTier, APromptCacheKeepsTheColdTiersCounters) {
  Fixture f;
  std::unique_ptr<KvCache> owned, loaded_owned;
  TieredCache& cache = f.Make(owned);
  testing::SyntheticModel model(f.geo, 7, 1.0f);
  model.query_override = [&](int, int32_t pos, float* q) {
    if (pos < kPrompt) return;
    for (int i = 0; i < f.geo.n_heads * f.geo.head_dim; ++i) q[i] *= 3.0f;
  };
  ThreadPool pool(1);
  cache.BeginRun(kPrompt, 8);
  testing::RunBatch(cache, model, 0, kPrompt, BatchKind::kPromptEnd, pool);
  cache.ContinueRun(kQuestion, 8);
  testing::RunBatch(cache, model, kPrompt, kQuestion, BatchKind::kPromptEnd, pool);
  const KvStats before = cache.Stats();
  ASSERT_GT(before.recalls, 0);
  ASSERT_GT(before.cold_score_read_bytes, 0);
  ASSERT_GT(before.cold_read_bytes, before.cold_score_read_bytes);
  ASSERT_GT(before.cold_written_bytes, 0);
  ByteWriter out;
  cache.SaveState(out);
  TieredCache& loaded = f.Make(loaded_owned);
  ByteReader in(out.bytes(), "saved cache");
  loaded.LoadState(in);
  const KvStats after = loaded.Stats();
  EXPECT_EQ(after.cold_windows, before.cold_windows);
  EXPECT_EQ(after.cold_ram_bytes, before.cold_ram_bytes);
  EXPECT_EQ(after.cold_bytes, before.cold_bytes);
  EXPECT_EQ(after.cold_written_bytes, before.cold_written_bytes);
  EXPECT_EQ(after.cold_read_bytes, before.cold_read_bytes);
  EXPECT_EQ(after.cold_score_read_bytes, before.cold_score_read_bytes);
  EXPECT_EQ(after.recalls, before.recalls);
  ByteWriter again;
  loaded.SaveState(again);
  EXPECT_EQ(again.bytes(), out.bytes());
}

// ---- faults: each one ends the run with a ColdStoreError naming the file and the way out, from
// inside the parallel routing step (two threads, so a worker may meet it), and leaves the cache
// dead (every later call rethrows it) but safe to destroy; another cache goes on unharmed.

// The ColdStoreError `f` throws; fails the test when it throws none or another error.
template <class F>
ColdStoreError ColdFaultOf(F&& f) {
  try {
    f();
  } catch (const ColdStoreError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a ColdStoreError: " << e.what();
    return ColdStoreError(ColdStoreError::Kind::kUnavailable, "");
  }
  ADD_FAILURE() << "no cold-store fault";
  return ColdStoreError(ColdStoreError::Kind::kUnavailable, "");
}

void ExpectMentions(const std::string& message, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

// After a fault: the cache refuses to go on with the same error, and another cache (its own
// file) runs the whole document and a question without one.
void ExpectDeadAndOthersGoOn(TieredCache& cache, testing::SyntheticModel& model, ThreadPool& pool,
                             const std::string& fault) {
  EXPECT_EQ(ColdFaultOf([&] { cache.ContinueRun(kQuestion, 8); }).what(), fault);
  EXPECT_EQ(ColdFaultOf([&] { cache.BeginRun(kPrompt, 8); }).what(), fault);
  ByteWriter out;
  EXPECT_EQ(ColdFaultOf([&] { cache.SaveState(out); }).what(), fault);
  Fixture other;
  std::unique_ptr<KvCache> owned;
  TieredCache& fresh = other.Make(owned);
  fresh.BeginRun(kPrompt, 8);
  testing::RunBatch(fresh, model, 0, kPrompt, BatchKind::kPromptEnd, pool);
  fresh.ContinueRun(kQuestion, 8);
  testing::RunBatch(fresh, model, kPrompt, kQuestion, BatchKind::kPromptEnd, pool);
  EXPECT_NO_THROW(fresh.CheckInvariants());
  EXPECT_GT(fresh.Stats().cold_windows, 0);
}

// Runs the document into a cache with a cold tier (two threads): its windows go cold.
struct ColdRun {
  Fixture f;
  std::unique_ptr<KvCache> owned;
  TieredCache* cache = nullptr;
  testing::SyntheticModel model{f.geo, 7, 1.0f};
  ThreadPool pool{2};
  std::string dir;  // the cold file's directory (the store's path up to its name)
  explicit ColdRun(bool run_document = true, int64_t disk_limit = -1) {
    f.config.cold_disk_limit = disk_limit;
    cache = &f.Make(owned);
    const std::string& path = cache->cold_store_for_testing()->path();
    dir = path.substr(0, path.rfind('/'));
    if (run_document) Document();
  }
  void Document() {
    cache->BeginRun(kPrompt, 8);
    testing::RunBatch(*cache, model, 0, kPrompt, BatchKind::kPromptEnd, pool);
    ASSERT_GT(cache->Stats().cold_windows, 0);
  }
  void Question() {
    cache->ContinueRun(kQuestion, 8);
    testing::RunBatch(*cache, model, kPrompt, kQuestion, BatchKind::kPromptEnd, pool);
  }
  // What a window takes in the cold file: its fp16 block and its checksum.
  int64_t slot_bytes() const {
    return WindowStore::FpBlockBytes(f.config, f.geo) + DiskColdStore::kChecksumBytes;
  }
};

TEST(ColdTier, AFullDiskAtEvictionEndsTheRunWithAnErrorNamingTheDirectory) {
  ColdRun run(/*run_document=*/false);
  // The disk fills after two blocks: the kernel's ENOSPC on the third write.
  int writes = 0;
  run.cache->cold_store_for_testing()->set_write_call_for_testing(
      [&](int fd, const void* buf, size_t n, off_t off) -> ssize_t {
        if (++writes <= 2) return pwrite(fd, buf, n, off);
        errno = ENOSPC;
        return -1;
      });
  run.cache->BeginRun(kPrompt, 8);
  const ColdStoreError e = ColdFaultOf([&] {
    testing::RunBatch(*run.cache, run.model, 0, kPrompt, BatchKind::kPromptEnd, run.pool);
  });
  EXPECT_EQ(e.kind(), ColdStoreError::Kind::kNoRoom);
  ExpectMentions(
      e.what(), {run.cache->cold_store_for_testing()->path() + " (unlinked)",
                 "No space left on device", "free space in " + run.dir + " or pass --kv-cold-dir"});
  ExpectDeadAndOthersGoOn(*run.cache, run.model, run.pool, e.what());
}

TEST(ColdTier, TheDiskLimitReachedAtEvictionEndsTheRunNamingTheLimit) {
  Fixture probe;
  const int64_t slot =
      WindowStore::FpBlockBytes(probe.config, probe.geo) + DiskColdStore::kChecksumBytes;
  ColdRun run(/*run_document=*/false, /*disk_limit=*/3 * slot);  // the document needs more
  run.cache->BeginRun(kPrompt, 8);
  const ColdStoreError e = ColdFaultOf([&] {
    testing::RunBatch(*run.cache, run.model, 0, kPrompt, BatchKind::kPromptEnd, run.pool);
  });
  EXPECT_EQ(e.kind(), ColdStoreError::Kind::kNoRoom);
  ExpectMentions(e.what(), {run.cache->cold_store_for_testing()->path() + " (unlinked)",
                            "disk limit", "3 windows", "raise --kv-cold-disk-limit"});
  EXPECT_LE(run.cache->cold_store_for_testing()->live_bytes(), 3 * slot);
  ExpectDeadAndOthersGoOn(*run.cache, run.model, run.pool, e.what());
}

TEST(ColdTier, ACorruptedBlockIsAnErrorAtRecall) {
  ColdRun run;
  // Another process (or a failing disk) flips a byte in every block, through the file's /proc
  // name (the file itself is unlinked): whichever block recall reads first fails its checksum.
  const std::string proc = "/proc/self/fd/" + std::to_string(run.cache->cold_fd_for_testing());
  const int fd = open(proc.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  for (off_t at = 100; at < st.st_size; at += run.slot_bytes()) {
    uint8_t byte = 0;
    ASSERT_EQ(pread(fd, &byte, 1, at), 1);
    byte ^= 0x40;
    ASSERT_EQ(pwrite(fd, &byte, 1, at), 1);
  }
  close(fd);
  const ColdStoreError e = ColdFaultOf([&] { run.Question(); });
  EXPECT_EQ(e.kind(), ColdStoreError::Kind::kDamaged);
  ExpectMentions(e.what(), {"checksum mismatch", " (unlinked), slot ", "the window is lost",
                            "check the disk holding " + run.dir});
  ExpectDeadAndOthersGoOn(*run.cache, run.model, run.pool, e.what());
}

TEST(ColdTier, ATruncatedColdFileIsAnErrorAtRecall) {
  ColdRun run;
  ASSERT_EQ(ftruncate(run.cache->cold_fd_for_testing(), 0), 0);  // as another process could
  const ColdStoreError e = ColdFaultOf([&] { run.Question(); });
  EXPECT_EQ(e.kind(), ColdStoreError::Kind::kDamaged);
  ExpectMentions(e.what(), {run.cache->cold_store_for_testing()->path() + " (unlinked)",
                            "truncated from outside qevict", "leave the files in " + run.dir});
  ExpectDeadAndOthersGoOn(*run.cache, run.model, run.pool, e.what());
}

TEST(ColdTier, AReadErrorIsAnErrorAtRecall) {
  ColdRun run;
  // The kernel refuses the read (the descriptor replaced by a write-only one: EBADF), as it
  // would with EIO from a failing disk.
  const int write_only = open("/dev/null", O_WRONLY);
  ASSERT_GE(write_only, 0);
  ASSERT_GE(dup2(write_only, run.cache->cold_fd_for_testing()), 0);
  close(write_only);
  const ColdStoreError e = ColdFaultOf([&] { run.Question(); });
  EXPECT_EQ(e.kind(), ColdStoreError::Kind::kIo);
  ExpectMentions(e.what(),
                 {"cannot read", " (unlinked), slot ", "Bad file descriptor", "--kv-cold-dir"});
  ExpectDeadAndOthersGoOn(*run.cache, run.model, run.pool, e.what());
}

TEST(ColdTier, AnUnwritableDirectoryIsAnErrorNamingIt) {
  Fixture f;
  f.config.cold_store_dir = "/nonexistent-qevict-cold-dir";
  std::unique_ptr<KvCache> owned;
  const ColdStoreError e = ColdFaultOf([&] { f.Make(owned); });
  EXPECT_EQ(e.kind(), ColdStoreError::Kind::kUnavailable);
  ExpectMentions(e.what(), {"'/nonexistent-qevict-cold-dir'", "pass --kv-cold-dir"});
}

}  // namespace
}  // namespace qevict
