// `qevict eval` end to end on the reference model, with a tiny grid: the rows carry the
// documented metrics, runs reproduce exactly, the shadow measures missed mass, and user task
// files run (malformed lines skipped) with sensible results for the full cache.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "engine/session.h"
#include "eval/eval_run.h"
#include "tests/test_support.h"
#include "util/error.h"

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
  for (const char* key : {"rss_bytes", "peak_rss_bytes", "compaction_moves", "peak_reserved_bytes",
                          "routing_s", "prior_s"}) {
    row["kv"].erase(key);
  }
  return row;
}

EvalOptions TinyGrid(const std::string& out) {
  EvalOptions o;
  o.model_path = testing::ReferenceModelPath();
  o.grid.tasks = {"niah"};
  o.grid.lengths = {512};
  o.grid.depths = {0.5};
  o.grid.seed = 3;
  o.settings.policies = {"full", "snapkv", "qevict", "mikv"};
  o.settings.budgets = {0.25};
  o.threads = 2;
  o.out_dir = out;
  o.overwrite = true;  // the directory of an earlier run of the test
  o.progress = false;
  return o;
}

// kivi's cache has 32-token windows: its row forks from the prefix re-windowed, shadow included.
TEST(EvalRunTest, KiviForksFromTheRewindowedPrefixWithItsShadow) {
  QEVICT_REQUIRE_MODEL(m);
  const std::string dir = ::testing::TempDir() + "/qevict_eval_kivi";
  EvalOptions o = TinyGrid(dir);
  o.settings.shadow = true;
  o.settings.policies = {"full", "kivi"};
  o.settings.budgets = {0.5};
  ASSERT_EQ(RunEval(o), 0);
  const std::vector<json> rows = ReadRows(dir);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1]["policy"], "kivi");
  EXPECT_GT(rows[1]["kv"]["quant_bytes"].get<int64_t>(), 0) << rows[1]["kv"].dump();
  EXPECT_TRUE(rows[1]["missed_mass"].is_number()) << rows[1].dump();
}

// --export-tasks writes the generated instances and runs nothing; run as a task file they give
// the same prompts, so the same answers, as the generated run.
TEST(EvalRunTest, ExportedTasksRunAsATaskFileWithTheSameAnswers) {
  QEVICT_REQUIRE_MODEL(m);
  const std::string generated = ::testing::TempDir() + "/qevict_eval_gen";
  const std::string from_file = ::testing::TempDir() + "/qevict_eval_file";
  const std::string exported = ::testing::TempDir() + "/qevict_eval_export";
  const std::string file = ::testing::TempDir() + "/qevict_eval_export.jsonl";
  std::filesystem::remove_all(exported);
  std::filesystem::remove(file);
  EvalOptions o = TinyGrid(exported);
  o.grid.depths = {0.25, 0.75};
  o.settings.policies = {"full", "snapkv"};
  o.export_tasks = file;
  ASSERT_EQ(RunEval(o), 0);
  EXPECT_FALSE(std::filesystem::exists(exported + "/rows.jsonl"));  // nothing ran
  std::ifstream in(file);
  std::vector<std::string> ids;
  for (std::string line; std::getline(in, line);) ids.push_back(json::parse(line)["id"]);
  EXPECT_EQ(ids, (std::vector<std::string>{"niah-L512-d0.25-s0", "niah-L512-d0.75-s0"}));

  o.export_tasks.clear();
  o.out_dir = generated;
  ASSERT_EQ(RunEval(o), 0);
  EvalOptions f = o;
  f.grid = {};
  f.tasks_file = file;
  f.out_dir = from_file;
  ASSERT_EQ(RunEval(f), 0);
  const std::vector<json> a = ReadRows(generated), b = ReadRows(from_file);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["id"], b[i]["id"]);
    EXPECT_EQ(a[i]["policy"], b[i]["policy"]);
    EXPECT_EQ(a[i]["prompt_tokens"], b[i]["prompt_tokens"]);
    EXPECT_EQ(a[i]["turns"][0]["output"], b[i]["turns"][0]["output"]) << a[i]["id"];
  }
  // The full cache finds both needles, so the comparison is of answers, not of two misses.
  int full_rows = 0;
  for (const json& row : a) {
    if (row["policy"] != "full") continue;
    ++full_rows;
    EXPECT_EQ(row["accuracy"], 1.0) << row["id"];
  }
  EXPECT_EQ(full_rows, 2);

  o.export_tasks = file;
  o.tasks_file = file;  // a task file is not exported again
  EXPECT_THROW(RunEval(o), Error);
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
    EXPECT_EQ(r["model"], "SmolLM2-135M-Instruct.Q4_1");
    EXPECT_EQ(r["seed"], 3);
    for (const char* key : {"task", "id", "policy", "budget", "accuracy", "agreement",
                            "prompt_tokens", "kv", "missed_mass", "fmm", "prefill_tok_s",
                            "decode_tok_s", "wall_s", "infeasible"}) {
      EXPECT_TRUE(r.contains(key)) << key;
    }
    EXPECT_GE(r["accuracy"].get<double>(), 0.0);
    EXPECT_LE(r["accuracy"].get<double>(), 1.0);
    EXPECT_GT(r["prompt_tokens"].get<int>(), 400);
    const double missed = r["missed_mass"].get<double>();
    EXPECT_GE(missed, 0.0);
    EXPECT_LE(missed, 1.0);
    // Dropped at a step is a part of dropped at or before it.
    EXPECT_LE(r["fmm"].get<double>(), r["fmm_cumulative"].get<double>() + 1e-12);
    EXPECT_GE(r["fmm"].get<double>(), 0.0);
    EXPECT_GE(r["quantized_mass"].get<double>(), 0.0);
    EXPECT_LE(r["quantized_mass"].get<double>() + missed, 1.0 + 1e-9);
    if (r["policy"] != "full") {
      EXPECT_GT(missed, 0.0);  // a quarter of the bytes cannot hold all the attention
      EXPECT_LE(r["kv"]["peak_bytes"].get<int64_t>(),
                r["kv"]["prefill_peak_bytes"].get<int64_t>());
      EXPECT_LE(r["kv"]["resident_bytes"].get<int64_t>(), r["kv"]["budget_bytes"].get<int64_t>());
      EXPECT_FALSE(r["missed_mass_steps"].empty());
      // The tiered policies attend 2-bit windows; snapkv keeps or drops.
      if (r["policy"] == "snapkv") {
        EXPECT_EQ(r["quantized_mass"].get<double>(), 0.0);
      } else {
        EXPECT_GT(r["quantized_mass"].get<double>(), 0.0);
      }
    }
  }
  std::ifstream summary(dir + "/summary.json");
  const json s = json::parse(summary);
  EXPECT_EQ(s["format"], 2);
  EXPECT_EQ(s["seed"], 3);
  // One instance at one length and depth: pooled, per length and per (length, depth) cells.
  ASSERT_EQ(s["cells"].size(), 4u * 3u);
  for (const json& c : s["cells"]) {
    EXPECT_EQ(c["model"], "SmolLM2-135M-Instruct.Q4_1");
    EXPECT_EQ(c["n"], 1);
    EXPECT_EQ(c["metrics"]["accuracy"]["interval"], "wilson");
    EXPECT_TRUE(c["metrics"].contains("missed_mass"));  // --shadow
  }
  EXPECT_EQ(s["cells"][0]["policy"], "full");
  EXPECT_EQ(s["cells"][1]["length"], 512);
  EXPECT_EQ(s["cells"][2]["depth"], 0.5);
  // Every pair of the four policies (full included), pooled and at 512 tokens.
  ASSERT_EQ(s["comparisons"].size(), 6u * 2u);
  EXPECT_EQ(s["comparisons"][0]["a"], "full");
  EXPECT_EQ(s["comparisons"][0]["n"], 1);
  std::ifstream table_file(dir + "/table.md");
  const std::string table((std::istreambuf_iterator<char>(table_file)), {});
  EXPECT_NE(table.find("### niah — accuracy, bounded prefill"), std::string::npos) << table;
  EXPECT_NE(table.find("| full (n=1) |"), std::string::npos) << table;

  o.out_dir = again;
  ASSERT_EQ(RunEval(o), 0);
  const std::vector<json> rerun = ReadRows(again);
  ASSERT_EQ(rerun.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(WithoutTimings(rerun[i]), WithoutTimings(rows[i])) << "row " << i;
  }
}

// --prompt-style completion on a four-turn instance: every row says so, and every turn's prompt
// (its tail in the row) is "Question: ...\nAnswer: " and the task's answer prefix (the start of
// the fact asked about), which the model continues.
TEST(EvalRunTest, CompletionPromptsEndWithTheAnswerPrefix) {
  QEVICT_REQUIRE_MODEL(m);
  const std::string dir = ::testing::TempDir() + "/qevict_eval_completion";
  EvalOptions o = TinyGrid(dir);
  o.grid.tasks = {"drift"};
  o.grid.lengths = {768};  // four turns and their distractors need more than 512 tokens
  o.settings.policies = {"full", "qevict"};
  o.settings.prompt_style = PromptStyle::kCompletion;
  ASSERT_EQ(RunEval(o), 0);
  const std::vector<json> rows = ReadRows(dir);
  ASSERT_EQ(rows.size(), 2u);
  for (const json& r : rows) {
    SCOPED_TRACE(r["policy"].get<std::string>());
    EXPECT_EQ(r["prompt_style"], "completion");
    ASSERT_EQ(r["turns"].size(), 4u);
    for (size_t t = 0; t < 4; ++t) {
      const json& turn = r["turns"][t];
      const std::string question = turn["question"], tail = turn["prompt_tail"];
      const std::string head = std::string(t == 0 ? "" : "\n") + "Question: " + question +
                               "\nAnswer: ";
      ASSERT_EQ(tail.substr(0, head.size()), head);
      const std::string prefix = tail.substr(head.size());
      EXPECT_GE(prefix.size(), 10u);  // "The code to open the ... safe is", ...
      EXPECT_NE(prefix.back(), ' ');
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
  ASSERT_FALSE(summary["cells"].empty());
  for (const json& c : summary["cells"]) EXPECT_EQ(c["prompt_style"], "completion");
  std::ifstream table_file(dir + "/table.md");
  const std::string table((std::istreambuf_iterator<char>(table_file)), {});
  EXPECT_NE(table.find("Prompt style: completion"), std::string::npos) << table;
}

// --protocol context-only: the first prefill ends with the context (the cache is compressed
// there, in prompt-end mode) and every question comes as a later turn. The full cache reads the
// same tokens as with the question in the prompt, split in two, and answers the same; every row,
// the summary's cells and the table say which protocol they ran.
TEST(EvalRunTest, ContextOnlyAsksEveryQuestionAfterTheContext) {
  QEVICT_REQUIRE_MODEL(m);
  std::vector<json> runs[2];
  for (const EvalProtocol protocol : {EvalProtocol::kQuestionInPrompt, EvalProtocol::kContextOnly}) {
    const std::string name = EvalProtocolName(protocol);
    EvalOptions o = TinyGrid(::testing::TempDir() + "/qevict_eval_protocol_" + name);
    o.grid.tasks = {"drift"};
    o.grid.lengths = {768};  // four turns and their distractors need more than 512 tokens
    o.settings.policies = {"full", "snapkv"};
    o.settings.bounded = false;
    o.settings.prompt_end = true;
    o.settings.protocol = protocol;
    o.settings.prompt_style = PromptStyle::kCompletion;  // SmolLM2 solves drift this way
    ASSERT_EQ(RunEval(o), 0);
    std::vector<json>& rows = runs[protocol == EvalProtocol::kContextOnly ? 1 : 0];
    rows = ReadRows(o.out_dir);
    ASSERT_EQ(rows.size(), 2u);
    for (const json& r : rows) {
      EXPECT_EQ(r["protocol"], name);
      EXPECT_EQ(r["scorer"], "substring");
      ASSERT_EQ(r["turns"].size(), 4u);
    }
    std::ifstream summary_file(o.out_dir + "/summary.json");
    const json summary = json::parse(summary_file);
    EXPECT_EQ(summary["protocol"], name);
    for (const json& c : summary["cells"]) EXPECT_EQ(c["protocol"], name);
    std::ifstream table_file(o.out_dir + "/table.md");
    const std::string table((std::istreambuf_iterator<char>(table_file)), {});
    EXPECT_NE(table.find("Protocol: " + name + " ("), std::string::npos) << table;
  }
  const std::vector<json>& in_prompt = runs[0];
  const std::vector<json>& context_only = runs[1];
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(context_only[i]["policy"].get<std::string>());
    // The first prefill is shorter by the first question's turn, which is a later text.
    const json& first = context_only[i]["turns"][0];
    const std::string tail = first["prompt_tail"];
    EXPECT_TRUE(tail.starts_with("\n\nQuestion: " + first["question"].get<std::string>())) << tail;
    EXPECT_LT(context_only[i]["prompt_tokens"].get<int64_t>() + 10,
              in_prompt[i]["prompt_tokens"].get<int64_t>());
    EXPECT_EQ(in_prompt[i]["turns"][0]["prompt_tail"].get<std::string>(),
              tail.substr(2));  // question-in-prompt: the first prompt from the question on
  }
  EXPECT_EQ(context_only[0]["policy"], "full");
  for (size_t t = 0; t < 4; ++t) {
    EXPECT_EQ(context_only[0]["turns"][t]["output"], in_prompt[0]["turns"][t]["output"]) << t;
  }
  EXPECT_EQ(context_only[0]["total_tokens"], in_prompt[0]["total_tokens"]);
  EXPECT_EQ(context_only[0]["accuracy"], 1.0) << context_only[0]["turns"].dump();
}

// --out refuses a directory whose rows.jsonl holds rows, unless told to start over or to resume.
// A resumed run keeps the finished instances' rows as they were written, runs the instance left
// unfinished (its partial rows and a torn last line dropped) and the ones not started, and ends
// with the rows a run from scratch writes.
TEST(EvalRunTest, EarlierRowsAreKeptOnlyWhenResumed) {
  QEVICT_REQUIRE_MODEL(m);
  const std::string dir = ::testing::TempDir() + "/qevict_eval_resume";
  const std::string scratch = ::testing::TempDir() + "/qevict_eval_resume_scratch";
  EvalOptions o = TinyGrid(scratch);
  o.settings.policies = {"full", "streaming"};
  o.settings.bounded = false;  // one prefill per instance
  o.settings.prompt_end = true;
  o.grid.samples = 3;
  o.build = "build-a";
  ASSERT_EQ(RunEval(o), 0);
  const std::vector<json> fresh = ReadRows(scratch);
  ASSERT_EQ(fresh.size(), 3u * 2u);
  // A run that finished instance 0, wrote instance 1's full row and part of the next line.
  std::vector<std::string> lines;
  {
    std::ifstream in(scratch + "/rows.jsonl");
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir + "/rows.jsonl", std::ios::trunc);
    out << lines[0] << '\n' << lines[1] << '\n' << lines[2] << '\n' << lines[3].substr(0, 40);
  }

  o.out_dir = dir;
  o.overwrite = false;
  try {
    RunEval(o);
    ADD_FAILURE() << "earlier rows overwritten without --overwrite";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/rows.jsonl' already holds rows"),
              std::string::npos) << e.what();
  }
  o.resume = true;
  o.build = "build-b";  // resumed by another binary: each row keeps the build that made it
  ASSERT_EQ(RunEval(o), 0);
  std::vector<std::string> resumed_lines;
  {
    std::ifstream in(dir + "/rows.jsonl");
    for (std::string line; std::getline(in, line);) resumed_lines.push_back(line);
  }
  ASSERT_EQ(resumed_lines.size(), fresh.size());
  EXPECT_EQ(resumed_lines[0], lines[0]);  // instance 0 kept byte for byte
  EXPECT_EQ(resumed_lines[1], lines[1]);
  const std::vector<json> resumed = ReadRows(dir);
  for (size_t i = 0; i < fresh.size(); ++i) {
    EXPECT_EQ(resumed[i]["build"], i < 2 ? "build-a" : "build-b") << "row " << i;
    json a = WithoutTimings(resumed[i]), b = WithoutTimings(fresh[i]);
    a.erase("build");
    b.erase("build");
    EXPECT_EQ(a, b) << "row " << i;
  }
  std::ifstream summary_file(dir + "/summary.json");
  const json summary = json::parse(summary_file);
  EXPECT_EQ(summary["build"], "build-b");
  EXPECT_EQ(summary["resumed_instances"], 1);
  EXPECT_EQ(summary["instances"], 2);
  EXPECT_EQ(summary["rows"], 6);
  EXPECT_EQ(summary["cells"][0]["n"], 3);  // the summary covers every row

  // Resumed again: nothing to run, nothing changes, the summary of the run that ran included
  // (its instances and wall time are not replaced by those of a run that did nothing).
  ASSERT_EQ(RunEval(o), 0);
  EXPECT_EQ(ReadRows(dir), resumed);
  EXPECT_EQ(json::parse(std::ifstream(dir + "/summary.json")), summary);
  // Started over: the rows of this run alone.
  o.resume = false;
  o.overwrite = true;
  o.grid.samples = 1;
  ASSERT_EQ(RunEval(o), 0);
  EXPECT_EQ(ReadRows(dir).size(), 2u);
}

// --shard K/N: contiguous blocks that together run every instance once.
TEST(EvalRunTest, ShardsPartitionTheInstances) {
  QEVICT_REQUIRE_MODEL(m);
  std::set<std::string> seen;
  size_t total = 0;
  for (int k = 0; k < 2; ++k) {
    EvalOptions o = TinyGrid(::testing::TempDir() + "/qevict_eval_shard" + std::to_string(k));
    o.settings.policies = {"full"};
    o.grid.samples = 3;
    o.shard = k;
    o.shards = 2;
    ASSERT_EQ(RunEval(o), 0);
    const std::vector<json> rows = ReadRows(o.out_dir);
    EXPECT_EQ(rows.size(), k == 0 ? 1u : 2u);  // [0, 1) and [1, 3)
    for (const json& r : rows) seen.insert(r["id"].get<std::string>());
    total += rows.size();
  }
  EXPECT_EQ(total, 3u);
  EXPECT_EQ(seen, (std::set<std::string>{"niah-L512-d0.50-s0", "niah-L512-d0.50-s1",
                                         "niah-L512-d0.50-s2"}));
}

TEST(EvalRunTest, TaskFileRunsEveryPolicyAndSkipsMalformedLines) {
  QEVICT_REQUIRE_MODEL(m);
  const std::string dir = ::testing::TempDir() + "/qevict_eval_task_file";
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
  o.overwrite = true;
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
