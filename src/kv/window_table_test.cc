// The window table alone: layout arithmetic (sinks, windows, the recent region, the band),
// visibility of a query, score modes, the diagnostic view, and the invariants it enforces.
#include "kv/window_table.h"

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace qevict {
namespace {

KvConfig Layout(int window, int sinks, int recent, ScoreMode score = ScoreMode::kCumulative) {
  KvConfig c;
  c.window = window;
  c.sinks = sinks;
  c.recent = recent;
  c.score = score;
  return c;
}

// Stores `tokens` tokens at positions 0, 1, ... in every layer, one fp16 record per window
// (block handles are the window index: the table owns no memory).
void Fill(WindowTable& table, int64_t tokens) {
  for (int li = 0; li < table.n_layers(); ++li) {
    LayerWindows& l = table.layer(li);
    for (int64_t t = l.count; t < tokens; ++t) {
      table.RecordPosition(li, t, static_cast<int32_t>(t));
      if (t == 0 && table.sinks() > 0) l.sink_block = 0;
      if (t >= table.sinks() && (t - table.sinks()) % table.window() == 0) {
        const int32_t index = static_cast<int32_t>((t - table.sinks()) / table.window());
        l.windows.push_back(WindowRecord{static_cast<uint32_t>(index), -1, index, Tier::kFp16,
                                         0.0f, 0.0f, 0.0f});
      }
      ++l.count;
    }
  }
}

TEST(WindowTableTest, LayoutOfSinksWindowsAndTheRecentRegion) {
  WindowTable table(Layout(8, 4, 16), 2, 256);
  Fill(table, 4 + 8 * 10 + 3);  // sinks, 10 full windows, 3 tokens of an 11th
  const LayerWindows& l = table.layer(0);
  EXPECT_EQ(table.SinkTokens(l), 4);
  EXPECT_EQ(table.CreatedWindows(l), 11);
  EXPECT_EQ(table.WindowTokens(l, l.windows.back()), 3);
  EXPECT_EQ(table.ResidentTokens(l), 4 + 80 + 3);
  // 87 tokens, recent 16: windows whose last token is before token 87 - 16 = 71 form the band.
  EXPECT_EQ(table.FirstRecentIndex(l.count), (87 - 16 - 4) / 8);
  EXPECT_EQ(table.BandSize(l), 8u);
  EXPECT_EQ(table.ResidentRecords(), 22);
  EXPECT_NO_THROW(table.CheckInvariants());
}

TEST(WindowTableTest, AQuerySeesTheResidentKeysUpToItsPositionAfterEvictions) {
  WindowTable table(Layout(8, 4, 16), 1, 256);
  Fill(table, 4 + 8 * 6);
  LayerWindows& l = table.layer(0);
  EXPECT_EQ(table.VisibleTo(l, 2), 3);             // inside the sinks
  EXPECT_EQ(table.VisibleTo(l, 4 + 8 + 2), 4 + 8 + 3);
  // Evict window 1: a query after it sees one window fewer.
  l.windows[1].tier = Tier::kEvicted;
  ++l.evicted;
  table.EraseEvicted();
  EXPECT_EQ(table.VisibleTo(l, 4 + 8 * 3 + 0), 4 + 8 * 2 + 1);
  EXPECT_EQ(table.ResidentTokens(l), 4 + 8 * 5);
  EXPECT_NO_THROW(table.CheckInvariants());
  const WindowView view = table.View(0);
  ASSERT_EQ(view.windows.size(), 6u);
  EXPECT_EQ(view.windows[1].tier, Tier::kEvicted);
  EXPECT_EQ(view.windows[2].first_pos, 4 + 16);
  EXPECT_TRUE(view.windows[0].in_band);
  EXPECT_FALSE(view.windows[5].in_band);
}

TEST(WindowTableTest, ScoreModesCombineMassAsConfigured) {
  const float mass[] = {0.0f, 0.5f, 0.25f};  // slot 0: the sinks
  const float last[] = {0.0f, 0.1f, 0.2f};
  const int64_t visible[] = {4 + 8, 4 + 16};  // the first query sees window 0 only
  for (ScoreMode mode : {ScoreMode::kCumulative, ScoreMode::kDecay, ScoreMode::kNormalized}) {
    KvConfig config = Layout(8, 4, 0, mode);
    config.score_decay = 0.5;
    WindowTable table(config, 1, 64);
    Fill(table, 4 + 16);
    LayerWindows& l = table.layer(0);
    table.AddMass(l, mass, last, 2, visible);
    table.AddMass(l, mass, last, 2, visible);
    EXPECT_FLOAT_EQ(l.windows[1].last_mass, 0.2f);
    switch (mode) {
      case ScoreMode::kCumulative:
        EXPECT_FLOAT_EQ(table.ScoreOf(l.windows[0]), 1.0f);
        break;
      case ScoreMode::kDecay:  // (0 * 0.25 + 0.5) * 0.25 + 0.5
        EXPECT_FLOAT_EQ(table.ScoreOf(l.windows[0]), 0.625f);
        break;
      case ScoreMode::kNormalized:  // window 1 was visible to one query of each batch
        EXPECT_FLOAT_EQ(table.ScoreOf(l.windows[0]), 1.0f / 4.0f);
        EXPECT_FLOAT_EQ(table.ScoreOf(l.windows[1]), 0.5f / 2.0f);
        break;
    }
  }
}

TEST(WindowTableTest, BrokenInvariantsAreNamed) {
  auto expect_broken = [](const std::function<void(WindowTable&)>& damage, const char* what) {
    WindowTable table(Layout(8, 4, 16), 2, 256);
    Fill(table, 4 + 8 * 8);
    ASSERT_NO_THROW(table.CheckInvariants());
    damage(table);
    try {
      table.CheckInvariants();
      ADD_FAILURE() << "no invariant broken after: " << what;
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_broken([](WindowTable& t) { t.layer(1).windows.back().tier = Tier::kQuant; },
                "recent window is not fp16");
  expect_broken([](WindowTable& t) { std::swap(t.layer(0).windows[0], t.layer(0).windows[1]); },
                "out of order");
  expect_broken([](WindowTable& t) { t.layer(0).windows.erase(t.layer(0).windows.begin()); },
                "resident + cold + evicted");
  expect_broken([](WindowTable& t) { t.layer(0).count -= 1; }, "more tokens than the layer before");
  expect_broken([](WindowTable& t) { t.layer(0).windows[0].mass_sum = -1.0f; }, "score");
  expect_broken([](WindowTable& t) { t.mutable_positions()[5] = 2; }, "positions");
}

}  // namespace
}  // namespace qevict
