#include "server/session_cache.h"

#include <gtest/gtest.h>

namespace qevict::server {
namespace {

WindowInfo Window(int64_t index, Tier tier, float score) {
  WindowInfo w;
  w.index = index;
  w.first_token = 4 + index * 8;
  w.n_tokens = 8;
  w.tier = tier;
  w.score = tier == Tier::kEvicted ? 0.0f : score;
  return w;
}

TEST(SessionCacheTest, TierMapCountsLayersPerWindow) {
  std::vector<WindowView> layers(2);
  for (WindowView& v : layers) {
    v.sink_tokens = 4;
    v.window = 8;
  }
  layers[0].windows = {Window(0, Tier::kFp16, 1.0f), Window(1, Tier::kQuant, 0.5f),
                       Window(2, Tier::kEvicted, 0.0f)};
  layers[1].windows = {Window(0, Tier::kQuant, 3.0f), Window(1, Tier::kQuant, 0.5f),
                       Window(2, Tier::kFp16, 2.0f)};
  const nlohmann::json map = TierMapJson(layers);
  EXPECT_EQ(map["layers"], 2);
  EXPECT_EQ(map["sink_tokens"], 4);
  EXPECT_EQ(map["window"], 8);
  EXPECT_EQ(map["by_layer"], nlohmann::json::array({"012", "110"}));
  ASSERT_EQ(map["windows"].size(), 3u);
  const nlohmann::json& w0 = map["windows"][0];
  EXPECT_EQ(w0["first_token"], 4);
  EXPECT_EQ(w0["n_tokens"], 8);
  EXPECT_EQ(w0["fp16"], 1);
  EXPECT_EQ(w0["quant"], 1);
  EXPECT_EQ(w0["evicted"], 0);
  EXPECT_DOUBLE_EQ(w0["mean_score"].get<double>(), 2.0);
  const nlohmann::json& w2 = map["windows"][2];
  EXPECT_EQ(w2["first_token"], 20);
  EXPECT_EQ(w2["evicted"], 1);
  EXPECT_EQ(w2["fp16"], 1);
  EXPECT_DOUBLE_EQ(w2["mean_score"].get<double>(), 2.0);  // evicted layers do not count
}

TEST(SessionCacheTest, NoLayersIsAnEmptyMap) {
  const nlohmann::json map = TierMapJson({});
  EXPECT_EQ(map["layers"], 0);
  EXPECT_TRUE(map["windows"].empty());
}

TEST(SessionCacheTest, BytesUseNullForNoBudgetOrFloor) {
  KvStats stats;
  stats.fp16_bytes = 100;
  stats.quant_bytes = 20;
  stats.meta_bytes = 3;
  stats.reserved_bytes = 4096;
  stats.pool_reserved_bytes = 4000;
  stats.cold_bytes = 77;
  MemoryStats memory;
  memory.rss_bytes = 1 << 20;
  nlohmann::json bytes = CacheBytesJson(stats, memory);
  EXPECT_EQ(bytes["resident"], 123);
  EXPECT_EQ(bytes["reserved"], 4096);
  EXPECT_EQ(bytes["pool_reserved"], 4000);
  EXPECT_EQ(bytes["cold"], 77);
  EXPECT_TRUE(bytes["budget"].is_null());
  EXPECT_TRUE(bytes["floor"].is_null());
  EXPECT_EQ(bytes["process_rss"], 1 << 20);
  stats.budget_bytes = 500;
  stats.floor_bytes = 200;
  bytes = CacheBytesJson(stats, memory);
  EXPECT_EQ(bytes["budget"], 500);
  EXPECT_EQ(bytes["floor"], 200);
}

}  // namespace
}  // namespace qevict::server
