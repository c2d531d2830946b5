// The summary (cells, comparisons), the tables and the policy families, without a model.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>

#include "eval/eval_report.h"
#include "eval/eval_rows.h"

namespace qevict {
namespace {

using nlohmann::json;

// A question-task row; length 0 and no depth, as task-file rows have.
json Row(const std::string& policy, double budget, const std::string& id, double accuracy,
         const std::string& mode = "", int64_t length = 0, std::optional<double> depth = {}) {
  json row = {{"model", "m"},           {"seed", 1},
              {"task", "niah"},         {"id", id},
              {"kind", "questions"},    {"policy", policy},
              {"budget", budget},       {"accuracy", accuracy},
              {"agreement", nullptr},   {"kl", nullptr},
              {"infeasible", false},    {"target_tokens", length},
              {"prompt_style", "chat"}, {"depth", depth ? json(*depth) : json(nullptr)},
              {"kv", {{"peak_bytes", 100}, {"mean_resident_bytes", 50}, {"promotions", 2}}}};
  row["prefill_mode"] = !mode.empty() ? mode : IsFullPolicy(policy) ? "full" : "bounded";
  return row;
}

std::vector<json> Select(const json& items, const std::function<bool(const json&)>& keep) {
  std::vector<json> out;
  for (const json& j : items) {
    if (keep(j)) out.push_back(j);
  }
  return out;
}

// Paired rows of two policies: `a_wins` instances only a answers, `b_wins` only b, `both` both,
// the rest neither.
std::vector<json> PairedRows(int n, int a_wins, int b_wins, int both) {
  std::vector<json> rows;
  for (int i = 0; i < n; ++i) {
    const std::string id = std::string("i").append(std::to_string(i));
    const bool a = i < a_wins || (i >= a_wins + b_wins && i < a_wins + b_wins + both);
    const bool b = (i >= a_wins && i < a_wins + b_wins) || (i >= a_wins + b_wins && i < a_wins + b_wins + both);
    rows.push_back(Row("qevict", 0.1, id, a ? 1.0 : 0.0));
    rows.push_back(Row("snapkv", 0.1, id, b ? 1.0 : 0.0));
  }
  return rows;
}

TEST(PolicyFamilyTest, StripsTagsAndOptionsAndJoinsQevictVariants) {
  EXPECT_EQ(PolicyFamily("qevict"), "qevict");
  EXPECT_EQ(PolicyFamily("qevict-qa"), "qevict");
  EXPECT_EQ(PolicyFamily("qevict-qa:query_kernel=15"), "qevict");
  EXPECT_EQ(PolicyFamily("qevict:recovery=exact:route_every=2"), "qevict");
  EXPECT_EQ(PolicyFamily("qevict:recovery=exact[bits4]"), "qevict");
  EXPECT_EQ(PolicyFamily("h2o[bits4]"), "h2o");
  EXPECT_EQ(PolicyFamily("snapkv:snapkv_kernel=31"), "snapkv");
  EXPECT_EQ(PolicyFamily("full[bits4]"), "full");
  EXPECT_EQ(PolicyFamily("pyramidkv"), "pyramidkv");
  EXPECT_TRUE(IsFullPolicy("full[bits4]"));
  EXPECT_FALSE(IsFullPolicy("fullish"));
  EXPECT_EQ(ModelName("models/SmolLM2-135M-Instruct.Q4_1.gguf"), "SmolLM2-135M-Instruct.Q4_1");
  EXPECT_EQ(ModelName("/x/gemma.bin"), "gemma.bin");
}

TEST(EvalSummaryTest, CellsCarryMeansIntervalsAndKv) {
  std::vector<json> rows = {Row("full", 1.0, "a", 1.0), Row("full", 1.0, "b", 0.0),
                            Row("qevict", 0.1, "a", 1.0), Row("qevict", 0.1, "b", 0.5),
                            Row("kivi", 0.1, "a", 0.25), Row("kivi", 0.1, "b", 0.25)};
  rows[4]["infeasible"] = true;
  rows[2]["kl"] = 0.0;  // one number is enough for a metric to appear
  rows[2]["kv"]["cold_bytes"] = 8192;  // the cold tier's bytes: a mean over the rows with some
  rows[3]["kv"]["cold_bytes"] = 0;
  const json s = SummarizeRows(rows);
  EXPECT_EQ(s["format"], 2);
  const json& cells = s["cells"];
  ASSERT_EQ(cells.size(), 3u);  // no lengths: pooled cells only
  const json& full = cells[0];
  EXPECT_EQ(full["policy"], "full");
  EXPECT_EQ(full["family"], "full");
  EXPECT_EQ(full["prefill_mode"], "full");
  EXPECT_EQ(full["model"], "m");
  EXPECT_TRUE(full["length"].is_null());
  EXPECT_TRUE(full["depth"].is_null());
  EXPECT_EQ(full["n"], 2);
  const json& acc = full["metrics"]["accuracy"];
  EXPECT_EQ(acc["interval"], "wilson");
  EXPECT_DOUBLE_EQ(acc["mean"].get<double>(), 0.5);
  EXPECT_EQ(acc["n"], 2);
  EXPECT_FALSE(full["metrics"].contains("agreement"));  // null in every row
  EXPECT_FALSE(full["metrics"].contains("kl"));
  EXPECT_DOUBLE_EQ(full["kv"]["peak_bytes"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(full["kv"]["promotions"].get<double>(), 2.0);
  EXPECT_TRUE(full["kv"]["evictions"].is_null());
  EXPECT_TRUE(full["kv"].contains("peak_rss_bytes"));
  EXPECT_TRUE(full["kv"]["cold_bytes"].is_null());

  const json& qevict = cells[1];
  const json& q = qevict["metrics"]["accuracy"];
  EXPECT_EQ(q["interval"], "bootstrap");  // 0.5 is not binary
  EXPECT_DOUBLE_EQ(q["mean"].get<double>(), 0.75);
  EXPECT_GE(q["lo"].get<double>(), 0.5);
  EXPECT_LE(q["hi"].get<double>(), 1.0);
  ASSERT_TRUE(qevict["metrics"].contains("kl"));
  EXPECT_EQ(qevict["metrics"]["kl"]["interval"], "bootstrap");  // KL is no proportion
  EXPECT_EQ(qevict["metrics"]["kl"]["n"], 1);
  EXPECT_EQ(cells[2]["infeasible_n"], 1);
  EXPECT_EQ(qevict["infeasible_n"], 0);
  EXPECT_DOUBLE_EQ(qevict["kv"]["cold_bytes"].get<double>(), 4096.0);

  // The numbers do not depend on the order the rows came in.
  std::reverse(rows.begin(), rows.end());
  const json again = SummarizeRows(rows);
  const auto qevict_again =
      Select(again["cells"], [](const json& c) { return c["policy"] == "qevict"; });
  ASSERT_EQ(qevict_again.size(), 1u);
  EXPECT_EQ(qevict_again[0]["metrics"], qevict["metrics"]);
}

TEST(EvalSummaryTest, OlderRowsReadAsModelUnknownAndSeedNull) {
  json row = Row("qevict", 0.1, "a", 1.0);
  row.erase("model");
  row.erase("seed");
  row.erase("prefill_mode");
  row.erase("prompt_style");
  const RowFields f = ReadRowFields(row);
  EXPECT_EQ(f.model, "");
  EXPECT_TRUE(f.seed.is_null());
  EXPECT_EQ(f.prefill_mode, "prompt-end");
  EXPECT_EQ(f.prompt_style, "chat");
  EXPECT_EQ(f.protocol, "question-in-prompt");
  EXPECT_EQ(f.scorer, "substring");
  json full = Row("full", 1.0, "a", 1.0);
  full.erase("prefill_mode");
  EXPECT_EQ(ReadRowFields(full).prefill_mode, "full");
  const json cell = SummarizeRows({row})["cells"][0];
  EXPECT_EQ(cell["model"], "");
  EXPECT_EQ(cell["prefill_mode"], "prompt-end");
  EXPECT_EQ(cell["protocol"], "question-in-prompt");
  EXPECT_EQ(cell["scorer"], "substring");
}

// Rows of another protocol or scorer never share a cell or a comparison with the others; rows
// that name the defaults are the same as rows written before the fields existed, and get the
// same intervals.
TEST(EvalSummaryTest, ProtocolsAndScorersAreKeptApart) {
  std::vector<json> rows = PairedRows(12, 6, 1, 2);
  const json before = SummarizeRows(rows);
  for (json& r : rows) {
    r["protocol"] = "question-in-prompt";
    r["scorer"] = "substring";
  }
  EXPECT_EQ(SummarizeRows(rows), before);
  const size_t n = rows.size();
  for (size_t i = 0; i < n; ++i) {
    json context_only = rows[i];
    context_only["protocol"] = "context-only";
    context_only["accuracy"] = 0.0;
    rows.push_back(context_only);
    json f1 = rows[i];
    f1["scorer"] = "f1";
    f1["accuracy"] = 0.5;
    rows.push_back(f1);
  }
  const json s = SummarizeRows(rows);
  ASSERT_EQ(s["cells"].size(), 3u * before["cells"].size());
  for (const json& c : s["cells"]) {
    SCOPED_TRACE(c.dump());
    const double mean = c["metrics"]["accuracy"]["mean"];
    EXPECT_EQ(c["n"], 12);
    if (c["protocol"] == "context-only") {
      EXPECT_EQ(mean, 0.0);
    } else if (c["scorer"] == "f1") {
      EXPECT_EQ(c["protocol"], "question-in-prompt");
      EXPECT_EQ(mean, 0.5);
    } else {
      EXPECT_EQ(c["scorer"], "substring");
      EXPECT_EQ(c, Select(before["cells"], [&](const json& b) {
                     return b["policy"] == c["policy"];
                   }).at(0));
    }
  }
  // One comparison of the two policies per (protocol, scorer), each on its own 12 instances.
  ASSERT_EQ(s["comparisons"].size(), 3u);
  std::set<std::string> seen;
  for (const json& c : s["comparisons"]) {
    EXPECT_EQ(c["n"], 12);
    seen.insert(c["protocol"].get<std::string>() + "/" + c["scorer"].get<std::string>());
  }
  EXPECT_EQ(seen, (std::set<std::string>{"question-in-prompt/substring",
                                         "context-only/substring", "question-in-prompt/f1"}));
  EXPECT_EQ(s["comparisons"][0], before["comparisons"][0]);
}

// Rows at a budget of the global layers (--kv-budget-scope global) are cells, comparisons,
// table columns and row keys of their own; rows without the field read as the default scope.
TEST(EvalSummaryTest, BudgetScopesAreKeptApart) {
  std::vector<json> rows = PairedRows(12, 6, 1, 2);
  const json before = SummarizeRows(rows);
  for (const json& c : before["cells"]) EXPECT_EQ(c["budget_scope"], "all");
  json named = rows[0];
  named["budget_scope"] = "all";
  EXPECT_EQ(RowKey(ReadRowFields(named)), RowKey(ReadRowFields(rows[0])));
  EXPECT_EQ(ReadRowFields(rows[0]).budget_scope, "all");
  const size_t n = rows.size();
  for (size_t i = 0; i < n; ++i) {
    json global = rows[i];
    global["budget_scope"] = "global";
    global["accuracy"] = 0.0;
    rows.push_back(global);
  }
  EXPECT_NE(RowKey(ReadRowFields(rows[n])), RowKey(ReadRowFields(rows[0])));
  const json s = SummarizeRows(rows);
  ASSERT_EQ(s["cells"].size(), 2u * before["cells"].size());
  for (const json& c : s["cells"]) {
    SCOPED_TRACE(c.dump());
    EXPECT_EQ(c["n"], 12);
    if (c["budget_scope"] == "global") {
      EXPECT_EQ(c["metrics"]["accuracy"]["mean"], 0.0);
    } else {
      EXPECT_EQ(c, Select(before["cells"], [&](const json& b) {
                     return b["policy"] == c["policy"];
                   }).at(0));  // the default scope's cells are unchanged, bootstrap included
    }
  }
  ASSERT_EQ(s["comparisons"].size(), 2u);
  EXPECT_EQ(s["comparisons"][0], before["comparisons"][0]);
  EXPECT_EQ(s["comparisons"][1]["budget_scope"], "global");
  EXPECT_EQ(s["comparisons"][1]["n"], 12);
  const std::string md = MarkdownTable(s);
  EXPECT_NE(md.find("| policy | 0.10 | 0.10 global |"), std::string::npos) << md;
  EXPECT_NE(md.find("| qevict (n=12) | 0.67 [0.39, 0.86] | 0.00 [0.00, 0.24] |"), std::string::npos)
      << md;
}

TEST(EvalSummaryTest, LevelsFollowWhatTheRowsHave) {
  std::vector<json> rows;
  for (int64_t length : {2048, 4096}) {
    for (double depth : {0.1, 0.9}) {
      rows.push_back(Row("qevict", 0.1, "d" + std::to_string(length) + std::to_string(depth),
                         1.0, "", length, depth));
    }
  }
  rows.push_back(Row("snapkv", 0.1, "x", 1.0, "", 2048));  // a length, no depth
  rows.push_back(Row("h2o", 0.1, "y", 1.0));              // neither
  const json cells = SummarizeRows(rows)["cells"];
  auto of = [&](const std::string& policy) {
    return Select(cells, [&](const json& c) { return c["policy"] == policy; });
  };
  const auto qevict = of("qevict");
  ASSERT_EQ(qevict.size(), 1u + 2u + 4u);  // pooled, per length, per (length, depth)
  EXPECT_TRUE(qevict[0]["length"].is_null());
  EXPECT_EQ(qevict[0]["n"], 4);
  EXPECT_EQ(qevict[1]["length"], 2048);
  EXPECT_TRUE(qevict[1]["depth"].is_null());
  EXPECT_EQ(qevict[1]["n"], 2);
  EXPECT_EQ(qevict[2]["length"], 4096);
  EXPECT_EQ(qevict[3]["length"], 2048);
  EXPECT_DOUBLE_EQ(qevict[3]["depth"].get<double>(), 0.1);
  EXPECT_EQ(qevict[3]["n"], 1);
  EXPECT_DOUBLE_EQ(qevict[6]["depth"].get<double>(), 0.9);
  EXPECT_EQ(qevict[6]["length"], 4096);
  const auto snapkv = of("snapkv");
  ASSERT_EQ(snapkv.size(), 2u);
  EXPECT_TRUE(snapkv[1]["depth"].is_null());
  EXPECT_EQ(snapkv[1]["length"], 2048);
  EXPECT_EQ(of("h2o").size(), 1u);
}

TEST(EvalSummaryTest, ClearWinIsAVerdict) {
  // qevict answers 10 of 30 instances snapkv misses, snapkv none that qevict misses.
  const json comparisons = SummarizeRows(PairedRows(30, 10, 0, 8))["comparisons"];
  ASSERT_EQ(comparisons.size(), 1u);
  const json& c = comparisons[0];
  EXPECT_EQ(c["a"], "qevict");
  EXPECT_EQ(c["b"], "snapkv");
  EXPECT_EQ(c["metric"], "accuracy");
  EXPECT_EQ(c["higher_is_better"], true);
  EXPECT_EQ(c["same_family"], false);
  EXPECT_EQ(c["n"], 30);
  EXPECT_EQ(c["a_only"], 10);
  EXPECT_EQ(c["b_only"], 0);
  EXPECT_NEAR(c["p"].get<double>(), 2.0 / 1024.0, 1e-12);
  EXPECT_NEAR(c["mean_a"].get<double>(), 18.0 / 30.0, 1e-12);
  EXPECT_NEAR(c["mean_b"].get<double>(), 8.0 / 30.0, 1e-12);
  EXPECT_NEAR(c["diff"].get<double>(), 10.0 / 30.0, 1e-12);
  EXPECT_GT(c["lo"].get<double>(), 0.0);
  EXPECT_EQ(c["verdict"], "a");
  EXPECT_EQ(c["prefill_mode"], "bounded");
  EXPECT_DOUBLE_EQ(c["budget"].get<double>(), 0.1);
  EXPECT_TRUE(c["length"].is_null());
  // The same the other way round.
  const json reversed = SummarizeRows(PairedRows(30, 0, 10, 8))["comparisons"][0];
  EXPECT_EQ(reversed["verdict"], "b");
  EXPECT_EQ(reversed["b_only"], 10);
}

TEST(EvalSummaryTest, ThreeWinsAreNoVerdict) {
  const json c = SummarizeRows(PairedRows(30, 3, 0, 10))["comparisons"][0];
  EXPECT_EQ(c["a_only"], 3);
  EXPECT_NEAR(c["p"].get<double>(), 0.25, 1e-12);
  EXPECT_EQ(c["verdict"], "none");
  // No difference at all: nothing either way.
  const json tie = SummarizeRows(PairedRows(20, 0, 0, 10))["comparisons"][0];
  EXPECT_DOUBLE_EQ(tie["p"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(tie["lo"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(tie["hi"].get<double>(), 0.0);
  EXPECT_EQ(tie["verdict"], "none");
}

TEST(EvalSummaryTest, PairsOnlySharedInstances) {
  std::vector<json> rows;
  for (int i = 0; i < 10; ++i) rows.push_back(Row("qevict", 0.1, "i" + std::to_string(i), 1.0));
  for (int i = 5; i < 15; ++i) {
    rows.push_back(Row("snapkv", 0.1, "i" + std::to_string(i), i < 10 ? 0.0 : 1.0));
  }
  // The same id under another seed is another instance.
  json other_seed = Row("snapkv", 0.1, "i0", 1.0);
  other_seed["seed"] = 2;
  rows.push_back(other_seed);
  const json c = SummarizeRows(rows)["comparisons"][0];
  EXPECT_EQ(c["n"], 5);
  EXPECT_DOUBLE_EQ(c["mean_a"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(c["mean_b"].get<double>(), 0.0);
  EXPECT_EQ(c["a_only"], 5);
  EXPECT_NEAR(c["p"].get<double>(), 0.0625, 1e-12);
  EXPECT_EQ(c["verdict"], "none");  // the interval excludes 0, McNemar does not
  // Without any shared instance there is no comparison.
  const json none = SummarizeRows({Row("qevict", 0.1, "a", 1.0), Row("snapkv", 0.1, "b", 0.0)});
  EXPECT_TRUE(none["comparisons"].empty());
}

TEST(EvalSummaryTest, FullJoinsEveryPrefillModeAndFamiliesAreMarked) {
  std::vector<json> rows;
  for (int i = 0; i < 4; ++i) {
    const std::string id = std::string("i").append(std::to_string(i));
    rows.push_back(Row("full", 1.0, id, 1.0, "", 2048));
    for (const char* mode : {"bounded", "prompt-end"}) {
      for (double budget : {0.1, 0.2}) {
        rows.push_back(Row("qevict", budget, id, 1.0, mode, 2048));
        rows.push_back(Row("qevict-qa:query_kernel=15", budget, id, 0.0, mode, 2048));
      }
    }
  }
  const json comparisons = SummarizeRows(rows)["comparisons"];
  // 2 modes x 2 budgets x (pooled + 2048) x 3 pairs.
  ASSERT_EQ(comparisons.size(), 2u * 2u * 2u * 3u);
  const json& first = comparisons[0];
  EXPECT_EQ(first["a"], "full");
  EXPECT_EQ(first["b"], "qevict");
  EXPECT_EQ(first["prefill_mode"], "bounded");
  EXPECT_EQ(first["same_family"], false);
  EXPECT_EQ(comparisons[1]["b"], "qevict-qa:query_kernel=15");
  EXPECT_EQ(comparisons[2]["a"], "qevict");
  EXPECT_EQ(comparisons[2]["same_family"], true);
  EXPECT_EQ(comparisons[2]["diff"], 1.0);
  const auto prompt_end = Select(comparisons, [](const json& c) {
    return c["prefill_mode"] == "prompt-end" && c["a"] == "full" && c["b"] == "qevict";
  });
  ASSERT_EQ(prompt_end.size(), 4u);  // 2 budgets x (pooled + 2048)
  EXPECT_EQ(prompt_end[0]["n"], 4);
  EXPECT_TRUE(prompt_end[0]["length"].is_null());
  EXPECT_EQ(prompt_end[1]["length"], 2048);
}

// Runs A and B hold the same instances; B's full cache answers one more of them (another build
// can). Each policy is paired with the full-cache rows its own run made; the cells show the
// latest ones; a run without full-cache rows pairs with the latest.
TEST(EvalSummaryTest, PoliciesArePairedWithTheFullCacheOfTheirOwnRun) {
  std::vector<json> run_a, run_b, run_c;
  for (int i = 0; i < 10; ++i) {
    const std::string id = std::string("i").append(std::to_string(i));
    run_a.push_back(Row("full", 1.0, id, i == 0 ? 0.0 : 1.0));
    run_a.push_back(Row("snapkv", 0.1, id, i == 0 ? 0.0 : 1.0));  // as run A's full cache
    run_b.push_back(Row("full", 1.0, id, 1.0));
    run_b.push_back(Row("qevict", 0.1, id, 1.0));
    run_c.push_back(Row("quest", 0.1, id, 1.0));
  }
  MergedRows merged;
  merged.Add(run_a);
  merged.Add(run_b);
  merged.Add(run_c);
  ASSERT_EQ(merged.earlier_full.size(), 10u);
  const json s = SummarizeRows(merged);
  const auto full_cell = Select(s["cells"], [](const json& c) { return c["policy"] == "full"; });
  ASSERT_EQ(full_cell.size(), 1u);
  EXPECT_EQ(full_cell[0]["n"], 10);  // run A's replaced rows count in no cell
  EXPECT_EQ(full_cell[0]["metrics"]["accuracy"]["mean"], 1.0);
  auto versus_full = [&](const std::string& policy) {
    const auto found = Select(s["comparisons"], [&](const json& c) {
      return c["a"] == "full" && c["b"] == policy;
    });
    EXPECT_EQ(found.size(), 1u) << policy;
    return found.empty() ? json() : found[0];
  };
  const json snapkv = versus_full("snapkv");
  EXPECT_EQ(snapkv["n"], 10);
  EXPECT_EQ(snapkv["diff"], 0.0);  // against run A's full cache, not run B's (+0.1)
  EXPECT_EQ(snapkv["full_from_own_run"], 10);
  const json qevict = versus_full("qevict");
  EXPECT_EQ(qevict["diff"], 0.0);
  EXPECT_EQ(qevict["full_from_own_run"], 10);
  const json quest = versus_full("quest");
  EXPECT_EQ(quest["n"], 10);
  EXPECT_EQ(quest["diff"], 0.0);  // the latest full-cache rows (run B's)
  EXPECT_EQ(quest["full_from_own_run"], 0);
  // Policies are paired with each other as before: their latest rows.
  const auto qevict_snapkv = Select(s["comparisons"], [](const json& c) {
    return c["a"] == "snapkv" && c["b"] == "qevict";
  });
  ASSERT_EQ(qevict_snapkv.size(), 1u);
  EXPECT_DOUBLE_EQ(qevict_snapkv[0]["diff"].get<double>(), -0.1);
  EXPECT_FALSE(qevict_snapkv[0].contains("full_from_own_run"));
  // One run: every pair is of its own run, as `qevict eval` writes its summary.
  const json single = SummarizeRows(run_a);
  const auto own = Select(single["comparisons"], [](const json& c) { return c["a"] == "full"; });
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0]["full_from_own_run"], 10);
}

TEST(EvalSummaryTest, KlIsComparedLowerIsBetter) {
  std::vector<json> rows;
  for (int i = 0; i < 12; ++i) {
    const std::string id = "p" + std::to_string(i);
    for (const auto& [policy, kl] : {std::pair<const char*, double>{"h2o", 0.5 + 0.01 * i},
                                     {"qevict", 0.1 + 0.01 * (i % 3)}}) {
      json row = Row(policy, 0.1, id, 0.9);
      row["task"] = "ppl";
      row["kl"] = kl;
      rows.push_back(row);
    }
  }
  const json c = SummarizeRows(rows)["comparisons"][0];
  EXPECT_EQ(c["metric"], "kl");
  EXPECT_EQ(c["higher_is_better"], false);
  EXPECT_EQ(c["a"], "h2o");
  EXPECT_GT(c["diff"].get<double>(), 0.0);
  EXPECT_TRUE(c["p"].is_null());
  EXPECT_TRUE(c["a_only"].is_null());
  EXPECT_EQ(c["verdict"], "b");  // qevict's KL is lower
  const json longgen = SummarizeRows({[] {
    json r = Row("qevict", 0.1, "g", 0.5);
    r["task"] = "longgen";
    r["edit_similarity"] = 0.5;
    return r;
  }()});
  EXPECT_TRUE(longgen["comparisons"].empty());
  EXPECT_EQ(PrimaryMetric("longgen", false), "edit_similarity");
  EXPECT_EQ(PrimaryMetric("ppl", true), "kl");
  EXPECT_EQ(PrimaryMetric("file", false), "accuracy");
}

TEST(EvalTableTest, ValuesWithIntervalsAndInfeasibleMarks) {
  std::vector<json> rows = {Row("full", 1.0, "a", 1.0), Row("full", 1.0, "b", 0.0),
                            Row("qevict", 0.1, "a", 1.0), Row("qevict", 0.1, "b", 0.5),
                            Row("kivi", 0.1, "a", 0.25), Row("kivi", 0.1, "b", 0.25),
                            Row("qevict", 0.2, "a", 1.0), Row("qevict", 0.2, "b", 1.0)};
  rows[4]["infeasible"] = true;
  const std::string md = MarkdownTable(SummarizeRows(rows));
  EXPECT_NE(md.find("### niah — accuracy, bounded prefill"), std::string::npos) << md;
  EXPECT_NE(md.find("| policy | 0.10 | 0.20 |"), std::string::npos) << md;
  // Wilson 1 of 2: [0.09, 0.91], in both columns.
  EXPECT_NE(md.find("| full (n=2) | 0.50 [0.09, 0.91] | 0.50 [0.09, 0.91] |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| qevict (n=2) | 0.75 [0.50, 1.00] | 1.00 [0.34, 1.00] |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| kivi (n=2) | 0.25 [0.25, 0.25] (inf.) | — |"), std::string::npos) << md;
}

TEST(EvalTableTest, OnlyTheFullCacheGetsOneColumn) {
  const std::string md =
      MarkdownTable(SummarizeRows({Row("full", 1.0, "a", 1.0), Row("full", 1.0, "b", 1.0)}));
  EXPECT_NE(md.find("### niah — accuracy\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| policy | 1.00 |\n|---|---:|\n| full (n=2) | 1.00 [0.34, 1.00] |"),
            std::string::npos)
      << md;
}

TEST(EvalTableTest, PerLengthTablesPrefillModesAndKl) {
  std::vector<json> rows;
  for (int64_t length : {2048, 4096}) {
    rows.push_back(Row("full", 1.0, "f" + std::to_string(length), 1.0, "", length));
    rows.push_back(Row("qevict", 0.1, "f" + std::to_string(length), 0.0, "prompt-end", length));
  }
  std::string md = MarkdownTable(SummarizeRows(rows));
  const size_t pooled = md.find("### niah — accuracy, prompt-end prefill");
  const size_t at_2048 = md.find("### niah at 2048 tokens — accuracy, prompt-end prefill");
  const size_t at_4096 = md.find("### niah at 4096 tokens — accuracy, prompt-end prefill");
  ASSERT_NE(pooled, std::string::npos) << md;
  ASSERT_NE(at_2048, std::string::npos) << md;
  ASSERT_NE(at_4096, std::string::npos) << md;
  EXPECT_LT(pooled, at_2048);
  EXPECT_LT(at_2048, at_4096);
  EXPECT_NE(md.find("| full (n=2) |", pooled), std::string::npos) << md;
  EXPECT_NE(md.find("| full (n=1) |", at_2048), std::string::npos) << md;

  for (json& r : rows) {
    r["task"] = "ppl";
    r["kl"] = r["policy"] == "full" ? 0.0 : 0.01234;
    r["target_tokens"] = 2048;
  }
  md = MarkdownTable(SummarizeRows(rows));
  EXPECT_NE(md.find("### ppl — mean KL to the full cache (lower is better), prompt-end prefill"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| qevict (n=2) | 0.0123 [0.0123, 0.0123] |"), std::string::npos) << md;
  EXPECT_EQ(md.find("2048 tokens"), std::string::npos) << md;  // one length: no per-length table
}

TEST(EvalTableTest, MixedStylesAndModelsAreLabelled) {
  json completion = Row("qevict", 0.1, "a", 1.0);
  completion["prompt_style"] = "completion";
  json other_model = Row("qevict", 0.1, "a", 0.0);
  other_model["model"] = "gemma";
  const std::string md =
      MarkdownTable(SummarizeRows({Row("qevict", 0.1, "a", 0.0), completion, other_model}));
  EXPECT_NE(md.find("### niah, m — accuracy"), std::string::npos) << md;
  EXPECT_NE(md.find("### niah (completion), m — accuracy"), std::string::npos) << md;
  EXPECT_NE(md.find("### niah, gemma — accuracy"), std::string::npos) << md;
  const std::string one = MarkdownTable(SummarizeRows({completion}));
  EXPECT_EQ(one.find("(completion)"), std::string::npos) << one;
  EXPECT_EQ(one.find(", m"), std::string::npos) << one;
}

TEST(EvalTableTest, MixedProtocolsAndScorersGetTablesOfTheirOwn) {
  json context_only = Row("qevict", 0.1, "a", 1.0);
  context_only["protocol"] = "context-only";
  json f1 = Row("qevict", 0.1, "a", 0.5);
  f1["scorer"] = "f1";
  json both = context_only;
  both["prompt_style"] = "completion";
  both["scorer"] = "exact";
  const std::string md = MarkdownTable(
      SummarizeRows({Row("qevict", 0.1, "a", 0.0), context_only, f1, both}));
  EXPECT_NE(md.find("### niah — accuracy"), std::string::npos) << md;
  EXPECT_NE(md.find("### niah (context-only) — accuracy"), std::string::npos) << md;
  EXPECT_NE(md.find("### niah (f1 scorer) — accuracy"), std::string::npos) << md;
  EXPECT_NE(md.find("### niah (completion, context-only, exact scorer) — accuracy"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| qevict (n=1) | 0.50 ["), std::string::npos) << md;
  const std::string one = MarkdownTable(SummarizeRows({context_only}));
  EXPECT_EQ(one.find("(context-only)"), std::string::npos) << one;
}

}  // namespace
}  // namespace qevict
