// --kv-budget-scope (KvConfig::budget_scope): what a budget is of on a model with sliding-window
// layers. `all`: the whole cache, rings included, the global layers get what the rings leave;
// `global`: the global layers' fp16 cache, the rings paid on top. The same without rings.
#include <gtest/gtest.h>

#include <cmath>

#include "kv/kv_config.h"
#include "kv/kv_test_util.h"
#include "policy/registry.h"

namespace qevict {
namespace {

// Global layers with sliding-window rings beside them, as the policy's cache sees its geometry.
KvGeometry SlidingGeometry(int global_layers, int ring_layers, int kv_heads, int head_dim,
                           int64_t ring_window, int64_t max_tokens) {
  KvGeometry g = testing::SmallGeometry(global_layers, kv_heads, kv_heads, head_dim, max_tokens);
  g.ring_layers = ring_layers;
  g.ring_window = ring_window;
  return g;
}

KvConfig Budgeted(double budget, BudgetScope scope, int64_t cap = -1) {
  KvConfig c;
  c.budget = cap > 0 ? 1.0 : budget;
  c.budget_bytes = cap;
  c.budget_scope = scope;
  return c;
}

TEST(BudgetScope, BytesOfEachScopeOnASlidingGeometry) {
  // 2 global layers and 10 rings of 64 tokens, 2 KV heads of 32 dims: 512 bytes a token in the
  // global layers, 2560 bytes a token in the rings, 160 KiB of rings once 64 tokens are read.
  const KvGeometry g = SlidingGeometry(2, 10, 2, 32, 64, 4096);
  ASSERT_EQ(g.fp16_bytes_per_token(), 512);
  const int64_t run = 2000;
  const int64_t rings = g.ring_bytes(run);
  ASSERT_EQ(rings, 10 * 2 * 2 * 32 * 2 * 64);
  ASSERT_EQ(g.full_bytes(run), 512 * run + rings);

  // all: a fraction of the global tokens plus the rings; the global layers get what is left.
  const KvConfig all = Budgeted(0.3, BudgetScope::kAll);
  const int64_t all_total = static_cast<int64_t>(std::floor(0.3 * (512.0 * run + rings)));
  EXPECT_EQ(all.BudgetBytes(run, g), all_total);
  EXPECT_EQ(all.GlobalBudgetBytes(run, g), all_total - rings);

  // global: a fraction of the global tokens alone, the rings on top.
  const KvConfig global = Budgeted(0.3, BudgetScope::kGlobal);
  const int64_t global_part = static_cast<int64_t>(std::floor(0.3 * 512.0 * run));
  EXPECT_EQ(global.GlobalBudgetBytes(run, g), global_part);
  EXPECT_EQ(global.BudgetBytes(run, g), global_part + rings);
  EXPECT_GT(*global.GlobalBudgetBytes(run, g), *all.GlobalBudgetBytes(run, g));

  // Below the rings' share `all` leaves the global layers nothing; `global` still gives 5%.
  EXPECT_EQ(Budgeted(0.05, BudgetScope::kAll).GlobalBudgetBytes(run, g), 0);
  EXPECT_EQ(Budgeted(0.05, BudgetScope::kGlobal).GlobalBudgetBytes(run, g),
            static_cast<int64_t>(std::floor(0.05 * 512.0 * run)));

  // A byte cap: of the whole cache, or of the global layers with the rings on top.
  EXPECT_EQ(Budgeted(1.0, BudgetScope::kAll, 400000).BudgetBytes(run, g), 400000);
  EXPECT_EQ(Budgeted(1.0, BudgetScope::kAll, 400000).GlobalBudgetBytes(run, g), 400000 - rings);
  EXPECT_EQ(Budgeted(1.0, BudgetScope::kGlobal, 400000).GlobalBudgetBytes(run, g), 400000);
  EXPECT_EQ(Budgeted(1.0, BudgetScope::kGlobal, 400000).BudgetBytes(run, g), 400000 + rings);

  // No budget is no budget in either scope.
  for (BudgetScope scope : {BudgetScope::kAll, BudgetScope::kGlobal}) {
    EXPECT_FALSE(Budgeted(1.0, scope).BudgetBytes(run, g).has_value());
    EXPECT_FALSE(Budgeted(1.0, scope).GlobalBudgetBytes(run, g).has_value());
  }

  // The fraction an infeasible run's note asks for gives back that many global bytes.
  for (const KvConfig& c : {all, global}) {
    const double fraction = c.BudgetFractionFor(*c.GlobalBudgetBytes(run, g), run, g);
    EXPECT_NEAR(fraction, 0.3, 1e-6) << BudgetScopeName(c.budget_scope);
  }
}

TEST(BudgetScope, BothScopesAreTheSameWithoutSlidingLayers) {
  const KvGeometry g = testing::SmallGeometry(4, 4, 2, 32, 8192);
  for (const int64_t run : {int64_t{1}, int64_t{100}, int64_t{3000}, int64_t{8192}}) {
    for (const double budget : {0.02, 0.05, 0.1, 0.5, 0.999}) {
      const KvConfig all = Budgeted(budget, BudgetScope::kAll);
      const KvConfig global = Budgeted(budget, BudgetScope::kGlobal);
      EXPECT_EQ(all.BudgetBytes(run, g), global.BudgetBytes(run, g)) << budget << " " << run;
      EXPECT_EQ(all.GlobalBudgetBytes(run, g), global.GlobalBudgetBytes(run, g));
      EXPECT_EQ(all.BudgetBytes(run, g), all.GlobalBudgetBytes(run, g));
      EXPECT_DOUBLE_EQ(all.BudgetFractionFor(12345, run, g),
                       global.BudgetFractionFor(12345, run, g));
    }
    EXPECT_EQ(Budgeted(1.0, BudgetScope::kAll, 99999).BudgetBytes(run, g),
              Budgeted(1.0, BudgetScope::kGlobal, 99999).BudgetBytes(run, g));
  }
  // And a real cache reports the same budget in both.
  const Rope rope(testing::TestRopeConfig(32), 8192);
  for (BudgetScope scope : {BudgetScope::kAll, BudgetScope::kGlobal}) {
    KvConfig c = Budgeted(0.1, scope);
    c.policy = "qevict";
    auto cache = CreateKvCache(c, g, rope);
    cache->BeginRun(3000, 100);
    const KvStats s = cache->Stats();
    EXPECT_EQ(s.budget_bytes, *Budgeted(0.1, BudgetScope::kAll).BudgetBytes(3100, g));
    EXPECT_EQ(s.global_budget_bytes, s.budget_bytes);
    EXPECT_EQ(s.budget_scope_global, scope == BudgetScope::kGlobal);
  }
}

// Gemma 3 270M's geometry as its policy cache sees it: 3 global layers of one 256-dim KV head,
// 15 rings of 512 tokens (7.5 MiB). At 8k tokens 0.05 of the whole cache is less than the rings;
// 0.05 of the global layers is 1.2 MiB, above their floor, and the cache keeps to it.
TEST(BudgetScope, FivePercentOfTheGlobalLayersIsFeasibleAtEightKOnGemma) {
  const int64_t prompt = 8064, generate = 128, run = prompt + generate;
  const KvGeometry g = SlidingGeometry(3, 15, 1, 256, 512, run);
  ASSERT_EQ(g.ring_bytes(run), 15 * 512 * 1024);

  const Rope rope(testing::TestRopeConfig(256), run);
  KvConfig all = Budgeted(0.05, BudgetScope::kAll);
  all.policy = "qevict";
  auto all_cache = CreateKvCache(all, g, rope);
  all_cache->BeginRun(prompt, generate);
  EXPECT_TRUE(all_cache->Stats().infeasible);  // the rings alone exceed 5% of the whole
  EXPECT_NE(all_cache->Stats().note.find("--kv-budget-scope global"), std::string::npos)
      << all_cache->Stats().note;

  KvConfig global = all;
  global.budget_scope = BudgetScope::kGlobal;
  auto cache = CreateKvCache(global, g, rope);
  cache->BeginRun(prompt, generate);
  const int64_t global_budget = static_cast<int64_t>(std::floor(0.05 * 3072.0 * run));
  KvStats s = cache->Stats();
  EXPECT_FALSE(s.infeasible) << s.note;
  EXPECT_EQ(s.global_budget_bytes, global_budget);
  EXPECT_EQ(s.budget_bytes, global_budget + g.ring_bytes(run));
  EXPECT_LT(s.floor_bytes, global_budget);

  // The whole run through the global layers, in 512-token chunks as bounded prefill reads it:
  // once routed they never hold more than their part of the budget.
  ThreadPool pool(1);
  testing::SyntheticModel model(g, 7, 1.5f);
  int64_t routed_peak = 0;
  testing::RunPromptAndGenerate(*cache, model, static_cast<int>(prompt), 512,
                                static_cast<int>(generate), pool, [&](int32_t, BatchKind kind) {
                                  if (kind != BatchKind::kPromptChunk) {
                                    routed_peak =
                                        std::max(routed_peak, cache->Stats().resident_bytes());
                                  }
                                });
  s = cache->Stats();
  EXPECT_FALSE(s.infeasible) << s.note;
  EXPECT_GT(s.routing_steps, 0);
  EXPECT_GT(s.evicted_windows + s.quant_windows, 0);
  EXPECT_LE(routed_peak, global_budget);
  EXPECT_LE(s.resident_bytes(), global_budget);
  EXPECT_GT(s.resident_bytes(), global_budget / 2);  // the budget is used, not left empty
}

}  // namespace
}  // namespace qevict
