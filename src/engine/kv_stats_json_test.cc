// KvStatsOverBudget: "OVER BUDGET" in --kv-stats is kept for a cache that broke its contract
// (docs/kv-cache.md, "Memory"), never for the peak bounded prefill is documented to reach while
// a prompt is read, nor for an infeasible budget or a cache without one.
#include "engine/kv_stats_json.h"

#include <gtest/gtest.h>

namespace qevict {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int kRouteEvery = 8;
constexpr int kWindow = 8;

// SmolLM2's shape after a 1,400-token prompt at budget 0.1, bounded prefill (512-token chunks):
// 23,040 fp16 bytes a token over its 30 layers.
KvStats RoutedStats() {
  KvStats s;
  s.tokens_seen = 1400;
  s.full_fp16_bytes = 1400 * 23040;
  s.budget_bytes = 3 * kMiB;
  s.floor_bytes = 1 * kMiB;
  s.fp16_bytes = 2 * kMiB;
  s.quant_bytes = kMiB - 4096;
  s.meta_bytes = 4096;
  s.routing_steps = 6;
  s.prefill_peak_bytes = s.budget_bytes + 512 * 23040;  // the budget plus one chunk in fp16
  s.peak_bytes = s.prefill_peak_bytes;
  s.reserved_bytes = s.routed_reserved_peak_bytes = 3 * kMiB + kMiB / 2;
  return s;
}

TEST(KvStatsOverBudgetTest, PromptChunkOnTopOfTheBudgetIsNotAnOverrun) {
  EXPECT_FALSE(KvStatsOverBudget(RoutedStats(), kRouteEvery, kWindow));
  KvStats paper_mode = RoutedStats();  // --kv-prefill-chunk 0: the whole prompt in fp16
  paper_mode.prefill_peak_bytes = paper_mode.peak_bytes = paper_mode.full_fp16_bytes;
  EXPECT_FALSE(KvStatsOverBudget(paper_mode, kRouteEvery, kWindow));
}

TEST(KvStatsOverBudgetTest, DecodingBetweenRoutingStepsIsNotAnOverrun) {
  KvStats s = RoutedStats();
  s.prefill_peak_bytes = s.budget_bytes - 1;  // the prompt fit; the peak came while decoding
  s.peak_bytes = s.budget_bytes + (kRouteEvery + kWindow) * 23040;
  EXPECT_FALSE(KvStatsOverBudget(s, kRouteEvery, kWindow));
  s.peak_bytes += 23040;  // one token more than a routing interval can add
  EXPECT_TRUE(KvStatsOverBudget(s, kRouteEvery, kWindow));
}

TEST(KvStatsOverBudgetTest, MappedBeyondTheContractAfterRoutingIsAnOverrun) {
  KvStats s = RoutedStats();
  const int64_t contract = s.budget_bytes + s.budget_bytes / 4 + kMiB;
  s.routed_reserved_peak_bytes = contract;
  EXPECT_FALSE(KvStatsOverBudget(s, kRouteEvery, kWindow));
  s.routed_reserved_peak_bytes = contract + 1;
  EXPECT_TRUE(KvStatsOverBudget(s, kRouteEvery, kWindow));
}

TEST(KvStatsOverBudgetTest, TheFloorIsTheLimitWhenTheBudgetIsBelowIt) {
  KvStats s = RoutedStats();
  s.budget_bytes = kMiB / 2;  // below the floor: the cache keeps its floor
  s.floor_bytes = 3 * kMiB;
  EXPECT_FALSE(KvStatsOverBudget(s, kRouteEvery, kWindow));
}

TEST(KvStatsOverBudgetTest, NoBudgetNoRoutingOrInfeasibleIsNeverOver) {
  KvStats s = RoutedStats();
  s.routed_reserved_peak_bytes = 100 * kMiB;
  KvStats unbounded = s;
  unbounded.budget_bytes = -1;
  EXPECT_FALSE(KvStatsOverBudget(unbounded, kRouteEvery, kWindow));
  KvStats unrouted = s;
  unrouted.routing_steps = 0;
  EXPECT_FALSE(KvStatsOverBudget(unrouted, kRouteEvery, kWindow));
  KvStats infeasible = s;
  infeasible.infeasible = true;
  EXPECT_FALSE(KvStatsOverBudget(infeasible, kRouteEvery, kWindow));
  EXPECT_TRUE(KvStatsOverBudget(s, kRouteEvery, kWindow));
}

}  // namespace
}  // namespace qevict
