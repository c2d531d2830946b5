// The reservation admission control makes is an upper bound of what the cache really holds
// mapped: real caches of every policy, driven like the model drives them, never exceed it,
// neither in resident bytes (the ledger) nor in reserved bytes (slabs and policy buffers).
#include "server/kv_reservation.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "kv/kv_test_util.h"
#include "kv/tiered_cache.h"
#include "policy/registry.h"

namespace qevict::server {
namespace {

struct Shape {
  int prompt;
  int generate;
  int chunk;  // kv.prefill_chunk
};

void ExpectPeakWithinReservation(const std::string& policy, double budget, int64_t budget_bytes,
                                 const Shape& shape) {
  SCOPED_TRACE(policy + " budget " + std::to_string(budget) + " bytes " +
               std::to_string(budget_bytes) + " prompt " + std::to_string(shape.prompt) +
               " generate " + std::to_string(shape.generate) + " chunk " +
               std::to_string(shape.chunk));
  const int run = shape.prompt + shape.generate;
  const KvGeometry geo = qevict::testing::SmallGeometry(3, 4, 2, 32, run);
  const Rope rope(qevict::testing::TestRopeConfig(32), run);
  KvConfig config;
  config.policy = policy;
  config.budget = budget;
  config.budget_bytes = budget_bytes;
  config.prefill_chunk = shape.chunk;
  auto cache = CreateKvCache(config, geo, rope);
  ThreadPool pool(1);
  qevict::testing::SyntheticModel model(geo, static_cast<uint32_t>(run), 1.5f);
  cache->BeginRun(shape.prompt, shape.generate);
  int64_t peak = 0;
  qevict::testing::RunPromptAndGenerate(
      *cache, model, shape.prompt, shape.chunk, shape.generate, pool,
      [&](int32_t, BatchKind) { peak = std::max(peak, cache->Stats().resident_bytes()); });
  peak = std::max(peak, cache->Stats().peak_bytes);
  const int64_t reserved = KvReservationBytes(config, geo, shape.prompt, shape.generate);
  EXPECT_LE(peak, reserved);
  EXPECT_LE(cache->Stats().peak_reserved_bytes, reserved);
  // Not wildly above either: within the whole fp16 cache of the run plus bookkeeping, plus what
  // the pools map beyond their live blocks (whole slabs; demotions in flight).
  EXPECT_LE(reserved, int64_t{2} * run * geo.fp16_bytes_per_token() + 64 * 1024 +
                          TieredCache::MappedSlackBytes(PolicyLayout(config), geo,
                                                        run * geo.fp16_bytes_per_token(), true));
}

TEST(KvReservationTest, FullCacheIsEveryTokenInFp16) {
  const KvGeometry geo = qevict::testing::SmallGeometry(3, 4, 2, 32, 100);
  KvConfig config;
  config.policy = "full";
  EXPECT_EQ(KvReservationBytes(config, geo, 60, 40), 100 * geo.fp16_bytes_per_token());
}

TEST(KvReservationTest, BudgetShrinksTheReservationOfLongRuns) {
  const KvGeometry geo = qevict::testing::SmallGeometry(3, 4, 2, 32, 4096);
  KvConfig full;
  full.policy = "full";
  KvConfig qevict;
  qevict.policy = "qevict";
  qevict.budget = 0.1;
  qevict.prefill_chunk = 64;
  // 0.1 of the run, a chunk in fp16, the quantized copies of one step's demotions (up to the Q
  // tier's half of the budget) and whole slabs: still under a third of the fp16 cache.
  EXPECT_LT(KvReservationBytes(qevict, geo, 2048, 2048),
            KvReservationBytes(full, geo, 2048, 2048) / 3);
}

TEST(KvReservationTest, UpperBoundsRealCachesOfEveryPolicy) {
  const Shape shapes[] = {{5, 3, 0}, {40, 30, 0}, {300, 60, 0}, {300, 60, 64}, {90, 200, 16}};
  for (const std::string& policy : PolicyNames()) {
    for (const Shape& shape : shapes) {
      if (policy == "full") {
        ExpectPeakWithinReservation(policy, 1.0, -1, shape);
        continue;
      }
      for (double budget : {1.0, 0.5, 0.1, 0.02}) {
        ExpectPeakWithinReservation(policy, budget, -1, shape);
      }
      ExpectPeakWithinReservation(policy, 1.0, 20000, shape);
    }
  }
}

// The reservation is the tiered cache's own ledger sizing its worst case
// (TieredCache::WorstReservedBytes): for a run that keeps every token in fp16 its ledger part is
// what the cache really holds at its peak, to the byte but the next token's position; for kivi at
// a budget it cannot meet (every window kept, quantized) it is within a tenth of the real peak.
TEST(KvReservationTest, IsWhatARealTieredCacheHoldsAtItsPeak) {
  ThreadPool pool(1);
  struct Case {
    std::string policy;
    double budget;
    Shape shape;
  };
  // kivi: a short prompt and a long generation, so that its steady state (every window kept
  // quantized) is the peak rather than the prompt read in fp16.
  for (const Case& c : {Case{"qevict", 1.0, {300, 60, 0}}, Case{"snapkv", 1.0, {300, 60, 0}},
                        Case{"h2o", 1.0, {300, 60, 64}}, Case{"kivi", 0.02, {64, 700, 0}},
                        Case{"kivi", 0.05, {64, 700, 0}}}) {
    const Shape& shape = c.shape;
    const int run = shape.prompt + shape.generate;
    const KvGeometry geo = qevict::testing::SmallGeometry(3, 4, 2, 32, run);
    const Rope rope(qevict::testing::TestRopeConfig(32), run);
    SCOPED_TRACE(c.policy + " budget " + std::to_string(c.budget));
    KvConfig config;
    config.policy = c.policy;
    config.budget = c.budget;
    config.prefill_chunk = shape.chunk;
    const KvConfig layout = PolicyLayout(config);
    auto cache = CreateKvCache(config, geo, rope);
    qevict::testing::SyntheticModel model(geo, static_cast<uint32_t>(run), 1.5f);
    cache->BeginRun(shape.prompt, shape.generate);
    qevict::testing::RunPromptAndGenerate(*cache, model, shape.prompt, shape.chunk,
                                          shape.generate, pool);
    const KvStats stats = cache->Stats();
    const std::unique_ptr<Policy> policy = MakePolicy(layout);
    const std::optional<int64_t> budget = layout.GlobalBudgetBytes(run, geo);
    const int64_t reserved = KvReservationBytes(config, geo, shape.prompt, shape.generate);
    EXPECT_EQ(reserved, TieredCache::WorstReservedBytes(layout, geo, *policy, shape.prompt, run,
                                                        budget));
    EXPECT_LE(stats.peak_reserved_bytes, reserved);
    // The ledger's part: the reservation less what the pools may map beyond it.
    const int64_t ledger =
        reserved - TieredCache::MappedSlackBytes(layout, geo, budget.value_or(0),
                                                 policy->quantizes()) -
        (policy->wants_observation() && budget ? TieredCache::ObservationBytesFor(layout, geo)
                                               : 0);
    EXPECT_GE(ledger, stats.peak_bytes);
    if (!budget) {
      EXPECT_LE(ledger, stats.peak_bytes + 4);  // + the next token's position
    } else {
      EXPECT_TRUE(stats.infeasible);  // kivi keeps every window, quantized
      // Within a tenth of the real peak (the floor's few windows are counted in both tiers).
      EXPECT_LE(ledger, stats.peak_bytes + stats.peak_bytes / 10);
    }
  }
}

TEST(KvReservationTest, DescribesTheRequest) {
  const KvGeometry geo = qevict::testing::SmallGeometry(3, 4, 2, 32, 100);
  KvConfig config;
  config.policy = "qevict";
  config.budget = 0.25;
  const std::string text = DescribeKvRequest(config, geo, 37, 64);
  EXPECT_NE(text.find("policy qevict"), std::string::npos) << text;
  EXPECT_NE(text.find("budget 0.25"), std::string::npos) << text;
  EXPECT_NE(text.find("37 prompt + 64 new tokens"), std::string::npos) << text;
}

// With --kv-budget-scope global the rings are real bytes on top of the global layers' budget:
// the reservation is the global layers' worst case at that budget plus the rings, larger than at
// the same fraction of the whole cache, and still covers what a real cache of the global layers
// holds.
TEST(KvReservationTest, GlobalScopeReservesTheRingsOnTopOfTheGlobalBudget) {
  const int prompt = 600, generate = 40, run = prompt + generate;
  KvGeometry geo = qevict::testing::SmallGeometry(3, 4, 2, 32, run);
  geo.ring_layers = 9;
  geo.ring_window = 64;
  const int64_t rings = geo.ring_bytes(run);
  KvConfig all;
  all.policy = "qevict";
  all.budget = 0.2;
  all.prefill_chunk = 64;
  KvConfig global = all;
  global.budget_scope = BudgetScope::kGlobal;
  const KvConfig layout = PolicyLayout(global);
  const int64_t reserved = KvReservationBytes(global, geo, prompt, generate);
  EXPECT_EQ(reserved, TieredCache::WorstReservedBytes(layout, geo, *MakePolicy(layout), prompt, run,
                                                      global.GlobalBudgetBytes(run, geo)) +
                          rings);
  EXPECT_GT(reserved, KvReservationBytes(all, geo, prompt, generate));

  ThreadPool pool(1);
  const Rope rope(qevict::testing::TestRopeConfig(32), run);
  auto cache = CreateKvCache(global, geo, rope);
  qevict::testing::SyntheticModel model(geo, 11, 1.5f);
  cache->BeginRun(prompt, generate);
  qevict::testing::RunPromptAndGenerate(*cache, model, prompt, 64, generate, pool);
  EXPECT_LE(cache->Stats().peak_reserved_bytes + rings, reserved);
  EXPECT_NE(DescribeKvRequest(global, geo, prompt, generate).find("of the global layers"),
            std::string::npos);
}

}  // namespace
}  // namespace qevict::server
