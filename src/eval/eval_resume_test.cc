// Tests of earlier rows in an output directory (eval_resume.h), without a model: the refusal,
// reading rows with a torn last line, and which instances --resume runs again.
#include "eval/eval_resume.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "eval/eval_rows.h"
#include "eval/eval_test_files.h"

namespace qevict {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

using eval_test::ErrorOf;
using eval_test::WriteFile;

std::string Dir(const std::string& name) { return eval_test::FreshTempDir("resume_" + name); }

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// Two policies at one budget, prompt-end only: 1 + 1 rows per instance.
EvalSettings Settings() {
  EvalSettings s;
  s.policies = {"full", "qevict"};
  s.budgets = {0.25};
  s.bounded = false;
  s.prompt_end = true;
  s.prompt_style = PromptStyle::kCompletion;
  return s;
}

EvalTask Task(const std::string& id) {
  EvalTask t;
  t.task = "niah";
  t.id = id;
  t.context = "c";
  t.turns.push_back({"q", {"a"}});
  return t;
}

// A row as RunInstance writes it for the settings above (the fields that identify it).
std::string RowLine(const std::string& id, const std::string& policy, const std::string& protocol =
                                                                          "question-in-prompt") {
  const bool full = policy == "full";
  json row = {{"model", "m"},
              {"seed", 7},
              {"task", "niah"},
              {"id", id},
              {"policy", policy},
              {"budget", full ? 1.0 : 0.25},
              {"prefill_mode", full ? "full" : "prompt-end"},
              {"prompt_style", "completion"},
              {"protocol", protocol},
              {"scorer", "substring"},
              {"accuracy", 1.0}};
  return row.dump();
}

TEST(EvalResumeTest, EarlierRowsAreRefusedUnlessAsked) {
  const std::string dir = Dir("refuse");
  const std::string rows = dir + "/rows.jsonl";
  EXPECT_NO_THROW(CheckEarlierRows(rows, false, false));  // no file
  WriteFile(rows, "");
  EXPECT_NO_THROW(CheckEarlierRows(rows, false, false));  // an empty file
  WriteFile(rows, RowLine("a", "full") + "\n");
  const std::string message = ErrorOf([&] { CheckEarlierRows(rows, false, false); });
  EXPECT_NE(message.find("'" + rows + "' already holds rows"), std::string::npos) << message;
  EXPECT_NE(message.find("--overwrite to start over"), std::string::npos) << message;
  EXPECT_NE(message.find("--resume to keep them"), std::string::npos) << message;
  EXPECT_NO_THROW(CheckEarlierRows(rows, true, false));
  EXPECT_NO_THROW(CheckEarlierRows(rows, false, true));
  EXPECT_NE(ErrorOf([&] { CheckEarlierRows(rows, true, true); }).find("exclude each other"),
            std::string::npos);
}

TEST(EvalResumeTest, ReadsWholeRowsAndDropsATornLastLine) {
  const std::string dir = Dir("read");
  const std::string rows = dir + "/rows.jsonl";
  EXPECT_TRUE(ReadEarlierRows(rows).rows.empty());  // no file: nothing
  const std::string a = RowLine("a", "full"), b = RowLine("a", "qevict");
  WriteFile(rows, a + "\n\n" + b + "\n" + b.substr(0, 20));
  const EarlierRows earlier = ReadEarlierRows(rows);
  EXPECT_TRUE(earlier.torn_tail);
  EXPECT_EQ(earlier.lines, (std::vector<std::string>{a, b}));
  ASSERT_EQ(earlier.rows.size(), 2u);
  EXPECT_EQ(earlier.rows[1]["policy"], "qevict");
  EXPECT_EQ(earlier.keys.size(), 2u);
  EXPECT_TRUE(earlier.keys.count(RowKey(ReadRowFields(json::parse(b)))));
  // A whole last line without a break is a row; a bad line before the end is an error.
  WriteFile(rows, a + "\n" + b);
  EXPECT_FALSE(ReadEarlierRows(rows).torn_tail);
  EXPECT_EQ(ReadEarlierRows(rows).rows.size(), 2u);
  WriteFile(rows, a + "\n{\"task\"\n" + b + "\n");
  const std::string message = ErrorOf([&] { ReadEarlierRows(rows); });
  EXPECT_NE(message.find(rows + ":2: not JSON"), std::string::npos) << message;
  WriteFile(rows, a.substr(0, 20) + "\n");
  EXPECT_NE(ErrorOf([&] { ReadEarlierRows(rows); }).find(":1: not JSON"), std::string::npos);
}

TEST(EvalResumeTest, InstanceRowKeysAreThoseOfTheRowsWritten) {
  const std::vector<std::string> keys = InstanceRowKeys(Settings(), Task("a"), "m", 7);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0], RowKey(ReadRowFields(json::parse(RowLine("a", "full")))));
  EXPECT_EQ(keys[1], RowKey(ReadRowFields(json::parse(RowLine("a", "qevict")))));
  EXPECT_NE(keys[1], RowKey(ReadRowFields(json::parse(RowLine("a", "qevict", "context-only")))));
  // A task's own scorer, the tag, both prefill modes.
  EvalSettings s = Settings();
  s.bounded = true;
  s.tag = "bits4";
  EvalTask f1 = Task("a");
  f1.scorer = AnswerScorer::kF1;
  const std::vector<std::string> more = InstanceRowKeys(s, f1, "m", 7);
  ASSERT_EQ(more.size(), 3u);
  json tagged = json::parse(RowLine("a", "qevict[bits4]"));
  tagged["scorer"] = "f1";
  tagged["prefill_mode"] = "bounded";
  EXPECT_EQ(more[1], RowKey(ReadRowFields(tagged)));
}

// The budget scope of the run (--kv-budget-scope) or of a variant is part of a compressed row's
// key; the full cache's row has none.
TEST(EvalResumeTest, InstanceRowKeysCarryTheBudgetScope) {
  EvalSettings s = Settings();
  s.policies = {"full", "qevict", "qevict:budget_scope=global"};
  const std::vector<std::string> keys = InstanceRowKeys(s, Task("a"), "m", 7);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[1], RowKey(ReadRowFields(json::parse(RowLine("a", "qevict")))));
  json global = json::parse(RowLine("a", "qevict:budget_scope=global"));
  global["budget_scope"] = "global";
  EXPECT_EQ(keys[2], RowKey(ReadRowFields(global)));
  global["budget_scope"] = "all";
  EXPECT_NE(keys[2], RowKey(ReadRowFields(global)));

  s.policies = {"full", "qevict"};
  s.kv.budget_scope = BudgetScope::kGlobal;
  const std::vector<std::string> run_scope = InstanceRowKeys(s, Task("a"), "m", 7);
  EXPECT_EQ(run_scope[0], RowKey(ReadRowFields(json::parse(RowLine("a", "full")))));
  json qevict = json::parse(RowLine("a", "qevict"));
  qevict["budget_scope"] = "global";
  EXPECT_EQ(run_scope[1], RowKey(ReadRowFields(qevict)));
  const std::vector<PlannedRow> planned = PlannedRows(s);
  EXPECT_EQ(planned[0].budget_scope, "all");
  EXPECT_EQ(planned[1].budget_scope, "global");
}

// Instance a has every row, b only its full row (the run stopped there), c none; rows of
// another protocol are kept but count for nothing.
TEST(EvalResumeTest, PlanRunsTheInstancesMissingARowAndDropsTheirPartialRows) {
  const std::string dir = Dir("plan");
  const std::string rows = dir + "/rows.jsonl";
  const std::string other = RowLine("c", "full", "context-only");
  WriteFile(rows, RowLine("a", "full") + "\n" + other + "\n" + RowLine("a", "qevict") + "\n" +
                  RowLine("b", "full") + "\n");
  const EarlierRows earlier = ReadEarlierRows(rows);
  const ResumePlan plan =
      PlanResume(earlier, {Task("a"), Task("b"), Task("c")}, Settings(), "m", 7);
  EXPECT_EQ(plan.done, 1);
  EXPECT_EQ(plan.to_run, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(plan.dropped, 1);
  EXPECT_EQ(plan.kept_lines,
            (std::vector<std::string>{RowLine("a", "full"), other, RowLine("a", "qevict")}));
  ASSERT_EQ(plan.kept_rows.size(), 3u);
  EXPECT_EQ(plan.kept_rows[1]["protocol"], "context-only");
  // Another seed or model: nothing is done.
  EXPECT_EQ(PlanResume(earlier, {Task("a")}, Settings(), "m", 8).done, 0);
  EXPECT_EQ(PlanResume(earlier, {Task("a")}, Settings(), "gemma", 7).done, 0);

  RewriteRows(rows, plan.kept_lines);
  EXPECT_EQ(Read(rows), RowLine("a", "full") + "\n" + other + "\n" + RowLine("a", "qevict") + "\n");
  EXPECT_FALSE(fs::exists(rows + ".resume"));
}

}  // namespace
}  // namespace qevict
