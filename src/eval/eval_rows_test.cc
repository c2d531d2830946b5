// Reading and merging saved rows, and `qevict report` on temporary files.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "eval/eval_rows.h"
#include "eval/eval_test_files.h"
#include "eval/report_run.h"
#include "util/error.h"

namespace qevict {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string Line(const std::string& policy, const std::string& id, double accuracy,
                 const std::string& model = "m") {
  return json({{"model", model}, {"seed", 1}, {"task", "niah"}, {"id", id},
               {"policy", policy}, {"budget", policy == "full" ? 1.0 : 0.1},
               {"prefill_mode", policy == "full" ? "full" : "bounded"},
               {"prompt_style", "chat"}, {"accuracy", accuracy}, {"target_tokens", 2048},
               {"depth", 0.5}, {"infeasible", false}})
      .dump();
}

// A fresh directory under the test temp dir.
std::string RowsDir(const std::string& name) { return eval_test::FreshTempDir("rows_" + name); }

using eval_test::ErrorOf;
using eval_test::WriteFile;

void WriteGz(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

TEST(EvalRowsTest, ReadsPlainGzipAndDirectories) {
  const std::string dir = RowsDir("read");
  const std::string text = Line("full", "a", 1.0) + "\n\n" + Line("qevict", "a", 0.0) + "\r\n" +
                           Line("qevict", "b", 1.0);  // no final newline
  WriteFile(dir + "/plain.jsonl", text);
  WriteGz(dir + "/rows.jsonl.gz", text);
  const std::vector<json> plain = ReadRowsInput(dir + "/plain.jsonl");
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(plain[2]["id"], "b");
  EXPECT_EQ(ReadRowsInput(dir + "/rows.jsonl.gz"), plain);
  EXPECT_EQ(ReadRowsInput(dir), plain);  // the directory's rows.jsonl.gz
  WriteFile(dir + "/rows.jsonl", text);
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir); }).find("holds both"), std::string::npos);
}

TEST(EvalRowsTest, BadInputIsAnErrorWithItsLine) {
  const std::string dir = RowsDir("bad");
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir + "/none.jsonl"); }).find("cannot open"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir); }).find("holds no rows.jsonl"), std::string::npos);
  WriteFile(dir + "/broken.jsonl", Line("full", "a", 1.0) + "\n{\"task\": \n");
  const std::string broken = ErrorOf([&] { ReadRowsInput(dir + "/broken.jsonl"); });
  EXPECT_NE(broken.find(dir + "/broken.jsonl:2: not JSON"), std::string::npos) << broken;
  WriteFile(dir + "/array.jsonl", "\n[1, 2]\n");
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir + "/array.jsonl"); }).find("array.jsonl:2: not a row"),
            std::string::npos);
  WriteFile(dir + "/nopolicy.jsonl", R"({"task": "niah", "id": "a", "budget": 0.1})" "\n");
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir + "/nopolicy.jsonl"); })
                .find("nopolicy.jsonl:1: not a row: no string \"policy\""),
            std::string::npos);
  WriteFile(dir + "/empty.jsonl", "\n  \n");
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir + "/empty.jsonl"); }).find("holds no row"),
            std::string::npos);
  // A gzip stream cut short.
  WriteGz(dir + "/whole.gz", Line("full", "a", 1.0) + "\n" + Line("qevict", "a", 1.0) + "\n");
  std::string bytes;
  {
    std::ifstream in(dir + "/whole.gz", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  WriteFile(dir + "/cut.gz", bytes.substr(0, bytes.size() - 12));
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir + "/cut.gz"); }).find("cannot read"),
            std::string::npos);
}

TEST(EvalRowsTest, LaterRowsReplaceEarlierOnes) {
  MergedRows merged;
  merged.Add({json::parse(Line("full", "a", 1.0)), json::parse(Line("qevict", "a", 0.0))});
  merged.Add({json::parse(Line("qevict", "a", 1.0)),             // replaces
              json::parse(Line("qevict", "a", 1.0, "gemma")),    // another model
              json::parse(Line("qevict", "b", 1.0))});
  json seed2 = json::parse(Line("qevict", "b", 0.0));
  seed2["seed"] = 2;  // another instance
  merged.Add({seed2});
  ASSERT_EQ(merged.rows.size(), 5u);
  EXPECT_EQ(merged.replaced, 1);
  EXPECT_EQ(merged.rows[1]["accuracy"], 1.0);  // in the replaced row's place
  EXPECT_EQ(merged.rows[2]["model"], "gemma");
  // Another protocol or scorer is another row; naming the defaults is not.
  json context_only = json::parse(Line("qevict", "a", 0.5));
  context_only["protocol"] = "context-only";
  json f1 = json::parse(Line("qevict", "a", 0.5));
  f1["scorer"] = "f1";
  json defaults = json::parse(Line("qevict", "a", 0.25));
  defaults["protocol"] = "question-in-prompt";
  defaults["scorer"] = "substring";
  merged.Add({context_only, f1, defaults});
  ASSERT_EQ(merged.rows.size(), 7u);
  EXPECT_EQ(merged.replaced, 2);
  EXPECT_EQ(merged.rows[1]["accuracy"], 0.25);
  EXPECT_EQ(RowKey(ReadRowFields(merged.rows[5])), RowKey(ReadRowFields(context_only)));
  EXPECT_NE(RowKey(ReadRowFields(context_only)), RowKey(ReadRowFields(f1)));
}

TEST(EvalRowsTest, ReplacedFullCacheRowsAreKeptWithTheirRuns) {
  MergedRows merged;
  merged.Add({json::parse(Line("full", "a", 0.0)), json::parse(Line("qevict", "a", 1.0))});
  merged.Add({json::parse(Line("full", "a", 1.0)), json::parse(Line("snapkv", "a", 1.0))});
  merged.Add({json::parse(Line("qevict", "a", 0.5))});  // a policy's row: replaced, not kept
  ASSERT_EQ(merged.rows.size(), 3u);
  EXPECT_EQ(merged.replaced, 2);
  EXPECT_EQ(merged.sources, (std::vector<int>{1, 2, 1}));  // full (run 1), qevict (2), snapkv (1)
  ASSERT_EQ(merged.earlier_full.size(), 1u);
  EXPECT_EQ(merged.earlier_full[0].source, 0);
  EXPECT_EQ(merged.earlier_full[0].row["accuracy"], 0.0);
  EXPECT_EQ(merged.rows[0]["accuracy"], 1.0);
}

TEST(ReportRunTest, MergesInputsAndWritesTheSummary) {
  const std::string dir = RowsDir("report");
  std::string first, second;
  for (int i = 0; i < 6; ++i) {
    const std::string id = "i" + std::to_string(i);
    first += Line("full", id, 1.0) + "\n" + Line("qevict", id, 0.0) + "\n";
    second += Line("qevict", id, 1.0) + "\n" + Line("snapkv", id, i < 2 ? 1.0 : 0.0) + "\n";
  }
  fs::create_directories(dir + "/run1");
  WriteFile(dir + "/run1/rows.jsonl", first);
  WriteGz(dir + "/second.jsonl.gz", second);
  ReportOptions o;
  o.inputs = {dir + "/run1", dir + "/second.jsonl.gz"};
  o.out_dir = dir + "/out";
  o.command_line = "qevict report ...";
  ASSERT_EQ(RunReport(o), 0);
  std::ifstream in(dir + "/out/summary.json");
  const json s = json::parse(in);
  EXPECT_EQ(s["format"], 2);
  EXPECT_EQ(s["sources"], json(o.inputs));
  EXPECT_EQ(s["rows"], 18);
  EXPECT_EQ(s["replaced"], 6);
  EXPECT_EQ(s["command"], "qevict report ...");
  // Pooled, one length, one (length, depth) per policy.
  EXPECT_EQ(s["cells"].size(), 3u * 3u);
  const json& qevict = s["cells"][3];
  EXPECT_EQ(qevict["policy"], "qevict");
  EXPECT_DOUBLE_EQ(qevict["metrics"]["accuracy"]["mean"].get<double>(), 1.0);  // the later rows
  EXPECT_EQ(s["comparisons"].size(), 3u * 2u);  // 3 pairs, pooled and at 2048
  std::ifstream table(dir + "/out/table.md");
  const std::string md((std::istreambuf_iterator<char>(table)), {});
  EXPECT_NE(md.find("| qevict (n=6) | 1.00 [0.61, 1.00] |"), std::string::npos) << md;
  EXPECT_EQ(BuildReport(o).summary, s);

  o.inputs.push_back(dir + "/missing.jsonl");
  EXPECT_NE(ErrorOf([&] { BuildReport(o); }).find("missing.jsonl"), std::string::npos);
  o.inputs.clear();
  EXPECT_NE(ErrorOf([&] { BuildReport(o); }).find("at least one"), std::string::npos);
}

}  // namespace
}  // namespace qevict
