// `qevict eval` end to end on the reference model, with a tiny grid: the rows carry the
// documented metrics, runs reproduce exactly, the shadow measures missed mass, and user task
// files run (malformed lines skipped) with sensible results for the full cache.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "engine/session.h"
#include "eval/eval_run.h"
#include "tests/test_support.h"

namespace qevict {
namespace {

using nlohmann::json;

std::vector<json> ReadRows(const std::string& dir) {
  std::vector<json> rows;
  std::ifstream in(dir + "/rows.jsonl");
  std::string line;
  while (std::getline(in, line)) rows.push_back(json::parse(line));
  return rows;
}

// Everything but the timings.
// Without what the machine decides: timings, the process's memory as the OS counts it, and what
// depends on which thread allocated a block first during a parallel routing step (which blocks
// compaction moves, how many slabs were mapped in the middle of a step). Tokens, scores, tiers
// and the ledger are reproducible.
json WithoutTimings(json row) {
  for (const char* key : {"prefill_tok_s", "prefill_s", "decode_tok_s", "wall_s"}) row.erase(key);
  for (const char* key : {"rss_bytes", "peak_rss_bytes", "compaction_moves", "peak_reserved_bytes"}) {
    row["kv"].erase(key);
  }
  return row;
}

EvalOptions TinyGrid(const std::string& out) {
  EvalOptions o;
  o.model_path = testing::ReferenceModelPath();
  o.grid.tasks = {"niah"};
  o.grid.lengths = {768};
  o.grid.depths = {0.5};
  o.grid.seed = 3;
  o.settings.policies = {"full", "snapkv", "qevict", "mikv"};
  o.settings.budgets = {0.25};
  o.threads = 2;
  o.out_dir = out;
  o.progress = false;
  return o;
}

TEST(EvalRunTest, RowsCarryTheMetricsAndReproduce) {
  QEVICT_REQUIRE_MODEL(m);
  const std::string dir = ::testing::TempDir() + "/qevict_eval_a";
  const std::string again = ::testing::TempDir() + "/qevict_eval_b";
  EvalOptions o = TinyGrid(dir);
  o.settings.shadow = true;
  ASSERT_EQ(RunEval(o), 0);
  const std::vector<json> rows = ReadRows(dir);
  ASSERT_EQ(rows.size(), 4u);  // full + 3 policies x 1 budget
  EXPECT_EQ(rows[0]["policy"], "full");
  EXPECT_EQ(rows[0]["accuracy"], 1.0) << rows[0]["turns"].dump();
  for (const json& r : rows) {
    SCOPED_TRACE(r["policy"].get<std::string>());
    EXPECT_EQ(r["prompt_style"], "chat");  // auto: SmolLM2 has a chat template
    for (const char* key : {"task", "id", "policy", "budget", "accuracy", "agreement",
                            "prompt_tokens", "kv", "missed_mass", "fmm", "prefill_tok_s",
                            "decode_tok_s", "wall_s", "infeasible"}) {
      EXPECT_TRUE(r.contains(key)) << key;
    }
    EXPECT_GE(r["accuracy"].get<double>(), 0.0);
    EXPECT_LE(r["accuracy"].get<double>(), 1.0);
    EXPECT_GT(r["prompt_tokens"].get<int>(), 600);
    const double missed = r["missed_mass"].get<double>();
    EXPECT_GE(missed, 0.0);
    EXPECT_LE(missed, 1.0);
    if (r["policy"] != "full") {
      EXPECT_GT(missed, 0.0);  // a quarter of the bytes cannot hold all the attention
      EXPECT_LE(r["kv"]["peak_bytes"].get<int64_t>(),
                r["kv"]["prefill_peak_bytes"].get<int64_t>());
      EXPECT_LE(r["kv"]["resident_bytes"].get<int64_t>(), r["kv"]["budget_bytes"].get<int64_t>());
      EXPECT_FALSE(r["missed_mass_steps"].empty());
    }
  }
  std::ifstream summary(dir + "/summary.json");
  const json s = json::parse(summary);
  EXPECT_EQ(s["groups"].size(), 4u);
  EXPECT_TRUE(std::filesystem::exists(dir + "/table.md"));

  o.out_dir = again;
  ASSERT_EQ(RunEval(o), 0);
  const std::vector<json> rerun = ReadRows(again);
  ASSERT_EQ(rerun.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(WithoutTimings(rerun[i]), WithoutTimings(rows[i])) << "row " << i;
  }
}

// --prompt-style completion on a three-turn instance: every row says so, and every turn's prompt
// (its tail in the row) is "Question: ...\nAnswer: " and the task's answer prefix, which the
// model continues.
TEST(EvalRunTest, CompletionPromptsEndWithTheAnswerPrefix) {
  QEVICT_REQUIRE_MODEL(m);
  const std::string dir = ::testing::TempDir() + "/qevict_eval_completion";
  EvalOptions o = TinyGrid(dir);
  o.grid.tasks = {"drift"};
  o.settings.policies = {"full", "qevict"};
  o.settings.prompt_style = PromptStyle::kCompletion;
  ASSERT_EQ(RunEval(o), 0);
  const std::vector<json> rows = ReadRows(dir);
  ASSERT_EQ(rows.size(), 2u);
  for (const json& r : rows) {
    SCOPED_TRACE(r["policy"].get<std::string>());
    EXPECT_EQ(r["prompt_style"], "completion");
    ASSERT_EQ(r["turns"].size(), 3u);
    for (size_t t = 0; t < 3; ++t) {
      const json& turn = r["turns"][t];
      const std::string question = turn["question"], tail = turn["prompt_tail"];
      const size_t key_at = question.find("for ") + 4;
      const std::string key = question.substr(key_at, question.find(' ', key_at) - key_at);
      EXPECT_EQ(tail, std::string(t == 0 ? "" : "\n") + "Question: " + question +
                          "\nAnswer: The special magic number for " + key + " is");
      ASSERT_TRUE(turn["score"].is_number()) << turn.dump();  // any scoring: 0 or 1
      EXPECT_EQ(turn["correct"].get<bool>(), turn["score"].get<double>() == 1.0);
    }
  }
  // The full cache reads the numbers off the needles it is led into.
  EXPECT_EQ(rows[0]["policy"], "full");
  EXPECT_EQ(rows[0]["accuracy"], 1.0) << rows[0]["turns"].dump();
  std::ifstream summary_file(dir + "/summary.json");
  const json summary = json::parse(summary_file);
  EXPECT_EQ(summary["prompt_style"], "completion");
  for (const json& g : summary["groups"]) EXPECT_EQ(g["prompt_style"], "completion");
  std::ifstream table_file(dir + "/table.md");
  const std::string table((std::istreambuf_iterator<char>(table_file)), {});
  EXPECT_NE(table.find("Prompt style: completion"), std::string::npos) << table;
}

TEST(EvalRunTest, TaskFileRunsEveryPolicyAndSkipsMalformedLines) {
  QEVICT_REQUIRE_MODEL(m);
  const std::string dir = ::testing::TempDir() + "/qevict_eval_file";
  const std::string file = ::testing::TempDir() + "/qevict_tasks.jsonl";
  {
    std::ifstream good(testing::SourcePath("tests/fixtures/tasks/good.jsonl"));
    std::ofstream out(file);
    out << "{\"id\": \"broken\", \"context\": 3}\n" << good.rdbuf();
  }
  EvalOptions o;
  o.model_path = testing::ReferenceModelPath();
  o.tasks_file = file;
  o.settings.policies = {"full", "streaming", "h2o", "tova", "snapkv", "pyramidkv", "kivi",
                         "mikv", "qevict"};
  o.settings.budgets = {0.5};
  o.threads = 2;
  o.out_dir = dir;
  o.progress = false;
  ASSERT_EQ(RunEval(o), 0);
  const std::vector<json> rows = ReadRows(dir);
  ASSERT_EQ(rows.size(), 3u * 9u);  // three good tasks, the broken line skipped
  for (const json& r : rows) {
    EXPECT_EQ(r["task"], "file");
    EXPECT_NE(r["id"], "broken");
    if (r["policy"] == "full" && r["id"] == "capital") {
      EXPECT_EQ(r["accuracy"], 1.0) << r["turns"].dump();
    }
  }
}

}  // namespace
}  // namespace qevict
