#include "policy/registry.h"

#include <gtest/gtest.h>

#include "kv/full_cache.h"
#include "kv/quest_cache.h"
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

// Each policy registers itself from its own file; their order keys keep the order help texts,
// docs, the evaluator's default rows and these tests rely on.
TEST(Registry, PoliciesKeepTheirOrder) {
  const std::vector<std::string> expected = {"full",   "streaming",     "h2o",          "tova",
                                             "snapkv", "pyramidkv",     "kivi",         "mikv",
                                             "qevict", "qevict-qa",     "qevict-zip",   "kvzip",
                                             "quest",  "qevict-recall", "recall-oracle"};
  EXPECT_EQ(PolicyNames(), expected);
  EXPECT_EQ(PolicyInfos().front().make, nullptr);  // full: not a tiered-cache policy
  for (size_t i = 1; i < PolicyInfos().size(); ++i) {
    EXPECT_LT(PolicyInfos()[i - 1].order, PolicyInfos()[i].order);
    // quest and recall-oracle build their own cache (kv/quest_cache.h); every other policy is
    // a tiered one.
    const bool own_cache =
        PolicyInfos()[i].name == "quest" || PolicyInfos()[i].name == "recall-oracle";
    EXPECT_EQ(PolicyInfos()[i].make != nullptr, !own_cache) << PolicyInfos()[i].name;
    EXPECT_EQ(PolicyInfos()[i].create != nullptr, own_cache) << PolicyInfos()[i].name;
    EXPECT_EQ(PolicyInfos()[i].fork != nullptr, own_cache) << PolicyInfos()[i].name;
    EXPECT_EQ(IsTieredPolicy(PolicyInfos()[i].name), !own_cache) << PolicyInfos()[i].name;
  }
  EXPECT_FALSE(IsTieredPolicy("full"));
  EXPECT_FALSE(IsTieredPolicy("nope"));
}

// kivi's layout hook (its file) makes its window its key group.
TEST(Registry, KiviLaysItsCacheOutInKeyGroups) {
  KvConfig config;
  config.policy = "kivi";
  EXPECT_EQ(PolicyLayout(config).window, 32);
  config.set_option("kivi_group", 16);
  EXPECT_EQ(PolicyLayout(config).window, 16);
  config.policy = "qevict";
  EXPECT_EQ(PolicyLayout(config).window, config.window);
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
    } else if (name == "quest" || name == "recall-oracle") {
      auto* quest = dynamic_cast<QuestCache*>(cache.get());
      ASSERT_NE(quest, nullptr);
      EXPECT_EQ(quest->policy_name(), name);
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
