#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace qevict {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1000, 100003}) {
      for (int64_t grain : {1, 3, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
          ASSERT_LE(0, b);
          ASSERT_LT(b, e);
          ASSERT_LE(e, n);
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << grain;
      }
    }
  }
}

TEST(ThreadPoolTest, ManyShortJobsInARowStayCorrect) {
  // Back-to-back tiny jobs exercise the hand-over between jobs (late workers, republishing).
  ThreadPool pool(4);
  std::atomic<int64_t> total{0};
  for (int job = 0; job < 20000; ++job) {
    pool.ParallelFor(8, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  }
  EXPECT_EQ(total.load(), 8 * 20000);
}

TEST(ThreadPoolTest, SerializesConcurrentCallers) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      for (int job = 0; job < 500; ++job) {
        pool.ParallelFor(100, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 3 * 500 * 100);
}

// A chunk that throws (a cold-store fault inside a parallel routing step) reaches the caller as
// the same exception, on any thread count, from whichever thread ran it; no thread ends, and
// the pool runs the next job normally.
TEST(ThreadPoolTest, AnExceptionInAChunkReachesTheCaller) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t failing : {int64_t{0}, int64_t{37}, int64_t{99}}) {
      std::atomic<int64_t> ran{0};
      try {
        pool.ParallelFor(100, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            if (i == failing) throw std::runtime_error("item " + std::to_string(i));
            ran.fetch_add(1);
          }
        });
        FAIL() << "no exception with " << threads << " threads";
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), "item " + std::to_string(failing));
      }
      EXPECT_LT(ran.load(), 100);
      std::atomic<int64_t> total{0};
      pool.ParallelFor(100, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
      EXPECT_EQ(total.load(), 100) << threads;
    }
  }
}

TEST(ThreadPoolTest, EveryChunkThrowingGivesOneException) {
  ThreadPool pool(4);
  for (int job = 0; job < 200; ++job) {
    EXPECT_THROW(pool.ParallelFor(64, 1, [](int64_t, int64_t) { throw std::logic_error("x"); }),
                 std::logic_error);
  }
  std::atomic<int64_t> total{0};
  pool.ParallelFor(64, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  EXPECT_EQ(total.load(), 64);
}

}  // namespace
}  // namespace qevict
