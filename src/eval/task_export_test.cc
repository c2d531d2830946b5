// Tests of TaskFileLine (task_file.h): every generated question task, written as a task-file
// line and parsed back, is the same instance (what `qevict eval --export-tasks` relies on), and
// what the format cannot hold is refused with a message instead of written.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "eval/task_file.h"
#include "eval/task_generators.h"
#include "util/error.h"

namespace qevict {
namespace {

// About four bytes a token, as English text runs with BPE tokenizers: contexts come out sized.
int64_t QuarterByteTokens(std::string_view text) { return static_cast<int64_t>(text.size() / 4); }

void ExpectSameTask(const EvalTask& a, const EvalTask& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.context, b.context);
  EXPECT_EQ(a.max_new_tokens, b.max_new_tokens);
  EXPECT_EQ(a.scorer, b.scorer);
  ASSERT_EQ(a.turns.size(), b.turns.size());
  for (size_t i = 0; i < a.turns.size(); ++i) {
    EXPECT_EQ(a.turns[i].question, b.turns[i].question);
    EXPECT_EQ(a.turns[i].answers, b.turns[i].answers);
    EXPECT_EQ(a.turns[i].answer_prefix, b.turns[i].answer_prefix);
    EXPECT_EQ(a.turns[i].scoring, b.turns[i].scoring);
  }
}

TEST(TaskExportTest, GeneratedQuestionTasksRoundTrip) {
  TaskGrid grid;
  grid.tasks = {"passkey",    "niah", "multikey", "vt",      "drift",   "multivalue",
                "multiquery", "cwe",  "fwe",      "scbench", "twofacts"};
  grid.lengths = {512};
  grid.depths = {0.25, 0.75};
  grid.samples = 2;
  grid.seed = 7;
  const std::vector<EvalTask> tasks = GenerateTasks(grid, QuarterByteTokens);
  ASSERT_GE(tasks.size(), 20u);
  std::string file;
  bool some_prefix = false, some_share = false, some_multi_turn = false;
  for (const EvalTask& t : tasks) {
    file += TaskFileLine(t) + "\n";
    for (const EvalTurn& turn : t.turns) {
      some_prefix |= !turn.answer_prefix.empty();
      some_share |= turn.scoring != TurnScoring::kAny;
    }
    some_multi_turn |= t.turns.size() > 1;
  }
  // The fields that are optional in the format are exercised.
  EXPECT_TRUE(some_prefix);
  EXPECT_TRUE(some_share);
  EXPECT_TRUE(some_multi_turn);
  const TaskFileResult parsed = ParseTaskFile(file);
  EXPECT_TRUE(parsed.errors.empty()) << parsed.errors.front().message;
  ASSERT_EQ(parsed.tasks.size(), tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    SCOPED_TRACE(tasks[i].id);
    ExpectSameTask(tasks[i], parsed.tasks[i]);
  }
}

TEST(TaskExportTest, OptionalFieldsAndEscapesRoundTrip) {
  EvalTask t;
  t.task = "file";
  t.id = "q\"uote\\d";
  t.context = "line one\nline \"two\"\t\xC3\xA9";
  t.turns = {{"What?", {"a", "b"}, TurnScoring::kAll, "The answer is"},
             {"And?", {"c"}, TurnScoring::kShare}};
  t.max_new_tokens = 7;
  t.scorer = AnswerScorer::kF1;
  const TaskFileResult parsed = ParseTaskFile(TaskFileLine(t));
  ASSERT_TRUE(parsed.errors.empty()) << parsed.errors.front().message;
  ASSERT_EQ(parsed.tasks.size(), 1u);
  ExpectSameTask(t, parsed.tasks[0]);
}

TEST(TaskExportTest, RefusesWhatTheFormatCannotHold) {
  TaskGrid grid;
  grid.tasks = {"ppl"};
  grid.lengths = {512};
  grid.samples = 1;
  const std::vector<EvalTask> ppl = GenerateTasks(grid, QuarterByteTokens);
  ASSERT_EQ(ppl.size(), 1u);
  try {
    TaskFileLine(ppl[0]);
    ADD_FAILURE() << "a perplexity task was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only question tasks"), std::string::npos) << e.what();
  }
  EvalTask t;
  t.id = "x";
  t.context = "c";
  EXPECT_THROW(TaskFileLine(t), Error);  // no turns
  t.turns = {{"q", {"  "}}};
  EXPECT_THROW(TaskFileLine(t), Error);  // a blank answer
  t.turns = {{"q", {"a"}}};
  t.id = "";
  EXPECT_THROW(TaskFileLine(t), Error);
  t.id = "bad\x01id";
  EXPECT_THROW(TaskFileLine(t), Error);
  t.id = "x";
  t.context = "\xFF\xFE";
  EXPECT_THROW(TaskFileLine(t), Error);  // invalid UTF-8
  t.context = "c";
  EXPECT_NO_THROW(TaskFileLine(t));
}

}  // namespace
}  // namespace qevict
