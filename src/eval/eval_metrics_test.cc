// Metrics, policy variants and the summary of the evaluator, without a model.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/eval_report.h"
#include "eval/policy_variant.h"
#include "eval/progress_bar.h"
#include "eval/seq_metrics.h"
#include "util/error.h"

namespace qevict {
namespace {

using nlohmann::json;

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
  EXPECT_EQ(c.query_kernel, 15);
  EXPECT_EQ(c.q_share, base.q_share);
  EXPECT_EQ(ApplyPolicyVariant(base, "snapkv").policy, "snapkv");
  EXPECT_EQ(ApplyPolicyVariant(base, "h2o:h2o_recent_share=0.25").h2o_recent_share, 0.25);
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
  EXPECT_NE(message("qevict:bits=4").find("unknown key 'bits'"), std::string::npos);
  EXPECT_NE(message("qevict:route_every=x").find("not a number"), std::string::npos);
  EXPECT_NE(message("qevict:route_every").find("key=value"), std::string::npos);
  // The query-aware ranking is the policy qevict-qa, not a hidden option of qevict.
  EXPECT_NE(message("qevict:query_aware=true").find("unknown key 'query_aware'"), std::string::npos);
  EXPECT_NE(message("h2o:h2o_recent_share=1.5").find("h2o recent share"), std::string::npos);
  EXPECT_NE(message("qevict:q_share=2").find("--kv-q-share"), std::string::npos);  // Validate
}

json Row(const std::string& task, const std::string& policy, double budget, double accuracy,
         bool infeasible = false) {
  return {{"task", task}, {"policy", policy}, {"budget", budget}, {"accuracy", accuracy},
          {"agreement", 1.0}, {"kl", nullptr}, {"infeasible", infeasible},
          {"kv", {{"peak_bytes", 100}, {"mean_resident_bytes", 50}, {"promotions", 2}}}};
}

TEST(EvalReportTest, GroupsAverageAndTableMarksInfeasible) {
  const std::vector<json> rows = {Row("niah", "full", 1.0, 1.0),  Row("niah", "full", 1.0, 0.0),
                                  Row("niah", "qevict", 0.1, 1.0), Row("niah", "qevict", 0.1, 0.5),
                                  Row("niah", "kivi", 0.1, 0.25, true)};
  const json groups = SummaryGroups(rows);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0]["n"], 2);
  EXPECT_DOUBLE_EQ(groups[0]["accuracy"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(groups[1]["accuracy"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(groups[1]["promotions"].get<double>(), 2.0);
  EXPECT_TRUE(groups[1]["kl"].is_null());
  EXPECT_EQ(groups[2]["infeasible_n"], 1);
  const std::string md = MarkdownTable(groups);
  EXPECT_NE(md.find("| full (n=2) | 0.50 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| qevict | 0.75 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| kivi | 0.25 (inf.) |"), std::string::npos) << md;
}

TEST(EvalReportTest, PromptStylesAreSeparateGroupsLabelledOnlyWhenMixed) {
  auto styled = [](json row, const char* style) {
    row["prompt_style"] = style;
    return row;
  };
  // One style: no label anywhere, the style in each group.
  const std::vector<json> completion = {styled(Row("niah", "full", 1.0, 1.0), "completion"),
                                        styled(Row("niah", "qevict", 0.1, 0.5), "completion")};
  const json one = SummaryGroups(completion);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[0]["prompt_style"], "completion");
  EXPECT_EQ(one[0]["task"], "niah");
  const std::string md_one = MarkdownTable(one);
  EXPECT_NE(md_one.find("### niah — accuracy"), std::string::npos) << md_one;
  EXPECT_EQ(md_one.find("(completion)"), std::string::npos) << md_one;

  // Mixed with chat rows (and rows from before the field, which were chat): the completion
  // rows are their own groups and table, with their own full cache.
  std::vector<json> mixed = {styled(Row("niah", "full", 1.0, 0.0), "chat"),
                             Row("niah", "qevict", 0.1, 0.0)};
  mixed.insert(mixed.end(), completion.begin(), completion.end());
  const json groups = SummaryGroups(mixed);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[1]["prompt_style"], "chat");
  EXPECT_EQ(groups[1]["n"], 1);
  EXPECT_EQ(groups[3]["prompt_style"], "completion");
  EXPECT_DOUBLE_EQ(groups[3]["accuracy"].get<double>(), 0.5);
  const std::string md = MarkdownTable(groups);
  const size_t chat_table = md.find("### niah — accuracy");
  const size_t completion_table = md.find("### niah (completion) — accuracy");
  ASSERT_NE(chat_table, std::string::npos) << md;
  ASSERT_NE(completion_table, std::string::npos) << md;
  EXPECT_NE(md.find("| full (n=1) | 0.00 |", chat_table), std::string::npos) << md;
  EXPECT_NE(md.find("| full (n=1) | 1.00 |", completion_table), std::string::npos) << md;
  EXPECT_NE(md.find("| qevict | 0.50 |", completion_table), std::string::npos) << md;
}

TEST(ProgressBarTest, FormatsDurations) {
  EXPECT_EQ(FormatDuration(12.2), "12s");
  EXPECT_EQ(FormatDuration(245), "4m05s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
}

}  // namespace
}  // namespace qevict
