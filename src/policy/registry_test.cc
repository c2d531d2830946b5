#include "policy/registry.h"

#include <gtest/gtest.h>

#include "kv/full_cache.h"
#include "kv/tiered_cache.h"
#include "kv/kv_test_util.h"
#include "util/error.h"

namespace qevict {
namespace {

TEST(Registry, EveryKnownNameHasADescriptionAndAFactory) {
  const std::vector<std::string> names = PolicyNames();
  ASSERT_EQ(names.size(), KnownKvPolicyNames().size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(names[i], KnownKvPolicyNames()[i]);
    EXPECT_FALSE(PolicyDescription(names[i]).empty());
  }
  EXPECT_THROW(PolicyDescription("lru"), Error);
}

TEST(Registry, CreateKvCacheBuildsTheRightCache) {
  const KvGeometry geo = testing::SmallGeometry();
  const Rope rope(testing::TestRopeConfig(64), 4096);
  for (const std::string& name : PolicyNames()) {
    KvConfig config;
    config.policy = name;
    auto cache = CreateKvCache(config, geo, rope);
    ASSERT_NE(cache, nullptr);
    if (name == "full") {
      EXPECT_NE(dynamic_cast<FullCache*>(cache.get()), nullptr);
    } else {
      auto* tiered = dynamic_cast<TieredCache*>(cache.get());
      ASSERT_NE(tiered, nullptr);
      EXPECT_EQ(tiered->config().policy, name);
    }
  }
  KvConfig bad;
  bad.policy = "nope";
  EXPECT_THROW(CreateKvCache(bad, geo, rope), Error);
  bad = KvConfig{};
  bad.bits = 5;
  EXPECT_THROW(CreateKvCache(bad, geo, rope), Error);
}

}  // namespace
}  // namespace qevict
