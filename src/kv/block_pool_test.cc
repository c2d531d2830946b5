#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <vector>

namespace qevict {
namespace {

TEST(BlockPool, FreedBlocksAreReusedAndCountersMatchFreeLists) {
  BlockPool pool(1000, 4);
  std::vector<uint32_t> live;
  for (int i = 0; i < 10; ++i) {
    live.push_back(pool.Allocate());
    std::memset(pool.data(live.back()), i, 1000);
  }
  EXPECT_EQ(pool.live_blocks(), 10);
  EXPECT_EQ(pool.live_bytes(), 10000);
  EXPECT_EQ(pool.CountLiveBlocks(), 10);
  const uint32_t freed = live[3];
  pool.Free(freed);
  live.erase(live.begin() + 3);
  EXPECT_EQ(pool.Allocate(), freed);  // the next allocation reuses the freed block
  pool.Free(freed);
  EXPECT_EQ(pool.live_bytes(), 9000);
  EXPECT_EQ(pool.CountLiveBlocks(), 9);
  // Contents of other blocks are untouched.
  for (uint32_t h : live) {
    const uint8_t first = pool.data(h)[0];
    EXPECT_TRUE(std::all_of(pool.data(h), pool.data(h) + 1000, [&](uint8_t b) { return b == first; }));
  }
  EXPECT_EQ(pool.peak_live_bytes(), 10000);
}

TEST(BlockPool, EmptySlabsGoBackToTheOs) {
  BlockPool pool(4096, 8);
  std::vector<uint32_t> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(pool.Allocate());
  const int64_t reserved_full = pool.reserved_bytes();
  EXPECT_GE(reserved_full, 64 * 4096);
  for (uint32_t h : blocks) pool.Free(h);
  EXPECT_EQ(pool.live_bytes(), 0);
  EXPECT_EQ(pool.CountLiveBlocks(), 0);
  EXPECT_LE(pool.reserved_bytes(), 8 * 4096);  // at most one spare slab stays mapped
  pool.Reset();
  EXPECT_EQ(pool.reserved_bytes(), 0);
}

TEST(BlockPool, RandomChurnKeepsCountsConsistent) {
  BlockPool pool(333, 16);
  std::mt19937 rng(5);
  std::vector<uint32_t> live;
  std::set<uint32_t> unique;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const uint32_t h = pool.Allocate();
      ASSERT_TRUE(unique.insert(h).second) << "handle handed out twice";
      live.push_back(h);
    } else {
      const size_t i = rng() % live.size();
      pool.Free(live[i]);
      unique.erase(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
    if (step % 997 == 0) {
      ASSERT_EQ(pool.CountLiveBlocks(), static_cast<int64_t>(live.size()));
    }
  }
  EXPECT_EQ(pool.live_blocks(), static_cast<int64_t>(live.size()));
  EXPECT_EQ(pool.CountLiveBlocks(), static_cast<int64_t>(live.size()));
}

// Survivors scattered over many slabs: compaction moves them into the fewest slabs, keeps every
// block's bytes under its new handle and returns every other slab to the OS.
TEST(BlockPool, CompactionFillsTheFewestSlabsAndUnmapsTheRest) {
  constexpr int kPerSlab = 8;
  BlockPool pool(1000, kPerSlab);
  std::vector<uint32_t> all;
  for (int i = 0; i < 80; ++i) all.push_back(pool.Allocate());  // 10 full slabs
  std::mt19937 rng(3);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<uint32_t> live(all.begin(), all.begin() + 21);  // one survivor in four, scattered
  for (size_t i = 21; i < all.size(); ++i) pool.Free(all[i]);
  for (size_t i = 0; i < live.size(); ++i) std::memset(pool.data(live[i]), static_cast<int>(i), 1000);
  ASSERT_GT(pool.reserved_bytes(), 3 * pool.slab_bytes());  // scattered: many slabs still mapped

  std::vector<uint32_t> handles = live;
  int moved_calls = 0;
  const int64_t moved = pool.Compact([&](uint32_t from, uint32_t to) {
    auto it = std::find(handles.begin(), handles.end(), from);
    ASSERT_NE(it, handles.end()) << "relocated a block that is not live";
    *it = to;
    ++moved_calls;
  });
  EXPECT_EQ(moved, moved_calls);
  EXPECT_GT(moved, 0);
  EXPECT_EQ(pool.MinimumSlabs(), 3);  // ceil(21 / 8)
  EXPECT_EQ(pool.reserved_bytes(), 3 * pool.slab_bytes());
  EXPECT_EQ(pool.live_blocks(), 21);
  EXPECT_EQ(pool.CountLiveBlocks(), 21);
  std::set<uint32_t> unique(handles.begin(), handles.end());
  EXPECT_EQ(unique.size(), handles.size());
  for (size_t i = 0; i < handles.size(); ++i) {
    const uint8_t* d = pool.data(handles[i]);
    EXPECT_TRUE(std::all_of(d, d + 1000, [&](uint8_t b) { return b == static_cast<uint8_t>(i); }))
        << "block " << i << " lost its bytes";
  }
  // The pool keeps working: a new block fits in the kept slabs' holes, frees still count.
  const uint32_t extra = pool.Allocate();
  EXPECT_EQ(pool.reserved_bytes(), 3 * pool.slab_bytes());
  pool.Free(extra);
  for (uint32_t h : handles) pool.Free(h);
  EXPECT_EQ(pool.CountLiveBlocks(), 0);
  EXPECT_LE(pool.reserved_bytes(), pool.slab_bytes());
}

TEST(BlockPool, CompactionOfAnEmptyOrDensePoolMovesNothing) {
  BlockPool pool(512, 4);
  EXPECT_EQ(pool.Compact([](uint32_t, uint32_t) { FAIL(); }), 0);
  std::vector<uint32_t> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(pool.Allocate());
  EXPECT_EQ(pool.Compact([](uint32_t, uint32_t) { FAIL(); }), 0);
  EXPECT_EQ(pool.reserved_bytes(), 2 * pool.slab_bytes());
  for (uint32_t h : blocks) pool.Free(h);
  EXPECT_EQ(pool.Compact([](uint32_t, uint32_t) { FAIL(); }), 0);
  EXPECT_EQ(pool.reserved_bytes(), 0);  // even the spare slab goes back
}

}  // namespace
}  // namespace qevict
