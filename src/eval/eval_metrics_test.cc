// Metrics, policy variants and the progress bar of the evaluator, without a model (the summary:
// eval_report_test.cc).
#include <gtest/gtest.h>

#include <cmath>

#include "eval/policy_variant.h"
#include "eval/progress_bar.h"
#include "eval/seq_metrics.h"
#include "util/error.h"

namespace qevict {
namespace {

TEST(SeqMetricsTest, TokenAgreementCountsPositions) {
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 9, 4, 5};
  EXPECT_DOUBLE_EQ(TokenAgreement(a, a), 1.0);
  EXPECT_DOUBLE_EQ(TokenAgreement(a, b), 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(TokenAgreement({}, {}), 1.0);
  EXPECT_DOUBLE_EQ(TokenAgreement(a, {}), 0.0);
}

TEST(SeqMetricsTest, EditSimilarityIsOneMinusNormalizedLevenshtein) {
  const std::vector<int32_t> a = {1, 2, 3, 4}, shifted = {0, 1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(EditSimilarity(a, a), 1.0);
  // One insertion: an agreement of 0 by position, but nearly the same text.
  EXPECT_DOUBLE_EQ(TokenAgreement(a, shifted), 0.0);
  EXPECT_DOUBLE_EQ(EditSimilarity(a, shifted), 1.0 - 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(EditSimilarity(std::vector<int32_t>{1, 2}, std::vector<int32_t>{3, 4}), 0.0);
}

TEST(SeqMetricsTest, KlOfLogSoftmax) {
  const std::vector<float> p = {1.0f, 2.0f, 3.0f}, q = {3.0f, 2.0f, 1.0f};
  const std::vector<double> lp = LogSoftmax(p), lq = LogSoftmax(q);
  double sum = 0.0;
  for (double x : lp) sum += std::exp(x);
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(KlDivergence(lp, lp), 0.0, 1e-12);
  double expected = 0.0;
  for (int i = 0; i < 3; ++i) expected += std::exp(lp[i]) * (lp[i] - lq[i]);
  EXPECT_NEAR(KlDivergence(lp, lq), expected, 1e-12);
  EXPECT_GT(KlDivergence(lp, lq), 0.0);
}

TEST(PolicyVariantTest, ChangesOnlyTheNamedOptions) {
  KvConfig base;
  const KvConfig c =
      ApplyPolicyVariant(base, "qevict-qa:recovery=exact:route_every=2:query_kernel=15");
  EXPECT_EQ(c.policy, "qevict-qa");
  EXPECT_EQ(c.recovery, RecoveryFidelity::kExact);
  EXPECT_EQ(c.route_every, 2);
  EXPECT_EQ(c.option("query_kernel"), 15);
  EXPECT_EQ(c.q_share, base.q_share);
  EXPECT_EQ(ApplyPolicyVariant(base, "snapkv").policy, "snapkv");
  EXPECT_EQ(ApplyPolicyVariant(base, "h2o:h2o_recent_share=0.25").option("h2o_recent_share"), 0.25);
}

TEST(PolicyVariantTest, RejectsBadSpecsByName) {
  KvConfig base;
  auto message = [&](const std::string& spec) {
    try {
      ApplyPolicyVariant(base, spec);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("nosuch").find("nosuch"), std::string::npos);
  EXPECT_NE(message("qevict:bits=4").find("'bits' shapes the prefix"), std::string::npos);
  EXPECT_NE(message("qevict:route_every=x").find("route_every: 'x' is not an integer"), std::string::npos);
  EXPECT_NE(message("qevict:route_every").find("key=value"), std::string::npos);
  // The query-aware ranking is the policy qevict-qa, not a hidden option of qevict.
  EXPECT_NE(message("qevict:query_aware=true").find("unknown key 'query_aware'"), std::string::npos);
  EXPECT_NE(message("h2o:h2o_recent_share=1.5").find("--kv-h2o-recent-share must be in [0, 1]"),
            std::string::npos);
  EXPECT_NE(message("qevict:q_share=x").find("q_share: 'x' is not a number"), std::string::npos);
  EXPECT_NE(message("qevict:q_share=2").find("--kv-q-share"), std::string::npos);  // Validate
}

TEST(ProgressBarTest, FormatsDurations) {
  EXPECT_EQ(FormatDuration(12.2), "12s");
  EXPECT_EQ(FormatDuration(245), "4m05s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
}

}  // namespace
}  // namespace qevict
