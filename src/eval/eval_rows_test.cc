// Reading and merging saved rows, on temporary files.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "eval/eval_rows.h"
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
std::string Dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/qevict_rows_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

void WriteGz(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(EvalRowsTest, ReadsPlainGzipAndDirectories) {
  const std::string dir = Dir("read");
  const std::string text = Line("full", "a", 1.0) + "\n\n" + Line("qevict", "a", 0.0) + "\r\n" +
                           Line("qevict", "b", 1.0);  // no final newline
  Write(dir + "/plain.jsonl", text);
  WriteGz(dir + "/rows.jsonl.gz", text);
  const std::vector<json> plain = ReadRowsInput(dir + "/plain.jsonl");
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(plain[2]["id"], "b");
  EXPECT_EQ(ReadRowsInput(dir + "/rows.jsonl.gz"), plain);
  EXPECT_EQ(ReadRowsInput(dir), plain);  // the directory's rows.jsonl.gz
  Write(dir + "/rows.jsonl", text);
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir); }).find("holds both"), std::string::npos);
}

TEST(EvalRowsTest, BadInputIsAnErrorWithItsLine) {
  const std::string dir = Dir("bad");
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir + "/none.jsonl"); }).find("cannot open"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir); }).find("holds no rows.jsonl"), std::string::npos);
  Write(dir + "/broken.jsonl", Line("full", "a", 1.0) + "\n{\"task\": \n");
  const std::string broken = ErrorOf([&] { ReadRowsInput(dir + "/broken.jsonl"); });
  EXPECT_NE(broken.find(dir + "/broken.jsonl:2: not JSON"), std::string::npos) << broken;
  Write(dir + "/array.jsonl", "\n[1, 2]\n");
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir + "/array.jsonl"); }).find("array.jsonl:2: not a row"),
            std::string::npos);
  Write(dir + "/nopolicy.jsonl", R"({"task": "niah", "id": "a", "budget": 0.1})" "\n");
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir + "/nopolicy.jsonl"); })
                .find("nopolicy.jsonl:1: not a row: no string \"policy\""),
            std::string::npos);
  Write(dir + "/empty.jsonl", "\n  \n");
  EXPECT_NE(ErrorOf([&] { ReadRowsInput(dir + "/empty.jsonl"); }).find("holds no row"),
            std::string::npos);
  // A gzip stream cut short.
  WriteGz(dir + "/whole.gz", Line("full", "a", 1.0) + "\n" + Line("qevict", "a", 1.0) + "\n");
  std::string bytes;
  {
    std::ifstream in(dir + "/whole.gz", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  Write(dir + "/cut.gz", bytes.substr(0, bytes.size() - 12));
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
}

}  // namespace
}  // namespace qevict
