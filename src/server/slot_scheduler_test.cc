#include "server/slot_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <variant>

namespace qevict::server {
namespace {

using namespace std::chrono_literals;

SchedulerOptions Options(int slots, int64_t limit, int queue) {
  SchedulerOptions o;
  o.slots = slots;
  o.threads_per_slot = 1;
  o.kv_memory_limit = limit;
  o.max_queue = queue;
  o.queue_timeout = 5s;
  return o;
}

SlotLease MustAcquire(SlotScheduler& s, int64_t bytes) {
  auto r = s.Acquire(bytes, "test");
  EXPECT_TRUE(std::holds_alternative<SlotLease>(r));
  return std::move(std::get<SlotLease>(r));
}

void WaitForQueue(const SlotScheduler& s, int queued) {
  for (int i = 0; i < 500 && s.Snapshot().queued != queued; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(s.Snapshot().queued, queued);
}

TEST(SlotSchedulerTest, GivesDistinctSlotsAndReleasesThem) {
  SlotScheduler s(Options(2, 0, 4));
  {
    SlotLease a = MustAcquire(s, 10);
    SlotLease b = MustAcquire(s, 20);
    EXPECT_NE(a.slot(), b.slot());
    EXPECT_EQ(s.Snapshot().active, 2);
    EXPECT_EQ(s.Snapshot().reserved_bytes, 30);
  }
  EXPECT_EQ(s.Snapshot().active, 0);
  EXPECT_EQ(s.Snapshot().reserved_bytes, 0);
}

TEST(SlotSchedulerTest, RequestLargerThanTheLimitIsRejectedAtOnce) {
  SlotScheduler s(Options(1, 1000, 4));
  auto r = s.Acquire(1001, "policy full, 1 prompt + 1 new tokens");
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  const ApiError& e = std::get<ApiError>(r);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "kv_memory_limit_exceeded");
  EXPECT_NE(e.message.find("1001"), std::string::npos);
  EXPECT_NE(e.message.find("1000"), std::string::npos);
}

TEST(SlotSchedulerTest, WaitsForMemoryEvenWithAFreeSlot) {
  SlotScheduler s(Options(2, 1000, 4));
  auto first = std::make_unique<SlotLease>(MustAcquire(s, 700));
  std::atomic<bool> started{false};
  std::thread waiter([&] {
    SlotLease second = MustAcquire(s, 400);
    started = true;
  });
  WaitForQueue(s, 1);
  EXPECT_FALSE(started);
  EXPECT_EQ(s.Snapshot().active, 1);
  first.reset();
  waiter.join();
  EXPECT_TRUE(started);
}

TEST(SlotSchedulerTest, FullQueueIs503) {
  SlotScheduler s(Options(1, 0, 1));
  SlotLease running = MustAcquire(s, 1);
  std::thread waiter([&] { MustAcquire(s, 1); });
  WaitForQueue(s, 1);
  auto r = s.Acquire(1, "test");
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).status, 503);
  EXPECT_EQ(std::get<ApiError>(r).code, "queue_full");
  running = SlotLease();
  waiter.join();
}

TEST(SlotSchedulerTest, FirstComeFirstServed) {
  SlotScheduler s(Options(1, 1000, 4));
  auto running = std::make_unique<SlotLease>(MustAcquire(s, 1000));
  std::vector<int> order;
  std::mutex order_mutex;
  std::thread big([&] {
    SlotLease l = MustAcquire(s, 900);
    std::lock_guard<std::mutex> lock(order_mutex);
    order.push_back(1);
  });
  WaitForQueue(s, 1);
  std::thread small([&] {
    SlotLease l = MustAcquire(s, 10);
    std::lock_guard<std::mutex> lock(order_mutex);
    order.push_back(2);
  });
  WaitForQueue(s, 2);
  running.reset();
  big.join();
  small.join();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(SlotSchedulerTest, TimeoutAndShutdownAre503) {
  SchedulerOptions o = Options(1, 0, 4);
  o.queue_timeout = 50ms;
  SlotScheduler s(o);
  SlotLease running = MustAcquire(s, 1);
  auto timed_out = s.Acquire(1, "test");
  ASSERT_TRUE(std::holds_alternative<ApiError>(timed_out));
  EXPECT_EQ(std::get<ApiError>(timed_out).code, "queue_timeout");
  EXPECT_EQ(s.Snapshot().queued, 0);

  EXPECT_FALSE(running.cancelled());
  s.Shutdown();
  EXPECT_TRUE(running.cancelled());
  auto refused = s.Acquire(1, "test");
  ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
  EXPECT_EQ(std::get<ApiError>(refused).code, "shutting_down");
}

}  // namespace
}  // namespace qevict::server
