#include "kv/full_cache.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace qevict {
namespace {

TEST(FullCacheTest, RefusesAContextTheMachineCannotHold) {
  KvGeometry g;
  g.n_layers = 64;
  g.n_heads = 64;
  g.n_kv_heads = 64;
  g.head_dim = 128;
  g.max_tokens = int64_t{1} << 24;  // 32 TiB of fp16 keys and values
  RopeConfig rc;
  rc.rot_dims = 128;
  Rope rope(rc, 16);
  try {
    FullCache cache(g, rope);
    FAIL() << "a 32 TiB cache was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MiB this machine has available"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace qevict
