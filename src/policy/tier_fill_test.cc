#include "policy/tier_fill.h"

#include <gtest/gtest.h>

#include <vector>

namespace qevict {
namespace {

constexpr int64_t kFp = 100, kQ = 30;

std::vector<BandWindow> Band(const std::vector<Tier>& tiers) {
  std::vector<BandWindow> band(tiers.size());
  for (size_t j = 0; j < tiers.size(); ++j) {
    band[j].index = static_cast<int64_t>(j);
    band[j].tier = tiers[j];
  }
  return band;
}

std::vector<Tier> Fill(const std::vector<BandWindow>& band, const std::vector<int>& order,
                       const FillRule& rule, int64_t budget, int64_t* bytes = nullptr) {
  std::vector<Tier> targets(band.size(), Tier::kFp16);
  const int64_t used = FillByRank(order, band, rule, budget, kFp, kQ, targets);
  if (bytes != nullptr) *bytes = used;
  EXPECT_TRUE(used <= budget || !rule.allow_evict);
  return targets;
}

using T = Tier;

TEST(FillByRank, Fp16OnlyKeepsTheTopAndEvictsTheRest) {
  const auto band = Band({T::kFp16, T::kFp16, T::kFp16, T::kFp16});
  EXPECT_EQ(Fill(band, {2, 0, 3, 1}, FillRule{}, 250),
            (std::vector<Tier>{T::kFp16, T::kEvicted, T::kFp16, T::kEvicted}));
}

TEST(FillByRank, SharesThenQuantizedThenEvicted) {
  FillRule rule;
  rule.use_quant = true;
  rule.allow_promote = true;
  rule.q_share = 0.5;
  const auto band = Band(std::vector<Tier>(8, T::kFp16));
  // Budget 300: fp16 share 150 -> one window (100); the quantized tier gets the other 200 -> six
  // windows (180); the last is evicted; 20 spare bytes are too few to upgrade anything.
  int64_t bytes = 0;
  const auto targets = Fill(band, {0, 1, 2, 3, 4, 5, 6, 7}, rule, 300, &bytes);
  EXPECT_EQ(targets, (std::vector<Tier>{T::kFp16, T::kQuant, T::kQuant, T::kQuant, T::kQuant,
                                        T::kQuant, T::kQuant, T::kEvicted}));
  EXPECT_EQ(bytes, 280);
}

TEST(FillByRank, SpareBytesUpgradeTheBestQuantizedWindows) {
  FillRule rule;
  rule.use_quant = true;
  rule.allow_promote = true;
  rule.q_share = 0.5;
  const auto band = Band(std::vector<Tier>(4, T::kQuant));
  // Budget 400: all four fit quantized (120) with 280 spare -> upgrade the best 4 windows while
  // 70 bytes per upgrade remain: 1 fp16 from the share (100), then 3 quantized (90), spare 210
  // -> upgrade 3 more.
  EXPECT_EQ(Fill(band, {3, 2, 1, 0}, rule, 400),
            (std::vector<Tier>{T::kFp16, T::kFp16, T::kFp16, T::kFp16}));
  // Without promotion (mikv) quantized windows stay quantized.
  rule.allow_promote = false;
  EXPECT_EQ(Fill(band, {3, 2, 1, 0}, rule, 400),
            (std::vector<Tier>{T::kQuant, T::kQuant, T::kQuant, T::kQuant}));
}

TEST(FillByRank, UnlimitedKeepsEverythingAtItsBestTier) {
  FillRule rule;
  rule.use_quant = true;
  rule.allow_promote = false;
  const auto band = Band({T::kQuant, T::kFp16, T::kFp16});
  EXPECT_EQ(Fill(band, {0, 1, 2}, rule, RoutingContext::kUnlimited),
            (std::vector<Tier>{T::kQuant, T::kFp16, T::kFp16}));
}

TEST(FillByRank, NoEvictionQuantizesEverythingEvenOverBudget) {
  FillRule rule;
  rule.use_fp = false;
  rule.use_quant = true;
  rule.allow_evict = false;
  const auto band = Band(std::vector<Tier>(5, T::kFp16));
  int64_t bytes = 0;
  EXPECT_EQ(Fill(band, {0, 1, 2, 3, 4}, rule, 60, &bytes), std::vector<Tier>(5, T::kQuant));
  EXPECT_EQ(bytes, 150);
}

}  // namespace
}  // namespace qevict
