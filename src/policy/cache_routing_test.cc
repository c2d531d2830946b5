// Routing behaviour of whole tiered caches driven with synthetic activations: promotion at the
// next routing step, sinks and recent region always fp16, evicted windows never return,
// eviction during decoding.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "kv/kv_test_util.h"
#include "kv/tiered_cache.h"
#include "policy/registry.h"

namespace qevict {
namespace {

using testing::RunBatch;
using testing::SyntheticModel;

class CacheRouting : public ::testing::Test {
 protected:
  CacheRouting()
      : geo_(testing::SmallGeometry(2, 6, 2, 64, 2048)),
        rope_(testing::TestRopeConfig(64), 4096),
        pool_(1) {}

  std::unique_ptr<TieredCache> Make(const std::string& policy, double budget) {
    KvConfig config;
    config.policy = policy;
    config.budget = budget;
    auto cache = CreateKvCache(config, geo_, rope_);
    return std::unique_ptr<TieredCache>(static_cast<TieredCache*>(cache.release()));
  }

  KvGeometry geo_;
  Rope rope_;
  ThreadPool pool_;
};

TEST_F(CacheRouting, QuantizedWindowWhoseScoreOvertakesIsPromotedAtTheNextRoutingStep) {
  auto cache = Make("qevict", 0.15);
  SyntheticModel model(geo_, 21);
  const int prompt = 600;
  cache->BeginRun(prompt, 200);
  RunBatch(*cache, model, 0, prompt, BatchKind::kPromptEnd, pool_);
  // In every layer pick the oldest quantized band window and aim every later query at its first
  // token: q = 4 * (that key after RoPE), for every head of the layer.
  std::vector<int64_t> target(geo_.n_layers, -1);
  std::vector<int32_t> target_pos(geo_.n_layers);
  for (int l = 0; l < geo_.n_layers; ++l) {
    for (const WindowInfo& w : cache->View(l).windows) {
      if (w.tier == Tier::kQuant) {
        target[l] = w.index;
        target_pos[l] = w.first_pos;
        break;
      }
    }
    ASSERT_GE(target[l], 0) << "no quantized window in layer " << l;
  }
  model.query_override = [&](int layer, int32_t, float* q) {
    std::vector<float> q0(geo_.n_heads * geo_.head_dim), k(geo_.n_kv_heads * geo_.head_dim), v(k.size());
    SyntheticModel plain(geo_, 21);
    plain.Activations(layer, target_pos[layer], q0.data(), k.data(), v.data());
    rope_.Apply(k.data(), geo_.n_kv_heads, geo_.head_dim, target_pos[layer]);
    const int group = geo_.n_heads / geo_.n_kv_heads;
    for (int hq = 0; hq < geo_.n_heads; ++hq) {
      for (int d = 0; d < geo_.head_dim; ++d) {
        q[hq * geo_.head_dim + d] = 4.0f * k[(hq / group) * geo_.head_dim + d];
      }
    }
  };
  int32_t p = prompt;
  bool overtaken = false;
  for (int step = 0; step < 120 && !overtaken; ++step) {
    const int64_t routings = cache->Stats().routing_steps;
    RunBatch(*cache, model, p++, 1, BatchKind::kGenerated, pool_);
    if (cache->Stats().routing_steps == routings) {
      // Not a routing step: has the target overtaken an fp16 band window of layer 0?
      const WindowView view = cache->View(0);
      float min_fp = 1e30f;
      float target_score = 0.0f;
      for (const WindowInfo& w : view.windows) {
        if (w.in_band && w.tier == Tier::kFp16) min_fp = std::min(min_fp, w.score);
        if (w.index == target[0]) target_score = w.score;
      }
      if (view.windows[target[0]].tier == Tier::kQuant && target_score > min_fp) {
        // ... then the next routing step promotes it.
        while (cache->Stats().routing_steps == routings) {
          RunBatch(*cache, model, p++, 1, BatchKind::kGenerated, pool_);
        }
        EXPECT_EQ(cache->View(0).windows[target[0]].tier, Tier::kFp16);
        EXPECT_GT(cache->Stats().promotions, 0);
        overtaken = true;
      }
    }
  }
  EXPECT_TRUE(overtaken);
}

// Runs a long generation and checks after every batch that sinks and recent windows are fp16,
// and that an evicted window never comes back.
void CheckTierInvariants(TieredCache& cache, const KvGeometry& geo,
                         std::vector<std::set<int64_t>>* evicted) {
  evicted->resize(geo.n_layers);
  for (int l = 0; l < geo.n_layers; ++l) {
    const WindowView view = cache.View(l);
    EXPECT_EQ(view.sink_tokens, std::min<int64_t>(cache.n_tokens(), cache.config().sinks));
    for (const WindowInfo& w : view.windows) {
      if (!w.in_band) {
        ASSERT_EQ(w.tier, Tier::kFp16) << "recent window " << w.index << " left fp16";
      }
      if (w.tier == Tier::kEvicted) {
        (*evicted)[l].insert(w.index);
      } else {
        ASSERT_EQ((*evicted)[l].count(w.index), 0u) << "window " << w.index << " came back";
      }
    }
  }
}

TEST_F(CacheRouting, SinksAndRecentStayFp16AndEvictedWindowsNeverReturn) {
  for (const std::string policy : {"qevict", "qevict-qa", "h2o", "tova", "mikv", "streaming",
                                    "snapkv", "pyramidkv", "kivi"}) {
    SCOPED_TRACE(policy);
    auto cache = Make(policy, 0.2);
    SyntheticModel model(geo_, 5, 2.0f);
    std::vector<std::set<int64_t>> evicted;
    cache->BeginRun(400, 300);
    testing::RunPromptAndGenerate(*cache, model, 400, 128, 300, pool_,
                                  [&](int32_t, BatchKind) { CheckTierInvariants(*cache, geo_, &evicted); });
    // The sinks hold exactly the first tokens, in fp16, in every layer.
    std::vector<float> keys, values;
    std::vector<int32_t> positions;
    cache->DenseLayer(1, &keys, &values, &positions);
    for (int t = 0; t < 5; ++t) EXPECT_EQ(positions[t], t);
    EXPECT_EQ(positions.back(), 699);
  }
}

TEST_F(CacheRouting, H2oAndTovaEvictDuringDecoding) {
  for (const std::string policy : {"h2o", "tova"}) {
    SCOPED_TRACE(policy);
    auto cache = Make(policy, 0.1);
    SyntheticModel model(geo_, 8);
    cache->BeginRun(300, 500);
    RunBatch(*cache, model, 0, 300, BatchKind::kPromptEnd, pool_);
    const KvStats after_prompt = cache->Stats();
    for (int i = 0; i < 500; ++i) RunBatch(*cache, model, 300 + i, 1, BatchKind::kGenerated, pool_);
    const KvStats end = cache->Stats();
    EXPECT_GT(end.evictions, after_prompt.evictions + 50);
    EXPECT_GT(end.routing_steps, 50);
    EXPECT_EQ(end.quant_windows, 0);  // fp16-only policies
    EXPECT_LE(end.resident_bytes(), end.budget_bytes);
  }
}

TEST_F(CacheRouting, SnapKvDecidesOnceAtThePromptEnd) {
  // Two runs with the same prompt and the same keys and values, but different queries while
  // decoding: SnapKV's tier map of the prompt is the same in both (evictions forced by the budget
  // follow the scores fixed at the prompt end), while qevict's, which keeps scoring, differs.
  auto prompt_tiers = [&](const std::string& policy, bool other_queries) {
    auto cache = Make(policy, 0.25);
    SyntheticModel model(geo_, 9, 2.0f);
    if (other_queries) {
      model.query_override = [](int, int32_t pos, float* q) {
        if (pos < 500) return;
        for (int e = 0; e < 6 * 64; ++e) q[e] = 3.0f * std::sin(0.37f * e + pos);
      };
    }
    cache->BeginRun(500, 120);
    RunBatch(*cache, model, 0, 500, BatchKind::kPromptEnd, pool_);
    for (int i = 0; i < 120; ++i) RunBatch(*cache, model, 500 + i, 1, BatchKind::kGenerated, pool_);
    EXPECT_GT(cache->Stats().routing_steps, 10);
    std::vector<Tier> tiers;
    for (int l = 0; l < geo_.n_layers; ++l) {
      for (const WindowInfo& w : cache->View(l).windows) {
        if (w.first_pos < 500) tiers.push_back(w.tier);
      }
    }
    return tiers;
  };
  EXPECT_EQ(prompt_tiers("snapkv", false), prompt_tiers("snapkv", true));
  EXPECT_NE(prompt_tiers("qevict", false), prompt_tiers("qevict", true));
}

}  // namespace
}  // namespace qevict
