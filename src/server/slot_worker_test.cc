#include "server/slot_worker.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

namespace qevict::server {
namespace {

TEST(SlotWorkerTest, RunsEveryTaskOnTheSameOtherThread) {
  SlotWorker worker(1);
  std::thread::id first, second;
  worker.Run([&] { first = std::this_thread::get_id(); });
  worker.Run([&] { second = std::this_thread::get_id(); });
  EXPECT_NE(first, std::this_thread::get_id());
  EXPECT_EQ(first, second);
}

TEST(SlotWorkerTest, RethrowsTheTasksException) {
  SlotWorker worker(2);
  EXPECT_THROW(worker.Run([] { throw std::runtime_error("boom"); }), std::runtime_error);
  int value = 0;
  worker.Run([&] { value = 7; });  // still usable
  EXPECT_EQ(value, 7);
  EXPECT_EQ(worker.pool().size(), 2);
}

}  // namespace
}  // namespace qevict::server
