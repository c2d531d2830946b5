// Attention of the tiered cache over mixed tiers against a dense reference computed (in double)
// from the same dequantized cache contents, and the per-window attention mass it yields.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "kv/kv_test_util.h"
#include "kv/tiered_cache.h"

namespace qevict {
namespace {

using testing::RunBatch;
using testing::SyntheticModel;

// Sets band windows to tiers chosen by a function of (layer, window index) at every routing.
class ScriptedPolicy : public Policy {
 public:
  explicit ScriptedPolicy(std::function<Tier(int, int64_t)> script) : script_(std::move(script)) {}
  void Route(const RoutingContext& context, Plan* plan) override {
    for (size_t l = 0; l < context.layers.size(); ++l) {
      const auto& band = context.layers[l].windows;
      for (size_t j = 0; j < band.size(); ++j) {
        plan->targets[l][j] = script_(static_cast<int>(l), band[j].index);
      }
    }
  }

 private:
  std::function<Tier(int, int64_t)> script_;
};

Tier MixedTiers(int layer, int64_t index) {
  switch ((index + layer) % 4) {
    case 0: return Tier::kQuant;
    case 1: return Tier::kEvicted;
    case 2: return Tier::kQuant;
    default: return Tier::kFp16;
  }
}

// Long runs of fp16 windows (40 of them, 320 rows: more than one gathered run of the kernels,
// tiered_attention.cc) between short stretches of quantized and evicted ones.
Tier LongFp16Runs(int layer, int64_t index) {
  const int64_t m = (index + 7 * layer) % 44;
  return m < 40 ? Tier::kFp16 : m < 43 ? Tier::kQuant : Tier::kEvicted;
}

// Dense reference: softmax attention (double) of each query over the cache's dense contents.
// Also returns, per resident token, the attention mass averaged over heads.
void ReferenceAttention(const KvGeometry& g, const std::vector<float>& keys,
                        const std::vector<float>& values, const std::vector<int32_t>& positions,
                        const float* q, int32_t qpos, std::vector<double>* out,
                        std::vector<double>* token_mass) {
  const int hd = g.head_dim, group = g.n_heads / g.n_kv_heads;
  const int64_t row = int64_t{g.n_kv_heads} * hd;
  int64_t visible = 0;
  while (visible < static_cast<int64_t>(positions.size()) && positions[visible] <= qpos) ++visible;
  out->assign(static_cast<size_t>(g.n_heads) * hd, 0.0);
  token_mass->assign(positions.size(), 0.0);
  std::vector<double> s(visible);
  for (int hq = 0; hq < g.n_heads; ++hq) {
    const int h = hq / group;
    double mx = -1e300;
    for (int64_t j = 0; j < visible; ++j) {
      double dot = 0.0;
      for (int d = 0; d < hd; ++d) dot += double{q[hq * hd + d]} * keys[j * row + h * hd + d];
      s[j] = dot / std::sqrt(static_cast<double>(hd));
      mx = std::max(mx, s[j]);
    }
    double total = 0.0;
    for (int64_t j = 0; j < visible; ++j) total += (s[j] = std::exp(s[j] - mx));
    for (int64_t j = 0; j < visible; ++j) {
      const double p = s[j] / total;
      (*token_mass)[j] += p / g.n_heads;
      for (int d = 0; d < hd; ++d) (*out)[hq * hd + d] += p * values[j * row + h * hd + d];
    }
  }
}

struct Case {
  int bits;
  int n_heads;
  int n_kv_heads;
  int head_dim;
  int threads;
  bool neox = false;
  bool long_runs = false;  // LongFp16Runs instead of MixedTiers
};

class TieredAttention : public ::testing::TestWithParam<Case> {};

TEST_P(TieredAttention, MatchesDenseReferenceOfDequantizedContents) {
  const Case c = GetParam();
  const KvGeometry g = testing::SmallGeometry(2, c.n_heads, c.n_kv_heads, c.head_dim, 2048);
  const Rope rope(testing::TestRopeConfig(c.head_dim, c.neox), 4096);
  KvConfig config;
  config.policy = "qevict";
  config.bits = c.bits;
  config.budget_bytes = int64_t{1} << 40;  // a (huge) budget turns scoring on
  config.route_every = 1000000;            // no routing during the decode steps
  TieredCache cache(config, g, rope,
                    std::make_unique<ScriptedPolicy>(c.long_runs ? LongFp16Runs : MixedTiers));
  ThreadPool pool(c.threads);
  SyntheticModel model(g, 11, 1.5f);
  const int prompt = 700;
  cache.BeginRun(prompt, 40);
  RunBatch(cache, model, 0, 300, BatchKind::kPromptChunk, pool);
  RunBatch(cache, model, 300, prompt - 300, BatchKind::kPromptEnd, pool);  // routes
  const KvStats routed = cache.Stats();
  ASSERT_GT(routed.quant_windows, 0);
  ASSERT_GT(routed.evicted_windows, 0);
  ASSERT_GT(routed.fp16_windows, 0);

  const int q_row = g.n_heads * g.head_dim;
  std::vector<float> q(q_row), k(g.n_kv_heads * g.head_dim), v(k.size());
  std::vector<float> keys, values;
  std::vector<int32_t> positions;
  std::vector<double> ref, token_mass;
  auto check_batch = [&](int32_t first, int n, const std::vector<float>& out,
                         const std::vector<std::vector<float>>& score_before) {
    for (int layer = 0; layer < g.n_layers; ++layer) {
      cache.DenseLayer(layer, &keys, &values, &positions);
      const WindowView view = cache.View(layer);
      std::vector<double> window_mass(view.windows.size(), 0.0), last_mass(view.windows.size(), 0.0);
      for (int i = 0; i < n; ++i) {
        model.Activations(layer, first + i, q.data(), k.data(), v.data());
        ReferenceAttention(g, keys, values, positions, q.data(), first + i, &ref, &token_mass);
        const float* o = out.data() + (static_cast<size_t>(layer) * n + i) * q_row;
        for (int e = 0; e < q_row; ++e) {
          ASSERT_NEAR(o[e], ref[e], 1e-4 * (1.0 + std::fabs(ref[e])))
              << "layer " << layer << " query " << first + i << " element " << e;
        }
        // Map resident tokens back to windows.
        int64_t r = view.sink_tokens;
        for (const WindowInfo& w : view.windows) {
          if (w.tier == Tier::kEvicted) continue;
          for (int t = 0; t < w.n_tokens; ++t, ++r) {
            window_mass[w.index] += token_mass[r];
            if (i == n - 1) last_mass[w.index] += token_mass[r];
          }
        }
      }
      for (const WindowInfo& w : view.windows) {
        if (w.tier == Tier::kEvicted) continue;
        EXPECT_NEAR(w.last_mass, last_mass[w.index], 2e-6 + 1e-4 * last_mass[w.index])
            << "layer " << layer << " window " << w.index;
        if (static_cast<size_t>(w.index) < score_before[layer].size()) {
          EXPECT_NEAR(w.score - score_before[layer][w.index], window_mass[w.index],
                      1e-5 + 1e-4 * window_mass[w.index])
              << "layer " << layer << " window " << w.index;
        }
      }
    }
  };
  auto scores_now = [&]() {
    std::vector<std::vector<float>> s(g.n_layers);
    for (int layer = 0; layer < g.n_layers; ++layer) {
      for (const WindowInfo& w : cache.View(layer).windows) s[layer].push_back(w.score);
    }
    return s;
  };

  std::vector<float> out;
  int32_t p = prompt;
  for (int step = 0; step < 12; ++step, ++p) {  // decoding: one query, split-K over threads
    const auto before = scores_now();
    RunBatch(cache, model, p, 1, BatchKind::kGenerated, pool, &out);
    check_batch(p, 1, out, before);
  }
  const auto before = scores_now();  // a multi-query batch (a new user turn), causal
  RunBatch(cache, model, p, 24, BatchKind::kPromptChunk, pool, &out);
  check_batch(p, 24, out, before);
}

INSTANTIATE_TEST_SUITE_P(BitsAndGqa, TieredAttention,
                         ::testing::Values(Case{2, 6, 2, 64, 1}, Case{2, 6, 2, 64, 3},
                                           Case{4, 6, 2, 64, 2}, Case{8, 6, 2, 64, 3},
                                           Case{2, 4, 4, 64, 2}, Case{4, 8, 1, 64, 2},
                                           Case{2, 9, 3, 64, 2}, Case{8, 6, 3, 20, 2},
                                           Case{4, 6, 2, 64, 2, true}, Case{2, 4, 2, 48, 1, true},
                                           Case{2, 9, 3, 64, 2, false, true},
                                           Case{4, 4, 1, 256, 1, true, true}));

}  // namespace
}  // namespace qevict
