// The recall-oracle diagnostic (kv/quest_cache.h, PageRanking::kExactMass): bit-identical to
// the full cache at budget 1.0; with a budget, each KV head of every layer attends its sinks,
// recent windows and the windows of largest exact softmax mass (checked on constructed keys
// and against a brute-force mass), within the budget's tokens; the run's first prompt attends
// everything while later prompts select; forks and restored states continue as the cache does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "kv/full_cache.h"
#include "kv/kv_test_util.h"
#include "kv/page_mass.h"
#include "kv/quest_cache.h"
#include "policy/registry.h"

namespace qevict {
namespace {

using testing::RunBatch;
using testing::SmallGeometry;
using testing::SyntheticModel;
using testing::TestRopeConfig;

KvConfig OracleConfig(double budget, int later_prompts = 1) {
  KvConfig c;
  c.policy = "recall-oracle";
  c.budget = budget;
  c.set_option("oracle_decode_only", later_prompts == 1 ? 0 : 1);
  return c;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> LayerSlice(const std::vector<float>& out, const KvGeometry& g, int layer,
                              int n) {
  const size_t size = static_cast<size_t>(n) * g.n_heads * g.head_dim;
  return {out.begin() + layer * size, out.begin() + (layer + 1) * size};
}

// A conversation's batches: a first prompt (chunks of `chunk`), `generate` tokens, a second
// prompt of `later` tokens in one batch, `generate` more tokens. Every batch's outputs.
std::vector<std::vector<float>> Conversation(KvCache& cache, const SyntheticModel& model,
                                             int prompt, int chunk, int later, int generate,
                                             ThreadPool& pool) {
  cache.BeginRun(prompt, generate);
  std::vector<std::vector<float>> outs;
  int32_t p = 0;
  while (p < prompt) {
    const int n = std::min(chunk, prompt - p);
    outs.emplace_back();
    RunBatch(cache, model, p, n, p + n == prompt ? BatchKind::kPromptEnd : BatchKind::kPromptChunk,
             pool, &outs.back());
    p += n;
  }
  for (int turn = 0; turn < 2; ++turn) {
    if (turn == 1) {
      cache.ContinueRun(later, generate);
      outs.emplace_back();
      RunBatch(cache, model, p, later, BatchKind::kPromptEnd, pool, &outs.back());
      p += later;
    }
    for (int i = 0; i < generate; ++i, ++p) {
      outs.emplace_back();
      RunBatch(cache, model, p, 1, BatchKind::kGenerated, pool, &outs.back());
    }
  }
  return outs;
}

TEST(RecallOraclePolicyTest, BudgetOneIsBitIdenticalToTheFullCache) {
  const KvGeometry g = SmallGeometry(3, 6, 2, 32, 512);
  const Rope rope(TestRopeConfig(32), 512);
  const SyntheticModel model(g, 7, 2.0f);
  ThreadPool pool(2);
  auto full = std::make_unique<FullCache>(g, rope);
  auto oracle = CreateKvCache(OracleConfig(1.0), g, rope);
  const auto want = Conversation(*full, model, 300, 64, 24, 10, pool);
  const auto got = Conversation(*oracle, model, 300, 64, 24, 10, pool);
  ASSERT_EQ(want.size(), got.size());
  for (size_t b = 0; b < want.size(); ++b) EXPECT_TRUE(SameBits(want[b], got[b])) << "batch " << b;
  const KvStats s = oracle->Stats();
  // A diagnostic that saves nothing: the full cache's bytes, no page bounds or digests.
  EXPECT_EQ(s.fp16_bytes, full->Stats().fp16_bytes);
  EXPECT_EQ(s.meta_bytes, 0);
  EXPECT_EQ(s.resident_bytes(), full->Stats().resident_bytes());
  EXPECT_EQ(s.mean_attended_bytes, s.mean_visible_bytes);
}

// Rotates x back from position pos (the inverse of Rope::Apply, adjacent pairs).
void UnRope(const Rope& rope, float* x, int64_t pos) {
  const int half = rope.config().rot_dims / 2;
  std::vector<float> cs(half), sn(half);
  rope.Row(pos, cs.data(), sn.data());
  for (int i = 0; i < half; ++i) {
    const float c = cs[i], s = sn[i];
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * c + b * s;
    x[2 * i + 1] = -a * s + b * c;
  }
}

TEST(RecallOraclePolicyTest, AttendsTheWindowHoldingTheKeysTheQueryPointsAt) {
  const int hd = 32, prompt = 500;
  const KvGeometry g = SmallGeometry(2, 4, 2, hd, 1024);
  const Rope rope(TestRopeConfig(hd), 1024);
  ThreadPool pool(1);
  // 100 tokens: 5 sinks, 39 in the recent windows (tokens 461-499), 7 windows of 8.
  KvConfig config = OracleConfig(0.2);
  auto owned = CreateKvCache(config, g, rope);
  auto& cache = dynamic_cast<QuestCache&>(*owned);
  cache.BeginRun(prompt, 0);
  // u: a unit direction after RoPE. The 8 tokens of window 40 (tokens 325-332: windows start
  // after the 5 sinks) have key 4u after RoPE, those of window 3 (far off, tokens 29-36) -4u,
  // every other key small noise.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> u(hd);
  float norm = 0.0f;
  for (float& x : u) {
    x = normal(rng);
    norm += x * x;
  }
  for (float& x : u) x /= std::sqrt(norm);
  const int64_t target = 5 + 40 * 8, far = 5 + 3 * 8;
  std::vector<float> k(int64_t{prompt} * g.n_kv_heads * hd), v(k.size()), q(k.size() * 2);
  std::vector<int32_t> pos(prompt);
  for (int t = 0; t < prompt; ++t) {
    pos[t] = t;
    for (int h = 0; h < g.n_kv_heads; ++h) {
      float* key = k.data() + (int64_t{t} * g.n_kv_heads + h) * hd;
      const float sign = t >= target && t < target + 8 ? 4.0f : t >= far && t < far + 8 ? -4.0f : 0;
      for (int c = 0; c < hd; ++c) key[c] = sign != 0 ? sign * u[c] : 0.3f * normal(rng);
      if (sign != 0) UnRope(rope, key, t);
    }
  }
  for (float& x : v) x = normal(rng);
  for (float& x : q) x = normal(rng);
  cache.BeginBatch(BatchKind::kPromptEnd);
  std::vector<float> out(q.size());
  for (int layer = 0; layer < g.n_layers; ++layer) {
    cache.Store(layer, prompt, pos.data(), k.data(), v.data());
    cache.Attend(layer, prompt, pos.data(), q.data(), out.data(), pool);
  }
  cache.EndBatch(BatchKind::kPromptEnd, pool);
  ASSERT_GE(cache.budget_tokens(), 99);

  cache.BeginBatch(BatchKind::kGenerated);
  std::vector<float> q_group(2 * hd);
  for (int gq = 0; gq < 2; ++gq) {
    for (int c = 0; c < hd; ++c) q_group[gq * hd + c] = 8.0f * u[c];
  }
  for (int layer = 0; layer < g.n_layers; ++layer) {
    for (int h = 0; h < g.n_kv_heads; ++h) {
      const std::vector<TokenRange> ranges = cache.AttendedRanges(layer, h, q_group.data(), prompt);
      std::vector<bool> attended(prompt, false);
      for (const TokenRange& r : ranges) {
        for (int64_t t = r.begin; t < r.end; ++t) attended[t] = true;
      }
      EXPECT_LE(RangeTokens(ranges), cache.budget_tokens());
      EXPECT_EQ(RangeTokens(ranges), 5 + 39 + 7 * 8);
      for (int64_t t = target; t < target + 8; ++t) EXPECT_TRUE(attended[t]) << t;
      for (int64_t t = far; t < far + 8; ++t) EXPECT_FALSE(attended[t]) << t;
      for (int64_t t = 0; t < 5; ++t) EXPECT_TRUE(attended[t]) << "sink " << t;
      for (int64_t t = prompt - 32; t < prompt; ++t) EXPECT_TRUE(attended[t]) << "recent " << t;
    }
  }
}

// Whole windows after the sinks: a window is attended entirely or not at all, the recent region
// is the windows holding the last `recent` tokens and the one being filled.
TEST(RecallOraclePolicyTest, PagesAreTheTieredCachesWindows) {
  for (int window : {1, 8, 16}) {
    for (int64_t sinks : {0, 5}) {
      for (int64_t recent : {0, 32}) {
        const QuestLayout layout{.page = window, .sinks = sinks, .recent = recent, .windows = true};
        for (int64_t visible = 1; visible < 150; visible += 5) {
          const int64_t first = layout.FirstCandidate(visible), end = layout.EndCandidate(visible);
          const int64_t recent_begin = layout.RecentBegin(visible);
          // Every one of the last `recent` tokens that is no sink is recent.
          EXPECT_LE(recent_begin, std::max(layout.SinkEnd(visible), visible - recent));
          if (recent_begin > sinks) {
            EXPECT_EQ((recent_begin - sinks) % window, 0);
          }
          for (int64_t p = first; p < end; ++p) {
            EXPECT_GE(layout.PageBegin(p), sinks);
            EXPECT_LE(layout.PageBegin(p + 1), recent_begin);  // never clipped
          }
          if (visible > sinks) {
            EXPECT_EQ(layout.PageBegin(end), recent_begin);
          }
          const std::vector<TokenRange> none = layout.Ranges(visible, {});
          EXPECT_EQ(RangeTokens(none), std::min(sinks, visible) + visible - recent_begin);
        }
      }
    }
  }
}

TEST(RecallOraclePolicyTest, LaterPromptsSelectWhileTheFirstPromptAttendsEverything) {
  const KvGeometry g = SmallGeometry(3, 6, 2, 32, 512);
  const Rope rope(TestRopeConfig(32), 512);
  const SyntheticModel model(g, 11, 2.0f);
  ThreadPool pool(2);
  const int prompt = 320, chunk = 80, later = 20, generate = 4;
  const int first_batches = prompt / chunk, later_batch = first_batches + generate;
  auto full = std::make_unique<FullCache>(g, rope);
  const auto want = Conversation(*full, model, prompt, chunk, later, generate, pool);
  for (const int later_prompts : {1, 0}) {
    auto oracle = CreateKvCache(OracleConfig(0.3, later_prompts), g, rope);
    const auto got = Conversation(*oracle, model, prompt, chunk, later, generate, pool);
    ASSERT_EQ(want.size(), got.size());
    for (size_t b = 0; b < want.size(); ++b) {
      const bool first_prompt = b < first_batches;
      const bool later_prompt = b == later_batch;
      const int n = first_prompt ? chunk : later_prompt ? later : 1;
      for (int layer = 0; layer < g.n_layers; ++layer) {  // every layer selects
        const bool same =
            SameBits(LayerSlice(want[b], g, layer, n), LayerSlice(got[b], g, layer, n));
        const bool selects = !first_prompt && (!later_prompt || later_prompts == 1);
        EXPECT_EQ(same, !selects) << "later_prompts " << later_prompts << " batch " << b
                                  << " layer " << layer;
      }
    }
    const KvStats s = oracle->Stats();
    EXPECT_NE(s.note.find("diagnostic"), std::string::npos) << s.note;
    EXPECT_FALSE(s.infeasible);
  }
}

// Every selecting query and KV head attends at most the budget's tokens, and its windows are
// the top ones by the exact softmax mass (summed over the group's query heads), by brute force.
TEST(RecallOraclePolicyTest, AttendsTheTopWindowsByExactMassWithinItsTokens) {
  const int prompt = 600, window = 8, hd = 32;
  const KvGeometry g = SmallGeometry(2, 6, 2, hd, 1024);
  const Rope rope(TestRopeConfig(hd), 1024);
  const SyntheticModel model(g, 21, 3.0f);
  ThreadPool pool(2);
  auto owned = CreateKvCache(OracleConfig(0.12), g, rope);
  auto& cache = dynamic_cast<QuestCache&>(*owned);
  cache.BeginRun(prompt, 6);
  RunBatch(cache, model, 0, prompt, BatchKind::kPromptEnd, pool);
  ASSERT_EQ(cache.budget_tokens(), 72);  // 0.12 of 606 tokens
  const int group = g.n_heads / g.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> keys, values;
  std::vector<int32_t> positions;
  int checked = 0;
  for (int32_t p = prompt; p < prompt + 6; ++p) {
    std::vector<float> out;
    RunBatch(cache, model, p, 1, BatchKind::kGenerated, pool, &out, [&](int layer) {
      const int64_t visible = p + 1;
      const QuestLayout layout{.page = window, .sinks = 5, .recent = 32, .windows = true};
      cache.DenseLayer(layer, &keys, &values, &positions);
      std::vector<float> q(g.n_heads * hd), k(g.n_kv_heads * hd), v(k.size());
      model.Activations(layer, p, q.data(), k.data(), v.data());
      for (int h = 0; h < g.n_kv_heads; ++h) {
        const float* qg = q.data() + h * group * hd;
        const std::vector<TokenRange> ranges = cache.AttendedRanges(layer, h, qg, visible);
        EXPECT_LE(RangeTokens(ranges), cache.budget_tokens());
        std::vector<bool> attended(visible, false);
        for (const TokenRange& r : ranges) {
          for (int64_t t = r.begin; t < r.end; ++t) attended[t] = true;
        }
        const int64_t first = layout.FirstCandidate(visible), end = layout.EndCandidate(visible);
        std::vector<double> mass(end - first, 0.0);
        for (int gq = 0; gq < group; ++gq) {
          std::vector<double> s(visible);
          double max_s = -INFINITY, total = 0.0;
          for (int64_t t = 0; t < visible; ++t) {
            double dot = 0.0;
            for (int c = 0; c < hd; ++c) {
              dot += double{qg[gq * hd + c]} * keys[(t * g.n_kv_heads + h) * hd + c];
            }
            max_s = std::max(max_s, s[t] = dot * scale);
          }
          for (double& x : s) total += (x = std::exp(x - max_s));
          for (int64_t w = first; w < end; ++w) {
            for (int64_t t = layout.PageBegin(w); t < layout.PageBegin(w + 1); ++t) {
              mass[w - first] += s[t] / total;
            }
          }
        }
        std::vector<int64_t> order(end - first);
        for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
        std::sort(order.begin(), order.end(),
                  [&](int64_t a, int64_t b) { return mass[a] > mass[b]; });
        const int64_t want_k = layout.PagesForBudget(cache.budget_tokens(), visible);
        ASSERT_GT(want_k, 0);
        const std::set<int64_t> chosen(order.begin(), order.begin() + want_k);
        // Near-ties at the cut may fall either way (float sums against double): not checked.
        const double last_in = mass[order[want_k - 1]];
        const double first_out = want_k < end - first ? mass[order[want_k]] : -1.0;
        const bool tie = last_in - first_out < 1e-5;
        for (int64_t i = 0; i < end - first; ++i) {
          if (tie && (std::abs(mass[i] - last_in) < 1e-5 || std::abs(mass[i] - first_out) < 1e-5)) {
            continue;
          }
          EXPECT_EQ(attended[layout.PageBegin(first + i)], chosen.count(i) == 1)
              << "layer " << layer << " head " << h << " window " << first + i;
          ++checked;
        }
      }
    });
  }
  EXPECT_GT(checked, 6 * 2 * 2 * 60);
  const KvStats s = cache.Stats();
  EXPECT_LE(s.mean_attended_bytes, int64_t{72} * g.n_layers * g.n_kv_heads * 2 * hd * 2);
  EXPECT_LT(s.mean_attended_bytes, s.mean_visible_bytes / 5);
}

TEST(RecallOraclePolicyTest, AForkOfAPrefixAndARestoredStateContinueAsTheCacheItself) {
  const KvGeometry g = SmallGeometry(3, 6, 2, 32, 512);
  const Rope rope(TestRopeConfig(32), 512);
  const SyntheticModel model(g, 31, 2.0f);
  ThreadPool pool(2);
  const KvConfig config = OracleConfig(0.3);
  const int prompt = 320, later = 12, generate = 6;
  auto own = CreateKvCache(config, g, rope);
  const auto want = Conversation(*own, model, prompt, prompt, later, generate, pool);

  KvConfig prefix_config;
  prefix_config.prefill_chunk = 0;
  auto prefix = CreatePrefixCache(prefix_config, g, rope);
  prefix->BeginRun(prompt, generate);
  RunBatch(*prefix, model, 0, prompt, BatchKind::kPromptEnd, pool);
  auto fork = ForkKvCache(*prefix, config, rope, pool);
  ASSERT_EQ(dynamic_cast<QuestCache&>(*fork).policy_name(), "recall-oracle");
  size_t b = 1;
  int32_t p = prompt;
  for (int i = 0; i < generate; ++i, ++p, ++b) {
    std::vector<float> out;
    RunBatch(*fork, model, p, 1, BatchKind::kGenerated, pool, &out);
    EXPECT_TRUE(SameBits(out, want[b])) << "fork, token " << i;
  }
  // A save and a restore into a fresh cache, then the later prompt (it selects: the restored
  // cache knows its first prompt ended) and the rest of the generation.
  ByteWriter saved;
  fork->SaveState(saved);
  auto restored = CreateKvCache(config, g, rope);
  ByteReader in(saved.bytes(), "saved recall-oracle state");
  restored->LoadState(in);
  EXPECT_EQ(in.remaining(), 0u);
  restored->ContinueRun(later, generate);
  std::vector<float> out;
  RunBatch(*restored, model, p, later, BatchKind::kPromptEnd, pool, &out);
  EXPECT_TRUE(SameBits(out, want[b++])) << "restored, later prompt";
  p += later;
  for (int i = 0; i < generate; ++i, ++p, ++b) {
    RunBatch(*restored, model, p, 1, BatchKind::kGenerated, pool, &out);
    EXPECT_TRUE(SameBits(out, want[b])) << "restored, token " << i;
  }
  // A quest state is not a recall-oracle state.
  auto quest_config = config;
  quest_config.policy = "quest";
  auto quest = CreateKvCache(quest_config, g, rope);
  ByteReader again(saved.bytes(), "saved recall-oracle state");
  EXPECT_THROW(quest->LoadState(again), Error);
}

}  // namespace
}  // namespace qevict
