#include "kv/cold_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>

#include "util/error.h"

namespace qevict {
namespace {

TEST(ColdStore, SlotsRoundTripAndAreReused) {
  ColdStore store("", 6144, 100);
  const int32_t a = store.Allocate(), b = store.Allocate();
  std::memset(store.data(a), 0x11, 6144);
  std::memset(store.data(b), 0x22, 6144);
  EXPECT_EQ(store.live_bytes(), 2 * 6144);
  EXPECT_EQ(store.data(a)[6143], 0x11);
  EXPECT_EQ(store.data(b)[0], 0x22);
  store.Free(a);
  EXPECT_EQ(store.Allocate(), a);
  EXPECT_EQ(store.peak_bytes(), 2 * 6144);
  // The file is unlinked at once: nothing is left behind.
  struct stat st;
  EXPECT_NE(stat(store.path().c_str(), &st), 0);
  store.Reset();
  EXPECT_EQ(store.live_bytes(), 0);
}

TEST(ColdStore, FullStoreAndBadDirectoryAreErrors) {
  ColdStore store("", 64, 2);
  store.Allocate();
  store.Allocate();
  EXPECT_THROW(store.Allocate(), Error);
  EXPECT_THROW(ColdStore("/nonexistent/dir", 64, 2), Error);
}

}  // namespace
}  // namespace qevict
