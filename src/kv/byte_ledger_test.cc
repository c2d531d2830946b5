// The byte ledger alone, over a window table, a store and an observation buffer it does not
// own: what it charges, the floor, the budget's feasibility, and what an observation costs.
#include "kv/byte_ledger.h"

#include <gtest/gtest.h>

#include "kv/kv_test_util.h"
#include "kv/window_digest.h"

namespace qevict {
namespace {

class ByteLedgerTest : public ::testing::Test {
 protected:
  ByteLedgerTest()
      : geo_(testing::SmallGeometry(2, 4, 2, 32, 512)),
        qlayout_(QuantLayout::Make(geo_.n_kv_heads, config_.window, geo_.head_dim, config_.bits,
                                   config_.value_group)),
        store_(config_, geo_, qlayout_, 0),
        table_(config_, geo_.n_layers, geo_.max_tokens),
        observation_(geo_.n_layers, config_.snapkv_window, geo_.n_heads, geo_.head_dim),
        ledger_(config_, geo_, qlayout_, table_, store_, observation_) {}

  // Stores `tokens` tokens in every layer: blocks from the store, records in the table.
  void Fill(int64_t tokens) {
    for (int li = 0; li < geo_.n_layers; ++li) {
      LayerWindows& l = table_.layer(li);
      for (int64_t t = l.count; t < tokens; ++t) {
        table_.RecordPosition(li, t, static_cast<int32_t>(t));
        if (t == 0) l.sink_block = store_.Allocate(WindowStore::Kind::kSink);
        if (t >= config_.sinks && (t - config_.sinks) % config_.window == 0) {
          l.windows.push_back(WindowRecord{store_.Allocate(WindowStore::Kind::kFp16), -1,
                                           static_cast<int32_t>((t - config_.sinks) / config_.window),
                                           Tier::kFp16, 0.0f, 0.0f, 0.0f});
        }
        ++l.count;
      }
    }
  }

  KvConfig config_;
  KvGeometry geo_;
  QuantLayout qlayout_;
  WindowStore store_;
  WindowTable table_;
  ObservationBuffer observation_;
  ByteLedger ledger_;
};

TEST_F(ByteLedgerTest, ChargesBlocksRecordsPositionsAndTheObservation) {
  Fill(5 + 8 * 4);
  const int64_t blocks = store_.fp16_bytes() + store_.quant_bytes();
  EXPECT_EQ(blocks, geo_.n_layers * (ledger_.sink_block_bytes() + 4 * ledger_.fp_block_bytes()));
  const int64_t meta = 8 * ByteLedger::kRecordBytes + 37 * ByteLedger::kPositionBytes;
  EXPECT_EQ(ledger_.MetaBytes(), meta);
  EXPECT_EQ(ledger_.ResidentBytes(), blocks + meta);
  EXPECT_EQ(ledger_.AllocatorResidentBytes(), ledger_.ResidentBytes());
  const int64_t reserved = ledger_.ReservedBytes();
  observation_.Hold();
  const int64_t observed = ByteLedger::ObservationBytesFor(config_, geo_);
  EXPECT_EQ(observed, geo_.n_layers * config_.snapkv_window * (geo_.n_heads * geo_.head_dim * 4 + 4));
  EXPECT_EQ(ledger_.MetaBytes(), meta + observed);
  EXPECT_EQ(ledger_.ReservedBytes(), reserved + observed);
  observation_.Release();
  EXPECT_EQ(ledger_.MetaBytes(), meta);
}

TEST_F(ByteLedgerTest, FloorIsSinksRecentWindowsAndTheNextTokensGrowth) {
  Fill(5 + 8 * 10);  // recent 32: windows 6..9 hold the last 32 tokens
  const LayerWindows& l = table_.layer(0);
  EXPECT_EQ(table_.BandSize(l), 6u);
  EXPECT_EQ(ledger_.FloorBytes(l), ledger_.sink_block_bytes() + 4 * ledger_.fp_window_cost());
  // Token 85 opens window 10 in every layer.
  EXPECT_EQ(ledger_.NextTokenGrowth(), geo_.n_layers * ledger_.fp_window_cost() + 4);
  EXPECT_EQ(ledger_.FloorsOfAllLayers(),
            2 * ledger_.FloorBytes(l) + 85 * 4 + ledger_.NextTokenGrowth());
  // The worst floor over a range is at least the floor at each of its ends.
  EXPECT_GE(ledger_.WorstFloorBytes(85, 200), ledger_.WorstFloorBytes(85, 85));
  EXPECT_GE(ledger_.WorstFloorBytes(1, 200), ledger_.WorstFloorBytes(150, 200));
}

TEST_F(ByteLedgerTest, ABudgetBelowTheFloorIsSaidNotSilentlyExceeded) {
  config_.budget = 0.01;
  ledger_.SetBudget(400, 50);
  ASSERT_TRUE(ledger_.budget().has_value());
  EXPECT_TRUE(ledger_.counters().infeasible);
  EXPECT_NE(ledger_.counters().note.find("below the fp16 floor"), std::string::npos);
  EXPECT_GT(ledger_.counters().floor_bytes, *ledger_.budget());

  config_.budget = 0.5;
  ledger_.Reset();
  ledger_.SetBudget(400, 50);
  EXPECT_FALSE(ledger_.counters().infeasible);
  EXPECT_EQ(*ledger_.budget(), static_cast<int64_t>(0.5 * geo_.fp16_bytes_per_token() * 450));
  config_.budget = 1.0;
  ledger_.SetBudget(400, 50);
  EXPECT_FALSE(ledger_.budget().has_value());
  EXPECT_EQ(ledger_.counters().floor_bytes, -1);
}

// What the cold tier costs in RAM per window with the defaults (a record, an eighth of a group's
// mean-key-q2c digest and mask, a liveness bit), as docs/kv-cache.md ("What it costs in RAM")
// states it for the two reference models' geometries.
TEST(ColdTierRam, PerWindowIsWhatTheDocsSay) {
  const KvConfig defaults;
  auto per_window = [&](int n_kv_heads, int head_dim) {
    const DigestGeometry g{n_kv_heads, head_dim, defaults.window};
    return ByteLedger::ColdWindowCost(DigestBytes(defaults.cold_digest, g),
                                      defaults.cold_digest_group);
  };
  EXPECT_EQ(per_window(3, 64), 17);   // SmolLM2-135M: 0.28 % of its 6,144-byte fp16 window
  EXPECT_EQ(per_window(1, 256), 19);  // Gemma 3 270M: 0.23 % of its 8,192-byte fp16 window
}

}  // namespace
}  // namespace qevict
