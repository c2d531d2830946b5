// Tests of the task-file parser (task_file.h): the fixtures in tests/fixtures/tasks/, every
// error class with its line number (the lines after it still parse), CRLF, BOM, limits, invalid
// UTF-8, deep nesting, and every kept fuzz input (tests/fuzz_regressions/task_file/) and seed
// (fuzz/corpus/task_file/) replayed with the result's invariants checked.
#include "source_dir.h"
#include "eval/task_file.h"

#include "eval/answer_match.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace qevict {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = QEVICT_SOURCE_DIR;
const fs::path kFixtures = kRoot / "tests" / "fixtures" / "tasks";

constexpr const char* kGood =
    R"({"id": "t1", "context": "ctx", "turns": [{"question": "q?", "answers": ["a"]}]})";

std::string Good(const std::string& id) {
  return R"({"id": ")" + id + R"(", "context": "c", "turns": [{"question": "q?", "answers": ["a"]}]})";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool ValidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const unicode::DecodedChar c = unicode::DecodeUtf8(s, pos);
    if (c.cp == 0xFFFD && c.length == 1) return false;
    pos += c.length;
  }
  return true;
}

// What every result must satisfy, whatever the input.
void CheckInvariants(std::string_view bytes, const TaskFileResult& r,
                     const TaskFileLimits& limits = {}) {
  const int64_t lines = std::count(bytes.begin(), bytes.end(), '\n') + 1;
  std::set<std::string> ids;
  for (const EvalTask& t : r.tasks) {
    EXPECT_EQ(t.task, "file");
    EXPECT_EQ(t.kind, TaskKind::kQuestions);
    EXPECT_FALSE(t.id.empty());
    EXPECT_LE(t.id.size(), kTaskIdMaxBytes);
    EXPECT_TRUE(ids.insert(t.id).second) << "duplicate id " << t.id;
    EXPECT_TRUE(ValidUtf8(t.id) && ValidUtf8(t.context));
    EXPECT_GE(t.max_new_tokens, 1);
    EXPECT_LE(t.max_new_tokens, limits.max_new_tokens);
    ASSERT_FALSE(t.turns.empty());
    EXPECT_LE(static_cast<int>(t.turns.size()), limits.max_turns);
    for (const EvalTurn& turn : t.turns) {
      EXPECT_FALSE(turn.question.empty());
      EXPECT_TRUE(ValidUtf8(turn.question));
      EXPECT_TRUE(turn.scoring == TurnScoring::kAny || turn.scoring == TurnScoring::kAll ||
                  turn.scoring == TurnScoring::kShare);
      EXPECT_TRUE(ValidUtf8(turn.answer_prefix));
      EXPECT_LE(static_cast<int64_t>(turn.answer_prefix.size()), limits.max_answer_prefix_bytes);
      ASSERT_FALSE(turn.answers.empty());
      EXPECT_LE(static_cast<int>(turn.answers.size()), limits.max_answers);
      for (const std::string& a : turn.answers) {
        EXPECT_TRUE(!a.empty() && ValidUtf8(a));
        EXPECT_FALSE(NormalizeForMatch(a).empty()) << "blank answer accepted";
      }
    }
  }
  EXPECT_LE(static_cast<int64_t>(r.tasks.size()), limits.max_tasks);
  int64_t previous = 0;
  for (const TaskFileError& e : r.errors) {
    EXPECT_GE(e.line, previous);
    EXPECT_LE(e.line, lines);
    previous = e.line;
    EXPECT_FALSE(e.message.empty());
    EXPECT_LE(e.message.size(), 400u) << e.message;
    EXPECT_TRUE(ValidUtf8(e.message)) << e.message;
  }
}

TaskFileResult Parse(std::string_view bytes, const TaskFileLimits& limits = {}) {
  TaskFileResult r;
  EXPECT_NO_THROW(r = ParseTaskFile(bytes, limits));
  CheckInvariants(bytes, r, limits);
  return r;
}

// The one error of a one-line file followed by a good line: on line 1, containing `expected`.
void ExpectLineError(const std::string& line, const std::string& expected) {
  SCOPED_TRACE(line.substr(0, 200));
  const TaskFileResult r = Parse(line + "\n" + Good("after") + "\n");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 1);
  EXPECT_NE(r.errors[0].message.find(expected), std::string::npos)
      << "message: " << r.errors[0].message << "\nexpected to contain: " << expected;
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_EQ(r.tasks[0].id, "after");
}

TEST(TaskFileTest, GoodFixture) {
  const TaskFileResult r = ReadTaskFile((kFixtures / "good.jsonl").string());
  EXPECT_TRUE(r.errors.empty()) << r.errors[0].message;
  ASSERT_EQ(r.tasks.size(), 3u);
  EXPECT_EQ(r.tasks[0].id, "capital");
  EXPECT_EQ(r.tasks[0].max_new_tokens, 32);
  ASSERT_EQ(r.tasks[0].turns.size(), 1u);
  EXPECT_EQ(r.tasks[0].turns[0].answers, std::vector<std::string>{"Brenvale"});
  EXPECT_EQ(r.tasks[0].turns[0].answer_prefix, "The capital of Quillmoor is");

  const EvalTask& drift = r.tasks[1];
  EXPECT_EQ(drift.id, "drift-two");
  EXPECT_EQ(drift.task, "file");
  EXPECT_EQ(drift.kind, TaskKind::kQuestions);
  EXPECT_EQ(drift.max_new_tokens, 32);  // default
  ASSERT_EQ(drift.turns.size(), 3u);
  EXPECT_EQ(drift.turns[1].question, "What is the special magic number for river?");
  EXPECT_EQ(drift.turns[1].answers, (std::vector<std::string>{"7730", "7,730"}));
  EXPECT_EQ(drift.turns[2].scoring, TurnScoring::kAny);  // the default
  EXPECT_EQ(drift.turns[2].answer_prefix, "");  // none given

  EXPECT_EQ(r.tasks[2].id, "caf\xc3\xa9-unicode");
  EXPECT_EQ(r.tasks[2].context,
            "Le caf\xc3\xa9 ouvre \xc3\xa0 huit heures.\nIl ferme \xc3\xa0 dix-neuf heures.");
}

TEST(TaskFileTest, MalformedFixtureReportsEachLineAndKeepsTheGoodOnes) {
  const TaskFileResult r = ReadTaskFile((kFixtures / "malformed.jsonl").string());
  ASSERT_EQ(r.tasks.size(), 2u);
  EXPECT_EQ(r.tasks[0].id, "ok-1");
  EXPECT_EQ(r.tasks[1].id, "ok-2");
  EXPECT_EQ(r.tasks[1].turns.size(), 2u);
  EXPECT_EQ(r.tasks[1].max_new_tokens, 8);
  const std::vector<std::pair<int64_t, std::string>> expected = {
      {1, "invalid JSON"},
      {2, "not a JSON object"},
      {3, "missing key \"context\""},
      {4, "id: must not be empty"},
      {5, "id: expected a string, got an integer"},
      {7, "turns: must not be empty"},
      {8, "turns[0]: unknown key \"answer\""},
      {9, "turns[0].answers[0]: must not be empty"},
      {10, "invalid UTF-8"},
      {11, "duplicate id \"ok-1\" (first used on line 6)"},
      {12, "max_new_tokens: 100000 is outside [1, 4096]"},
      {14, "turns: more than 64 turns"},
      {16, "turns[0].question: must not be empty"},
      {17, "max_new_tokens: expected an integer"},
      {18, "turns[0].answer_prefix: expected a string, got an array"},
      {19, "turns[0].answer_prefix: 1121 bytes, over the limit of 1000"},
      {20, "turns[0].scoring: \"most\" is not one of \"any\", \"all\", \"share\""},
  };
  ASSERT_EQ(r.errors.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(r.errors[i].line, expected[i].first) << r.errors[i].message;
    EXPECT_NE(r.errors[i].message.find(expected[i].second), std::string::npos)
        << "line " << r.errors[i].line << ": " << r.errors[i].message;
  }
}

TEST(TaskFileTest, MultiTurnWithCrlfBomAndBlankLines) {
  const std::string text =
      "\xEF\xBB\xBF"
      R"({"id": "a", "context": "one\r\ntwo", "turns": [{"question": "q1", "answers": ["x"]},)"
      R"( {"question": "q2", "answers": ["y", "z"]}], "max_new_tokens": 7})"
      "\r\n"
      "\r\n   \t\r\n\f\v\n" +
      Good("b") + "\r\n" + R"({"id": 5})" + "\r\n" + Good("c");  // no final newline
  const TaskFileResult r = Parse(text);
  ASSERT_EQ(r.tasks.size(), 3u);
  EXPECT_EQ(r.tasks[0].context, "one\r\ntwo");  // escapes inside strings are kept
  ASSERT_EQ(r.tasks[0].turns.size(), 2u);
  EXPECT_EQ(r.tasks[0].turns[1].question, "q2");
  EXPECT_EQ(r.tasks[0].turns[1].answers, (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(r.tasks[0].max_new_tokens, 7);
  EXPECT_EQ(r.tasks[1].id, "b");
  EXPECT_EQ(r.tasks[1].turns[0].answers[0], "a");  // no stray "\r"
  EXPECT_EQ(r.tasks[2].id, "c");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 6);  // blank lines count
}

TEST(TaskFileTest, EmptyAndBlankFiles) {
  EXPECT_TRUE(Parse("").tasks.empty());
  EXPECT_TRUE(Parse("").errors.empty());
  EXPECT_TRUE(Parse("\xEF\xBB\xBF").errors.empty());
  EXPECT_TRUE(Parse("\n\n \r\n\t").errors.empty());
}

TEST(TaskFileTest, InvalidJson) {
  ExpectLineError(R"({"id": "x", "context": "c", "turns": [)", "invalid JSON");
  ExpectLineError(R"({"id": "x", "context": "c"} trailing)", "invalid JSON");
  ExpectLineError(Good("x") + Good("y"), "invalid JSON");
  ExpectLineError(R"({'id': 'x'})", "invalid JSON");
  ExpectLineError(R"({"id": "x", // comment)", "invalid JSON");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": [], })", "invalid JSON");
  ExpectLineError("{\"id\": \"a\tb\"}", "invalid JSON");  // raw control character in a string
  ExpectLineError("not json at all", "invalid JSON at byte");
  // JSON errors win over schema errors met earlier on the line.
  ExpectLineError(R"({"answer": 1, "id": )", "invalid JSON");
}

TEST(TaskFileTest, NotAnObject) {
  ExpectLineError("[1, 2]", "the line is not a JSON object (it is an array)");
  ExpectLineError("\"text\"", "not a JSON object (it is a string)");
  ExpectLineError("42", "not a JSON object (it is an integer)");
  ExpectLineError("null", "not a JSON object (it is null)");
  ExpectLineError("true", "not a JSON object (it is a boolean)");
}

TEST(TaskFileTest, MissingFields) {
  ExpectLineError(R"({"context": "c", "turns": [{"question": "q", "answers": ["a"]}]})",
                  "missing key \"id\"");
  ExpectLineError(R"({"id": "x", "turns": [{"question": "q", "answers": ["a"]}]})",
                  "missing key \"context\"");
  ExpectLineError(R"({"id": "x", "context": "c"})", "missing key \"turns\"");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": [{"answers": ["a"]}]})",
                  "turns[0]: missing key \"question\"");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": [{"question": "q"}]})",
                  "turns[0]: missing key \"answers\"");
  ExpectLineError("{}", "missing key \"id\"");
}

TEST(TaskFileTest, EmptyValues) {
  ExpectLineError(R"({"id": "", "context": "c", "turns": [{"question": "q", "answers": ["a"]}]})",
                  "id: must not be empty");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": []})", "turns: must not be empty");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": [{"question": "", "answers": ["a"]}]})",
                  "turns[0].question: must not be empty");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": [{"question": "q", "answers": []}]})",
                  "turns[0].answers: must not be empty");
  ExpectLineError(
      R"({"id": "x", "context": "c", "turns": [{"question": "q", "answers": ["a"]},)"
      R"( {"question": "q", "answers": ["a", ""]}]})",
      "turns[1].answers[1]: must not be empty");
  ExpectLineError(
      R"({"id": "x", "context": "c", "turns": [{"question": "q", "answers": ["a", " \t\n "]}]})",
      "turns[0].answers[1]: only whitespace (it could never match)");
  // An empty context is fine.
  const TaskFileResult r =
      Parse(R"({"id": "x", "context": "", "turns": [{"question": "q", "answers": ["a"]}]})");
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.tasks[0].context, "");
}

TEST(TaskFileTest, WrongTypes) {
  const std::string t = R"([{"question": "q", "answers": ["a"]}])";
  ExpectLineError(R"({"id": 17, "context": "c", "turns": )" + t + "}",
                  "id: expected a string, got an integer");
  ExpectLineError(R"({"id": ["x"], "context": "c", "turns": )" + t + "}",
                  "id: expected a string, got an array");
  ExpectLineError(R"({"id": "x", "context": null, "turns": )" + t + "}",
                  "context: expected a string, got null");
  ExpectLineError(R"({"id": "x", "context": {"a": 1}, "turns": )" + t + "}",
                  "context: expected a string, got an object");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": {"question": "q"}})",
                  "turns: expected an array, got an object");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": ["q"]})",
                  "turns[0]: expected an object, got a string");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": [{"question": 1, "answers": ["a"]}]})",
                  "turns[0].question: expected a string, got an integer");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": [{"question": "q", "answers": "a"}]})",
                  "turns[0].answers: expected an array, got a string");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": [{"question": "q", "answers": [1]}]})",
                  "turns[0].answers[0]: expected a string, got an integer");
  ExpectLineError(
      R"({"id": "x", "context": "c", "turns": [{"question": "q", "answers": [["a"]]}]})",
      "turns[0].answers[0]: expected a string, got an array");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": )" + t + R"(, "max_new_tokens": "32"})",
                  "max_new_tokens: expected an integer, got a string");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": )" + t + R"(, "max_new_tokens": 32.0})",
                  "max_new_tokens: expected an integer, got a number");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": )" + t + R"(, "max_new_tokens": 1e3})",
                  "max_new_tokens: expected an integer");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": )" + t + R"(, "max_new_tokens": true})",
                  "max_new_tokens: expected an integer, got a boolean");
}

TEST(TaskFileTest, UnknownAndDuplicateKeys) {
  const std::string t = R"([{"question": "q", "answers": ["a"]}])";
  ExpectLineError(R"({"id": "x", "context": "c", "turns": )" + t + R"(, "max_tokens": 5})",
                  "unknown key \"max_tokens\" (expected id, context, turns, max_new_tokens, scorer)");
  ExpectLineError(R"({"id": "x", "context": "c", "turns": [{"question": "q", "answer": ["a"]}]})",
                  "turns[0]: unknown key \"answer\" (expected question, answers, answer_prefix, "
                  "scoring)");
  ExpectLineError(
      R"({"id": "x", "context": "c", "turns": [{"question": "q", "answers": ["a"], "require_all": true}]})",
      "turns[0]: unknown key \"require_all\"");  // the old field is no key of the file
  ExpectLineError(R"({"id": "x", "ID": "y", "context": "c", "turns": )" + t + "}",
                  "unknown key \"ID\"");
  ExpectLineError(R"({"id": "x", "id": "y", "context": "c", "turns": )" + t + "}",
                  "duplicate key \"id\"");
  ExpectLineError(
      R"({"id": "x", "context": "c", "turns": [{"question": "q", "question": "r", "answers": ["a"]}]})",
      "turns[0]: duplicate key \"question\"");
  // A key with control characters or invalid-looking content is quoted escaped and shortened.
  ExpectLineError(R"({"a\u0001b": 1})", "unknown key \"a\\x01b\"");
  const TaskFileResult r = Parse("{\"" + std::string(5000, 'k') + "\": 1}");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_LT(r.errors[0].message.size(), 200u);
}

TEST(TaskFileTest, DuplicateIdsNameTheFirstLine) {
  const TaskFileResult r = Parse(Good("a") + "\n" + Good("b") + "\n\n" + Good("a") + "\n" +
                                 Good("c") + "\n" + Good("b") + "\n");
  ASSERT_EQ(r.tasks.size(), 3u);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].line, 4);
  EXPECT_EQ(r.errors[0].message, "duplicate id \"a\" (first used on line 1)");
  EXPECT_EQ(r.errors[1].line, 6);
  EXPECT_EQ(r.errors[1].message, "duplicate id \"b\" (first used on line 2)");
  // A rejected line does not claim its id.
  const TaskFileResult r2 = Parse(R"({"id": "a", "context": 1})" "\n" + Good("a"));
  EXPECT_EQ(r2.tasks.size(), 1u);
  EXPECT_EQ(r2.errors.size(), 1u);
}

TEST(TaskFileTest, IdLengthAndCharacters) {
  EXPECT_EQ(Parse(Good(std::string(200, 'i'))).tasks.size(), 1u);
  ExpectLineError(Good(std::string(201, 'i')), "id: 201 bytes, over the limit of 200");
  ExpectLineError(Good("a\\u0000b"), "id: must not contain control characters");
  ExpectLineError(Good("a\\nb"), "id: must not contain control characters");
  ExpectLineError(Good("a\\u007f"), "id: must not contain control characters");
  EXPECT_EQ(Parse(Good("a b/c:d \xc3\xa9")).tasks.size(), 1u);
}

TEST(TaskFileTest, InvalidUtf8IsALineError) {
  const std::vector<std::string> bad = {
      "caf\xe9",            // Latin-1
      "\xff\xfe",           // never valid
      "\xc0\xaf",           // overlong
      "\xed\xa0\x80",       // surrogate, encoded
      "\xf4\x90\x80\x80",   // past U+10FFFF
      "ab\xe2\x82",         // truncated sequence
      "\x80",               // lone continuation byte
  };
  for (const std::string& b : bad) {
    ExpectLineError(R"({"id": "x", "context": ")" + b +
                        R"(", "turns": [{"question": "q", "answers": ["a"]}]})",
                    "invalid UTF-8");
    ExpectLineError(Good(b), "invalid UTF-8");
    ExpectLineError(R"({"id": "x", "context": "c", "turns": [{"question": "q", "answers": [")" +
                        b + R"("]}]})",
                    "invalid UTF-8");
    ExpectLineError(R"({")" + b + R"(": 1})", "invalid UTF-8");
  }
  // Outside strings, and escaped lone surrogates.
  ExpectLineError("{\xff}", "invalid JSON");
  ExpectLineError(Good("\\ud800"), "invalid JSON");
  ExpectLineError(Good("\\udc00x"), "invalid JSON");
  // Escapes of valid characters are fine.
  const TaskFileResult r = Parse(Good("caf\\u00e9 \\ud83d\\ude00"));
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_EQ(r.tasks[0].id, "caf\xc3\xa9 \xf0\x9f\x98\x80");
}

TEST(TaskFileTest, MessagesQuoteLittleOfALongLine) {
  const std::string line = R"({"id": "x", "context": ")" + std::string(1 << 20, 'z') + "\xff\"}";
  const TaskFileResult r = Parse(line);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_LT(r.errors[0].message.size(), 200u) << r.errors[0].message;
  EXPECT_NE(r.errors[0].message.find("invalid UTF-8 at byte"), std::string::npos);
  const TaskFileResult r2 = Parse(R"({"id": "x", "context": ")" + std::string(1 << 20, 'z') +
                                  "\x01\"}");
  ASSERT_EQ(r2.errors.size(), 1u);
  EXPECT_LT(r2.errors[0].message.size(), 300u) << r2.errors[0].message;
  EXPECT_NE(r2.errors[0].message.find("U+0001"), std::string::npos) << r2.errors[0].message;
}

TEST(TaskFileTest, DeepNestingDoesNotCrash) {
  for (const std::string& opener : {std::string("["), std::string("{\"a\":"),
                                    std::string("{\"context\":["), std::string("[{\"x\":")}) {
    std::string deep;
    for (int i = 0; i < 100000; ++i) deep += opener;
    for (const std::string& line :
         {deep, R"({"id": "x", "context": )" + deep, R"({"id": "x", "unknown": )" + deep,
          R"({"id": "x", "context": "c", "turns": )" + deep}) {
      ExpectLineError(line, "invalid JSON");  // never closed
    }
  }
  // Closed deep nesting: valid JSON, wrong shape.
  ExpectLineError(R"({"id": "x", "junk": )" + std::string(100000, '[') +
                      std::string(100000, ']') + "}",
                  "unknown key \"junk\"");
  ExpectLineError(std::string(100000, '[') + std::string(100000, ']'), "not a JSON object");
}

TEST(TaskFileTest, MaxNewTokensRange) {
  const std::string head = R"({"id": "x", "context": "c", "turns": [{"question": "q", "answers": ["a"]}], "max_new_tokens": )";
  EXPECT_EQ(Parse(head + "1}").tasks.at(0).max_new_tokens, 1);
  EXPECT_EQ(Parse(head + "4096}").tasks.at(0).max_new_tokens, 4096);
  ExpectLineError(head + "0}", "max_new_tokens: 0 is outside [1, 4096]");
  ExpectLineError(head + "-5}", "max_new_tokens: -5 is outside [1, 4096]");
  ExpectLineError(head + "4097}", "max_new_tokens: 4097 is outside");
  ExpectLineError(head + "9223372036854775807}", "is outside");
  ExpectLineError(head + "18446744073709551615}", "is outside");
  ExpectLineError(head + "-9223372036854775808}", "is outside");
  ExpectLineError(head + "99999999999999999999999}", "max_new_tokens: expected an integer");
  TaskFileLimits limits;
  limits.max_new_tokens = 8;
  const TaskFileResult r = Parse(head + "9}\n" + head + "8}", limits);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("outside [1, 8]"), std::string::npos);
  EXPECT_EQ(r.tasks.size(), 1u);
}

TEST(TaskFileTest, Scoring) {
  const std::string head =
      R"({"id": "x", "context": "c", "turns": [{"question": "q", "answers": ["a", "b"], )";
  // Per turn, optional (default any), in any key order.
  const TaskFileResult r = Parse(
      R"({"id": "x", "context": "c", "turns": [{"scoring": "share", "question": "q",)"
      R"( "answers": ["a", "b"]}, {"question": "r", "answers": ["b"]},)"
      R"( {"question": "s", "answers": ["c", "d"], "scoring": "all"},)"
      R"( {"question": "t", "answers": ["d"], "scoring": "any", "answer_prefix": "T is"}]})");
  ASSERT_EQ(r.tasks.size(), 1u) << r.errors.at(0).message;
  ASSERT_EQ(r.tasks[0].turns.size(), 4u);
  EXPECT_EQ(r.tasks[0].turns[0].scoring, TurnScoring::kShare);
  EXPECT_EQ(r.tasks[0].turns[0].question, "q");
  EXPECT_EQ(r.tasks[0].turns[1].scoring, TurnScoring::kAny);
  EXPECT_EQ(r.tasks[0].turns[2].scoring, TurnScoring::kAll);
  EXPECT_EQ(r.tasks[0].turns[3].scoring, TurnScoring::kAny);
  EXPECT_EQ(r.tasks[0].turns[3].answer_prefix, "T is");
  // Anything but the three names, exactly spelled.
  for (const char* bad : {"", "ANY", "Share", " all", "most", "string_match_all"}) {
    ExpectLineError(head + R"("scoring": ")" + bad + "\"}]}",
                    std::string("turns[0].scoring: \"") + bad +
                        "\" is not one of \"any\", \"all\", \"share\"");
  }
  ExpectLineError(head + R"("scoring": 1}]})", "turns[0].scoring: expected a string, got an integer");
  ExpectLineError(head + R"("scoring": null}]})", "turns[0].scoring: expected a string, got null");
  ExpectLineError(head + R"("scoring": ["all"]}]})",
                  "turns[0].scoring: expected a string, got an array");
  ExpectLineError(head + R"("scoring": true}]})",
                  "turns[0].scoring: expected a string, got a boolean");
  ExpectLineError(head + R"("scoring": "all", "scoring": "share"}]})",
                  "turns[0]: duplicate key \"scoring\"");
  ExpectLineError(R"({"id": "x", "context": "c", "scoring": "all", "turns": [{"question": "q", "answers": ["a"]}]})",
                  "unknown key \"scoring\" (expected id, context, turns, max_new_tokens, scorer)");
  // A long bad value is quoted short and escaped.
  const TaskFileResult long_bad =
      Parse(head + R"("scoring": ")" + std::string(5000, 'z') + "\\\"\"}]}");
  ASSERT_EQ(long_bad.errors.size(), 1u);
  EXPECT_LT(long_bad.errors[0].message.size(), 200u) << long_bad.errors[0].message;
}

TEST(TaskFileTest, Scorer) {
  const std::string turns = R"("turns": [{"question": "q", "answers": ["a"]}])";
  // Per task, optional (nullopt: the run's --scorer), in any key order.
  const TaskFileResult r = Parse(
      R"({"id": "x", "scorer": "f1", "context": "c", )" + turns + "}\n" +
      R"({"id": "y", "context": "c", )" + turns + R"(, "scorer": "exact"})" + "\n" +
      R"({"id": "z", "context": "c", )" + turns + R"(, "scorer": "substring"})" + "\n" +
      R"({"id": "w", "context": "c", )" + turns + "}\n");
  ASSERT_EQ(r.tasks.size(), 4u) << r.errors.at(0).message;
  EXPECT_EQ(r.tasks[0].scorer, AnswerScorer::kF1);
  EXPECT_EQ(r.tasks[1].scorer, AnswerScorer::kExact);
  EXPECT_EQ(r.tasks[2].scorer, AnswerScorer::kSubstring);
  EXPECT_EQ(r.tasks[3].scorer, std::nullopt);
  const std::string head = R"({"id": "x", "context": "c", )" + turns + ", ";
  for (const char* bad : {"", "F1", "em", " exact", "contains"}) {
    ExpectLineError(head + R"("scorer": ")" + bad + "\"}",
                    std::string("scorer: \"") + bad +
                        "\" is not one of \"substring\", \"exact\", \"f1\"");
  }
  ExpectLineError(head + R"("scorer": 1})", "scorer: expected a string, got an integer");
  ExpectLineError(head + R"("scorer": "f1", "scorer": "exact"})", "duplicate key \"scorer\"");
  // Not a turn's key: a task's answers are all compared the same way.
  ExpectLineError(R"({"id": "x", "context": "c", "turns": [{"question": "q", "answers": ["a"], "scorer": "f1"}]})",
                  "turns[0]: unknown key \"scorer\" (expected question, answers, answer_prefix, "
                  "scoring)");
}

TEST(TaskFileTest, AnswerPrefix) {
  const std::string head =
      R"({"id": "x", "context": "c", "turns": [{"question": "q", "answers": ["a"], )";
  // Per turn, optional, in any key order; "" is the same as none.
  const TaskFileResult r = Parse(
      R"({"id": "x", "context": "c", "turns": [{"answer_prefix": "The code is", "question": "q",)"
      R"( "answers": ["a"]}, {"question": "r", "answers": ["b"]},)"
      R"( {"question": "s", "answers": ["c"], "answer_prefix": ""},)"
      R"( {"question": "t", "answers": ["d"], "answer_prefix": "Caf\u00e9 \"X\" is\nthe"}]})");
  ASSERT_EQ(r.tasks.size(), 1u) << r.errors.at(0).message;
  ASSERT_EQ(r.tasks[0].turns.size(), 4u);
  EXPECT_EQ(r.tasks[0].turns[0].answer_prefix, "The code is");
  EXPECT_EQ(r.tasks[0].turns[0].question, "q");
  EXPECT_EQ(r.tasks[0].turns[1].answer_prefix, "");
  EXPECT_EQ(r.tasks[0].turns[2].answer_prefix, "");
  EXPECT_EQ(r.tasks[0].turns[3].answer_prefix, "Caf\xc3\xa9 \"X\" is\nthe");
  // Wrong types.
  ExpectLineError(head + R"("answer_prefix": 5}]})",
                  "turns[0].answer_prefix: expected a string, got an integer");
  ExpectLineError(head + R"("answer_prefix": null}]})",
                  "turns[0].answer_prefix: expected a string, got null");
  ExpectLineError(head + R"("answer_prefix": ["The code is"]}]})",
                  "turns[0].answer_prefix: expected a string, got an array");
  ExpectLineError(head + R"("answer_prefix": {"text": "x"}}]})",
                  "turns[0].answer_prefix: expected a string, got an object");
  ExpectLineError(head + R"("answer_prefix": true}]})",
                  "turns[0].answer_prefix: expected a string, got a boolean");
  // Repeated, misplaced, invalid UTF-8.
  ExpectLineError(head + R"("answer_prefix": "a", "answer_prefix": "b"}]})",
                  "turns[0]: duplicate key \"answer_prefix\"");
  ExpectLineError(R"({"id": "x", "context": "c", "answer_prefix": "a", "turns": [{"question": "q", "answers": ["a"]}]})",
                  "unknown key \"answer_prefix\" (expected id, context, turns, max_new_tokens, scorer)");
  ExpectLineError(head + "\"answer_prefix\": \"caf\xe9\"}]}", "invalid UTF-8");
  // Over-long: the limit is in bytes (UTF-8), and a small limit is honoured.
  EXPECT_EQ(Parse(head + R"("answer_prefix": ")" + std::string(1000, 'p') + "\"}]}")
                .tasks.at(0)
                .turns[0]
                .answer_prefix.size(),
            1000u);
  ExpectLineError(head + R"("answer_prefix": ")" + std::string(1001, 'p') + "\"}]}",
                  "turns[0].answer_prefix: 1001 bytes, over the limit of 1000");
  std::string accents;
  for (int i = 0; i < 501; ++i) accents += "\xc3\xa9";
  ExpectLineError(head + R"("answer_prefix": ")" + accents + "\"}]}",
                  "turns[0].answer_prefix: 1002 bytes, over the limit of 1000");
  TaskFileLimits limits;
  limits.max_answer_prefix_bytes = 4;
  const TaskFileResult small = Parse(head + R"("answer_prefix": "abcd"}]})" "\n" +
                                         R"({"id": "y", "context": "c", "turns": [{"question": "q", "answers": ["a"]},)"
                                         R"( {"question": "q", "answers": ["a"], "answer_prefix": "abcde"}]})",
                                     limits);
  ASSERT_EQ(small.tasks.size(), 1u);
  ASSERT_EQ(small.errors.size(), 1u);
  EXPECT_EQ(small.errors[0].line, 2);
  EXPECT_EQ(small.errors[0].message, "turns[1].answer_prefix: 5 bytes, over the limit of 4");
}

TEST(TaskFileTest, TurnAndAnswerLimits) {
  TaskFileLimits limits;
  limits.max_turns = 2;
  limits.max_answers = 3;
  const std::string turn = R"({"question": "q", "answers": ["a", "b", "c"]})";
  const std::string ok = R"({"id": "ok", "context": "c", "turns": [)" + turn + "," + turn + "]}";
  const std::string many_turns =
      R"({"id": "t", "context": "c", "turns": [)" + turn + "," + turn + "," + turn + "]}";
  const std::string many_answers =
      R"({"id": "a", "context": "c", "turns": [{"question": "q", "answers": ["a", "b", "c", "d"]}]})";
  const TaskFileResult r = Parse(many_turns + "\n" + many_answers + "\n" + ok, limits);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].line, 1);
  EXPECT_EQ(r.errors[0].message, "turns: more than 2 turns");
  EXPECT_EQ(r.errors[1].line, 2);
  EXPECT_EQ(r.errors[1].message, "turns[0].answers: more than 3 answers");
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_EQ(r.tasks[0].turns.size(), 2u);
}

TEST(TaskFileTest, LineLimit) {
  TaskFileLimits limits;
  limits.max_line_bytes = 100;
  const std::string long_line =
      R"({"id": "long", "context": ")" + std::string(200, 'c') +
      R"(", "turns": [{"question": "q", "answers": ["a"]}]})";
  const TaskFileResult r = Parse(Good("a") + "\n" + long_line + "\n" + Good("b"), limits);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 2);
  EXPECT_EQ(r.errors[0].message,
            "the line is " + std::to_string(long_line.size()) + " bytes, over the limit of 100");
  EXPECT_EQ(r.tasks.size(), 2u);
}

TEST(TaskFileTest, TaskLimitStopsAtTheLineWhereItIsHit) {
  TaskFileLimits limits;
  limits.max_tasks = 2;
  const TaskFileResult r = Parse(Good("a") + "\nbad\n" + Good("b") + "\n\n" + Good("c") + "\n" +
                                     Good("d") + "\nbad\n",
                                 limits);
  ASSERT_EQ(r.tasks.size(), 2u);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].line, 2);
  EXPECT_EQ(r.errors[1].line, 5);
  EXPECT_EQ(r.errors[1].message,
            "over the limit of 2 tasks: this line and the rest of the file are ignored");
}

TEST(TaskFileTest, FileLimit) {
  TaskFileLimits limits;
  limits.max_file_bytes = 10;
  const TaskFileResult r = Parse(Good("a"), limits);
  EXPECT_TRUE(r.tasks.empty());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 0);
  EXPECT_NE(r.errors[0].message.find("over the limit of 10"), std::string::npos);
}

TEST(TaskFileTest, ErrorListIsBounded) {
  TaskFileLimits limits;
  limits.max_errors = 3;
  std::string text;
  for (int i = 0; i < 10; ++i) text += "x\n";
  text += Good("kept");
  const TaskFileResult r = Parse(text, limits);
  EXPECT_EQ(r.tasks.size(), 1u);  // parsing goes on past the listed errors
  ASSERT_EQ(r.errors.size(), 4u);
  EXPECT_EQ(r.errors[3].line, 4);
  EXPECT_EQ(r.errors[3].message, "7 more errors, from this line on, not listed");
}

TEST(TaskFileTest, RandomMutationsNeverThrow) {
  const std::string base = ReadFile(kFixtures / "good.jsonl") + ReadFile(kFixtures / "malformed.jsonl");
  std::mt19937 rng(1234);
  const std::string alphabet = "{}[]\":,\\ \n\r\tu0123456789abcdefnulltrue\xff\xc3\xa9\xef\xbb\xbf";
  TaskFileLimits limits;
  limits.max_turns = 3;
  limits.max_answers = 2;
  limits.max_tasks = 5;
  limits.max_line_bytes = 300;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: text.erase(at, 1 + rng() % 20); break;
        default: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
      }
    }
    Parse(text);
    Parse(text, limits);
  }
}

TEST(ReadTaskFileTest, UnreadableFilesThrow) {
  EXPECT_THROW(ReadTaskFile((kFixtures / "no_such_file.jsonl").string()), Error);
  EXPECT_THROW(ReadTaskFile(kFixtures.string()), Error);
  try {
    ReadTaskFile((kFixtures / "no_such_file.jsonl").string());
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_file.jsonl does not exist"), std::string::npos);
  }
}

TEST(ReadTaskFileTest, TooLargeFileThrowsBeforeParsing) {
  const fs::path path = fs::temp_directory_path() /
                        ("qevict_task_file_test_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream out(path, std::ios::binary);
    out << Good("a") << "\n" << Good("b") << "\n";
  }
  TaskFileLimits limits;
  limits.max_file_bytes = 50;
  try {
    ReadTaskFile(path.string(), limits);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("over the limit of 50"), std::string::npos) << e.what();
  }
  limits.max_file_bytes = static_cast<int64_t>(fs::file_size(path));
  EXPECT_EQ(ReadTaskFile(path.string(), limits).tasks.size(), 2u);
  fs::remove(path);
}

// Every kept fuzz finding and every seed of the task_file fuzz target (fuzz/targets/task_file.h)
// goes through the parser with default and small limits.
TEST(TaskFileFuzzRegressionTest, KeptInputsAndSeedsParseCleanly) {
  int replayed = 0;
  TaskFileLimits small;
  small.max_turns = 2;
  small.max_answers = 2;
  small.max_new_tokens = 64;
  small.max_tasks = 3;
  small.max_line_bytes = 256;
  small.max_errors = 4;
  for (const fs::path& dir : {kRoot / "tests" / "fuzz_regressions" / "task_file",
                             kRoot / "fuzz" / "corpus" / "task_file"}) {
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
      if (!e.is_regular_file() || e.path().filename() == "README.md") continue;
      SCOPED_TRACE(e.path().string());
      const std::string bytes = ReadFile(e.path());
      Parse(bytes);
      Parse(bytes, small);
      ++replayed;
    }
  }
  EXPECT_GE(replayed, 8);
}

}  // namespace
}  // namespace qevict
