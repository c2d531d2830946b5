#include "kv/kv_config.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace qevict {
namespace {

void ExpectRejected(KvConfig config, const std::string& fragment) {
  try {
    config.Validate();
    FAIL() << "accepted a bad config (expected: " << fragment << ")";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(KvConfig, DefaultsFollowTheSpec) {
  KvConfig c;
  EXPECT_NO_THROW(c.Validate());
  EXPECT_EQ(c.window, 8);
  EXPECT_EQ(c.sinks, 5);
  EXPECT_EQ(c.recent, 32);
  EXPECT_EQ(c.bits, 2);
  EXPECT_EQ(c.route_every, 8);
  EXPECT_DOUBLE_EQ(c.q_share, 0.5);
  EXPECT_EQ(c.recovery, RecoveryFidelity::kPaper);
  EXPECT_DOUBLE_EQ(c.hysteresis, 0.0);
  EXPECT_EQ(c.score, ScoreMode::kCumulative);
  EXPECT_EQ(c.snapkv_window, 32);
  EXPECT_EQ(c.option("snapkv_kernel"), 7);
  // qevict-qa observes the question like SnapKV, with SnapKV's kernel (not one tuned on the
  // evaluation's tasks); h2o keeps half of its band for the newest windows, as H2O does.
  EXPECT_EQ(c.option("query_kernel"), c.option("snapkv_kernel"));
  EXPECT_DOUBLE_EQ(c.option("h2o_recent_share"), 0.5);
  EXPECT_EQ(c.policy, "qevict");
  EXPECT_DOUBLE_EQ(c.budget, 1.0);
  EXPECT_EQ(c.budget_bytes, -1);
}

TEST(KvConfig, RejectsBadValuesWithClearMessages) {
  KvConfig c;
  c.budget = 0.0;
  ExpectRejected(c, "--kv-budget must be in (0, 1]");
  c.budget = 1.5;
  ExpectRejected(c, "--kv-budget must be in (0, 1]");
  c = KvConfig{};
  c.bits = 3;
  ExpectRejected(c, "--kv-bits must be 2, 4 or 8");
  c = KvConfig{};
  c.window = 0;
  ExpectRejected(c, "--kv-window");
  c = KvConfig{};
  c.policy = "lru";
  ExpectRejected(c, "unknown --kv-policy 'lru'");
  c = KvConfig{};
  c.q_share = 1.2;
  ExpectRejected(c, "--kv-q-share");
  c = KvConfig{};
  c.budget = 0.5;
  c.budget_bytes = 1000;
  ExpectRejected(c, "not both");
  c = KvConfig{};
  c.policy = "full";
  c.budget = 0.2;
  ExpectRejected(c, "full keeps every token");
  c = KvConfig{};
  c.set_option("snapkv_kernel", 4);
  ExpectRejected(c, "odd");
  c = KvConfig{};
  c.route_every = 0;
  ExpectRejected(c, "--kv-route-every");
  c = KvConfig{};
  c.budget_bytes = 0;
  ExpectRejected(c, "--kv-budget-bytes");
  c = KvConfig{};
  c.reconstruction_chunk = 8;
  ExpectRejected(c, "--kv-reconstruction-chunk must be >= 16 tokens");
  c = KvConfig{};
  c.expected_future = 0;
  ExpectRejected(c, "--kv-expected-future must be >= 1");
}

TEST(KvConfig, ParsesEnumsAndListsOptions) {
  EXPECT_EQ(ParseScoreMode("decay"), ScoreMode::kDecay);
  EXPECT_EQ(ParseScoreMode("normalized"), ScoreMode::kNormalized);
  EXPECT_EQ(ParseRecoveryFidelity("exact"), RecoveryFidelity::kExact);
  EXPECT_THROW(ParseScoreMode("sum"), Error);
  EXPECT_THROW(ParseRecoveryFidelity("lossy"), Error);
  EXPECT_EQ(ParseScoreSource("reconstruction"), ScoreSource::kReconstruction);
  EXPECT_EQ(ParseScoreSource("expected-attention"), ScoreSource::kExpectedAttention);
  EXPECT_EQ(ParseScoreSource("key-norm"), ScoreSource::kKeyNorm);
  EXPECT_STREQ(ScoreSourceName(ScoreSource::kKeyNorm), "key-norm");
  EXPECT_THROW(ParseScoreSource("kvzip"), Error);
  EXPECT_EQ(KnownKvPolicyNames().size(), 15u);
  EXPECT_EQ(KnownKvPolicyNames()[9], "qevict-qa");
  EXPECT_EQ(KnownKvPolicyNames()[10], "qevict-zip");
  EXPECT_EQ(KnownKvPolicyNames()[11], "kvzip");
  EXPECT_EQ(KnownKvPolicyNames()[12], "quest");
  EXPECT_EQ(KnownKvPolicyNames()[13], "qevict-recall");
  EXPECT_EQ(KnownKvPolicyNames().back(), "recall-oracle");
  bool q_share_is_choice = false;
  for (const KvOptionDoc& d : KvOptionDocs()) {
    if (std::string(d.flag) == "--kv-q-share") q_share_is_choice = d.our_choice;
  }
  EXPECT_TRUE(q_share_is_choice);
}

}  // namespace
}  // namespace qevict
