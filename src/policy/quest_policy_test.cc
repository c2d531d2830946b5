// The quest policy (kv/quest_cache.h): bit-identical to the full cache without a budget, in its
// dense layers and while prompts are read; with a budget, each KV head attends exactly its
// sinks, recent tokens and the top pages by the key-bound estimate, checked against brute force
// on synthetic keys; forks of a prefix and restored states continue as the cache itself would.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "kernels/attention.h"
#include "kv/full_cache.h"
#include "kv/kv_test_util.h"
#include "kv/quest_cache.h"
#include "policy/registry.h"

namespace qevict {
namespace {

using testing::RunBatch;
using testing::SmallGeometry;
using testing::SyntheticModel;
using testing::TestRopeConfig;

KvConfig QuestConfig(double budget, int page = 16, int dense_layers = 2) {
  KvConfig c;
  c.policy = "quest";
  c.budget = budget;
  c.set_option("quest_page", page);
  c.set_option("quest_dense_layers", dense_layers);
  return c;
}

// Every batch's attention outputs of a prompt (chunks of `chunk`) and `generate` tokens.
std::vector<std::vector<float>> Outputs(KvCache& cache, const SyntheticModel& model, int prompt,
                                        int chunk, int generate, ThreadPool& pool) {
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
  for (int i = 0; i < generate; ++i, ++p) {
    outs.emplace_back();
    RunBatch(cache, model, p, 1, BatchKind::kGenerated, pool, &outs.back());
  }
  return outs;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The slice of one layer's outputs in RunBatch's [n_layers][n][n_heads][head_dim] layout.
std::vector<float> LayerSlice(const std::vector<float>& out, const KvGeometry& g, int layer,
                              int n) {
  const size_t size = static_cast<size_t>(n) * g.n_heads * g.head_dim;
  return {out.begin() + layer * size, out.begin() + (layer + 1) * size};
}

TEST(QuestPolicyTest, BudgetOneIsBitIdenticalToTheFullCache) {
  const KvGeometry g = SmallGeometry(3, 6, 2, 32, 512);
  const Rope rope(TestRopeConfig(32), 512);
  const SyntheticModel model(g, 7, 2.0f);
  ThreadPool pool(2);
  KvConfig full_config;
  full_config.policy = "full";
  auto full = CreateKvCache(full_config, g, rope);
  auto quest = CreateKvCache(QuestConfig(1.0), g, rope);
  const auto want = Outputs(*full, model, 300, 64, 40, pool);
  const auto got = Outputs(*quest, model, 300, 64, 40, pool);
  ASSERT_EQ(want.size(), got.size());
  for (size_t b = 0; b < want.size(); ++b) EXPECT_TRUE(SameBits(want[b], got[b])) << "batch " << b;
  const KvStats s = quest->Stats();
  EXPECT_EQ(s.fp16_bytes, full->Stats().fp16_bytes);
  EXPECT_GT(s.meta_bytes, 0);  // the page bounds, reported
  EXPECT_EQ(s.resident_bytes(), s.fp16_bytes + s.meta_bytes);
  EXPECT_EQ(s.mean_attended_bytes, s.mean_visible_bytes);  // everything attended
  EXPECT_EQ(s.budget_bytes, -1);
}

TEST(QuestPolicyTest, PromptsAndDenseLayersAttendEverythingAtASmallBudget) {
  const KvGeometry g = SmallGeometry(4, 6, 2, 32, 512);
  const Rope rope(TestRopeConfig(32), 512);
  const SyntheticModel model(g, 11, 2.0f);
  ThreadPool pool(2);
  auto full = std::make_unique<FullCache>(g, rope);
  auto quest = CreateKvCache(QuestConfig(0.1, 8, 2), g, rope);
  const auto want = Outputs(*full, model, 400, 50, 12, pool);
  const auto got = Outputs(*quest, model, 400, 50, 12, pool);
  const int prompt_batches = 8;
  for (size_t b = 0; b < want.size(); ++b) {
    const bool prompt = b < prompt_batches;
    const int n = prompt ? 50 : 1;
    for (int layer = 0; layer < g.n_layers; ++layer) {
      const bool same = SameBits(LayerSlice(want[b], g, layer, n), LayerSlice(got[b], g, layer, n));
      if (prompt || layer < 2) {
        EXPECT_TRUE(same) << "batch " << b << " layer " << layer;
      } else {
        EXPECT_FALSE(same) << "batch " << b << " layer " << layer << " attended everything";
      }
    }
  }
  const KvStats s = quest->Stats();
  // Two dense layers of four read everything, the other two about a tenth.
  EXPECT_GT(s.mean_attended_bytes, s.mean_visible_bytes / 2);
  EXPECT_LT(s.mean_attended_bytes, s.mean_visible_bytes * 6 / 10);
  EXPECT_FALSE(s.note.empty());
  EXPECT_FALSE(s.infeasible);
}

// A page's per-channel key min and max from the stored keys, by brute force.
struct BruteBounds {
  std::vector<double> kmin, kmax;  // [head_dim]
};

BruteBounds PageBoundsBruteForce(const QuestCache& cache, int layer, int head, int64_t begin,
                                 int64_t end) {
  std::vector<float> keys, values;
  std::vector<int32_t> positions;
  cache.DenseLayer(layer, &keys, &values, &positions);
  const KvGeometry& g = cache.geometry();
  BruteBounds b;
  b.kmin.assign(g.head_dim, INFINITY);
  b.kmax.assign(g.head_dim, -INFINITY);
  for (int64_t t = begin; t < end; ++t) {
    const float* k = keys.data() + (t * g.n_kv_heads + head) * g.head_dim;
    for (int c = 0; c < g.head_dim; ++c) {
      b.kmin[c] = std::min<double>(b.kmin[c], k[c]);
      b.kmax[c] = std::max<double>(b.kmax[c], k[c]);
    }
  }
  return b;
}

TEST(QuestPolicyTest, APageBoundIsAtLeastEveryScoreInThePage) {
  const KvGeometry g = SmallGeometry(2, 4, 2, 32, 512);
  const Rope rope(TestRopeConfig(32), 512);
  const SyntheticModel model(g, 3, 1.0f);
  ThreadPool pool(1);
  QuestSettings settings;
  settings.page = 16;
  QuestCache cache(settings, g, rope);
  cache.BeginRun(200, 0);
  RunBatch(cache, model, 0, 200, BatchKind::kPromptEnd, pool);
  std::vector<float> keys, values;
  std::vector<int32_t> positions;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> q(g.head_dim), kmin(g.head_dim), kmax(g.head_dim);
  int checked = 0;
  for (int layer = 0; layer < g.n_layers; ++layer) {
    cache.DenseLayer(layer, &keys, &values, &positions);
    ASSERT_EQ(cache.n_pages(layer), 13);  // 12 full pages and a partial one of 8 tokens
    for (int h = 0; h < g.n_kv_heads; ++h) {
      for (int64_t p = 0; p < cache.n_pages(layer); ++p) {
        cache.PageBounds(layer, h, p, kmin.data(), kmax.data());
        const int64_t end = std::min<int64_t>(200, (p + 1) * 16);
        const BruteBounds brute = PageBoundsBruteForce(cache, layer, h, p * 16, end);
        for (int c = 0; c < g.head_dim; ++c) {
          ASSERT_EQ(kmin[c], brute.kmin[c]);  // exact: min and max of fp16 keys
          ASSERT_EQ(kmax[c], brute.kmax[c]);
        }
        for (int trial = 0; trial < 20; ++trial) {
          for (float& x : q) x = normal(rng);
          const double bound = PageUpperBound(q.data(), kmin.data(), kmax.data(), g.head_dim);
          for (int64_t t = p * 16; t < end; ++t) {
            const float* k = keys.data() + (t * g.n_kv_heads + h) * g.head_dim;
            double dot = 0.0, magnitude = 0.0;
            for (int c = 0; c < g.head_dim; ++c) {
              dot += static_cast<double>(q[c]) * k[c];
              magnitude += std::abs(static_cast<double>(q[c]) * k[c]);
            }
            ASSERT_GE(bound, dot - 1e-5 * magnitude) << "page " << p << " token " << t;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * 2 * 20 * 200);
}

TEST(QuestPolicyTest, SelectsTheTopPagesByBoundAndAttendsExactlyOverThem) {
  const int prompt = 600, page = 16;
  const KvGeometry g = SmallGeometry(3, 6, 2, 32, 1024);
  const Rope rope(TestRopeConfig(32), 1024);
  const SyntheticModel model(g, 21, 2.0f);
  ThreadPool pool(2);
  KvConfig config = QuestConfig(0.1, page, 1);
  config.sinks = 5;
  config.recent = 20;
  auto owned = CreateKvCache(config, g, rope);
  auto& cache = dynamic_cast<QuestCache&>(*owned);
  cache.BeginRun(prompt, 8);
  RunBatch(cache, model, 0, prompt, BatchKind::kPromptEnd, pool);
  ASSERT_EQ(cache.budget_tokens(), 60);  // 0.1 of 608 tokens

  const int group = g.n_heads / g.n_kv_heads, hd = g.head_dim;
  std::vector<float> q(g.n_heads * hd), k(g.n_kv_heads * hd), v(g.n_kv_heads * hd),
      out(g.n_heads * hd);
  std::vector<float> keys, values;
  std::vector<int32_t> positions;
  int sparse_heads = 0;
  for (int32_t pos = prompt; pos < prompt + 8; ++pos) {
    cache.BeginBatch(BatchKind::kGenerated);
    for (int layer = 0; layer < g.n_layers; ++layer) {
      model.Activations(layer, pos, q.data(), k.data(), v.data());
      cache.Store(layer, 1, &pos, k.data(), v.data());
      cache.Attend(layer, 1, &pos, q.data(), out.data(), pool);
      const int64_t visible = pos + 1;
      cache.DenseLayer(layer, &keys, &values, &positions);
      QuestLayout layout{.page = page, .sinks = 5, .recent = 20};
      for (int h = 0; h < g.n_kv_heads; ++h) {
        const float* qg = q.data() + h * group * hd;
        const std::vector<TokenRange> ranges = cache.AttendedRanges(layer, h, qg, visible);
        std::vector<bool> attended(visible, false);
        for (const TokenRange& r : ranges) {
          for (int64_t t = r.begin; t < r.end; ++t) attended[t] = true;
        }
        if (layer == 0) {  // the dense layer
          EXPECT_EQ(RangeTokens(ranges), visible);
        } else {
          ++sparse_heads;
          EXPECT_LE(RangeTokens(ranges), cache.budget_tokens());
          // Sinks, the last `recent` tokens and the partial page are always attended.
          for (int64_t t = 0; t < 5; ++t) EXPECT_TRUE(attended[t]) << t;
          for (int64_t t = visible - 20; t < visible; ++t) EXPECT_TRUE(attended[t]) << t;
          for (int64_t t = visible / page * page; t < visible; ++t) EXPECT_TRUE(attended[t]) << t;
          // Brute force: each candidate page's bound (max over the group's query heads) from
          // its keys; the chosen pages are the k largest.
          const int64_t first = layout.FirstCandidate(visible), end = layout.EndCandidate(visible);
          const int64_t want_k = layout.PagesForBudget(cache.budget_tokens(), visible);
          std::vector<std::pair<double, int64_t>> bounds;
          for (int64_t p = first; p < end; ++p) {
            const BruteBounds b = PageBoundsBruteForce(cache, layer, h, p * page,
                                                       std::min<int64_t>(visible, (p + 1) * page));
            double best = -INFINITY;
            for (int gq = 0; gq < group; ++gq) {
              double s = 0.0;
              for (int c = 0; c < hd; ++c) {
                const double x = qg[gq * hd + c];
                s += std::max(x * b.kmin[c], x * b.kmax[c]);
              }
              best = std::max(best, s);
            }
            bounds.push_back({best, p});
          }
          std::sort(bounds.begin(), bounds.end(), std::greater<>());
          std::set<int64_t> want_pages;
          for (int64_t i = 0; i < want_k; ++i) want_pages.insert(bounds[i].second);
          for (const auto& [bound, p] : bounds) {
            // A chosen page's tokens before the recent region are attended; another's are not.
            const int64_t lo = std::max<int64_t>(p * page, 5);
            const int64_t hi = std::min<int64_t>((p + 1) * page, layout.RecentBegin(visible));
            for (int64_t t = lo; t < hi; ++t) {
              ASSERT_EQ(attended[t], want_pages.count(p) == 1)
                  << "layer " << layer << " head " << h << " page " << p << " token " << t;
            }
          }
        }
        // The output is exact softmax attention over the attended tokens (double reference).
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        for (int gq = 0; gq < group; ++gq) {
          const float* qh = qg + gq * hd;
          std::vector<double> w;
          double max_score = -INFINITY;
          for (int64_t t = 0; t < visible; ++t) {
            if (!attended[t]) continue;
            double s = 0.0;
            for (int c = 0; c < hd; ++c) s += double{qh[c]} * keys[(t * g.n_kv_heads + h) * hd + c];
            w.push_back(s * scale);
            max_score = std::max(max_score, s * scale);
          }
          std::vector<double> o(hd, 0.0);
          double total = 0.0;
          size_t j = 0;
          for (int64_t t = 0; t < visible; ++t) {
            if (!attended[t]) continue;
            const double e = std::exp(w[j++] - max_score);
            total += e;
            for (int c = 0; c < hd; ++c) o[c] += e * values[(t * g.n_kv_heads + h) * hd + c];
          }
          for (int c = 0; c < hd; ++c) {
            ASSERT_NEAR(out[(h * group + gq) * hd + c], o[c] / total, 2e-4)
                << "layer " << layer << " head " << h * group + gq;
          }
        }
      }
    }
    cache.EndBatch(BatchKind::kGenerated, pool);
  }
  EXPECT_EQ(sparse_heads, 8 * 2 * g.n_kv_heads);
}

TEST(QuestPolicyTest, AttendedRangesKeepSinksRecentAndThePartialPageForEveryShape) {
  for (int page : {1, 3, 16}) {
    for (int64_t sinks : {0, 4, 20}) {
      for (int64_t recent : {0, 5, 33}) {
        QuestLayout layout{.page = page, .sinks = sinks, .recent = recent};
        for (int64_t visible = 1; visible < 120; visible += 7) {
          const int64_t first = layout.FirstCandidate(visible), end = layout.EndCandidate(visible);
          std::vector<int64_t> every_other;
          for (int64_t p = first; p < end; p += 2) every_other.push_back(p);
          for (const auto& chosen : {std::vector<int64_t>{}, every_other}) {
            const std::vector<TokenRange> ranges = layout.Ranges(visible, chosen);
            std::vector<bool> attended(visible, false);
            int64_t previous_end = -1;
            for (const TokenRange& r : ranges) {
              ASSERT_LT(previous_end, r.begin);  // sorted, disjoint, not adjacent
              ASSERT_LT(r.begin, r.end);
              ASSERT_LE(r.end, visible);
              for (int64_t t = r.begin; t < r.end; ++t) attended[t] = true;
              previous_end = r.end;
            }
            for (int64_t t = 0; t < std::min(sinks, visible); ++t) ASSERT_TRUE(attended[t]);
            for (int64_t t = std::max<int64_t>(0, visible - recent); t < visible; ++t) {
              ASSERT_TRUE(attended[t]);
            }
            for (int64_t t = visible / page * page; t < visible; ++t) ASSERT_TRUE(attended[t]);
            // A budget that leaves k pages never attends more than it allows.
            for (int64_t budget : {int64_t{0}, int64_t{10}, int64_t{40}}) {
              const int64_t k = layout.PagesForBudget(budget, visible);
              std::vector<int64_t> top;
              for (int64_t p = first; p < end && static_cast<int64_t>(top.size()) < k; ++p) {
                top.push_back(p);
              }
              const int64_t fixed =
                  std::min(sinks, visible) + visible - layout.RecentBegin(visible);
              EXPECT_LE(RangeTokens(layout.Ranges(visible, top)), std::max(budget, fixed));
            }
          }
        }
      }
    }
  }
}

TEST(QuestPolicyTest, ABudgetBelowSinksAndRecentIsReportedInfeasible) {
  const KvGeometry g = SmallGeometry(3, 6, 2, 32, 512);
  const Rope rope(TestRopeConfig(32), 512);
  const SyntheticModel model(g, 41, 2.0f);
  ThreadPool pool(1);
  for (const double budget : {0.02, 0.3}) {
    auto cache = CreateKvCache(QuestConfig(budget, 16, 1), g, rope);  // sinks 5, recent 32
    Outputs(*cache, model, 400, 400, 4, pool);
    const KvStats s = cache->Stats();
    // 0.02 of 404 tokens is 8, under the 5 sinks + 32 recent tokens it attends anyway.
    EXPECT_EQ(s.infeasible, budget < 0.1) << s.note;
    EXPECT_NE(s.note.find(budget < 0.1 ? "fewer than the sinks" : "caps the tokens"),
              std::string::npos)
        << s.note;
  }
}

TEST(QuestPolicyTest, TopPagesBreaksTiesByLowerIndex) {
  EXPECT_EQ(TopPages({1.0f, 3.0f, 3.0f, 2.0f, 5.0f}, 3), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(TopPages({1.0f, 1.0f, 1.0f}, 2), (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(TopPages({1.0f}, 0).empty());
  EXPECT_EQ(TopPages({2.0f, 1.0f}, 5), (std::vector<int64_t>{0, 1}));
}

TEST(QuestPolicyTest, AForkOfAPrefixAndARestoredStateContinueAsTheCacheItself) {
  const KvGeometry g = SmallGeometry(3, 6, 2, 32, 512);
  const Rope rope(TestRopeConfig(32), 512);
  const SyntheticModel model(g, 31, 2.0f);
  ThreadPool pool(2);
  const KvConfig config = QuestConfig(0.15, 8, 1);
  const int prompt = 320, generate = 16;
  auto own = CreateKvCache(config, g, rope);
  const auto want = Outputs(*own, model, prompt, prompt, generate, pool);

  KvConfig prefix_config;
  prefix_config.prefill_chunk = 0;
  auto prefix = CreatePrefixCache(prefix_config, g, rope);
  prefix->BeginRun(prompt, generate);
  RunBatch(*prefix, model, 0, prompt, BatchKind::kPromptEnd, pool);
  auto fork = ForkKvCache(*prefix, config, rope, pool);
  ASSERT_NE(dynamic_cast<QuestCache*>(fork.get()), nullptr);
  EXPECT_EQ(dynamic_cast<QuestCache&>(*fork).budget_tokens(),
            dynamic_cast<QuestCache&>(*own).budget_tokens());
  // Half the generation, a save and a restore into a fresh cache, the other half.
  for (int i = 0; i < generate / 2; ++i) {
    std::vector<float> out;
    RunBatch(*fork, model, prompt + i, 1, BatchKind::kGenerated, pool, &out);
    EXPECT_TRUE(SameBits(out, want[1 + i])) << "fork, token " << i;
  }
  ByteWriter saved;
  fork->SaveState(saved);
  auto restored = CreateKvCache(config, g, rope);
  ByteReader in(saved.bytes(), "saved quest state");
  restored->LoadState(in);
  EXPECT_EQ(in.remaining(), 0u);
  EXPECT_EQ(restored->Stats().meta_bytes, fork->Stats().meta_bytes);
  for (int i = generate / 2; i < generate; ++i) {
    std::vector<float> out;
    RunBatch(*restored, model, prompt + i, 1, BatchKind::kGenerated, pool, &out);
    EXPECT_TRUE(SameBits(out, want[1 + i])) << "restored, token " << i;
  }
  EXPECT_EQ(restored->Stats().mean_attended_bytes, own->Stats().mean_attended_bytes);
}

}  // namespace
}  // namespace qevict
