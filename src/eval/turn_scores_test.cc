// Tests of turn scoring from recorded outputs (turn_scores.h): the scores a row gets, and rows
// scored again after the scorer changed, other rows untouched, a row of an unknown task refused.
#include "eval/turn_scores.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace qevict {
namespace {

using nlohmann::json;

EvalTask Task(const std::string& id, std::vector<std::vector<std::string>> answers) {
  EvalTask task;
  task.id = id;
  for (auto& a : answers) {
    EvalTurn turn;
    turn.question = "q";
    turn.answers = std::move(a);
    task.turns.push_back(std::move(turn));
  }
  return task;
}

json Row(const std::string& id, std::vector<std::pair<std::string, double>> turns,
         double accuracy) {
  json rows = json::array();
  for (const auto& [output, score] : turns) {
    rows.push_back({{"output", output}, {"score", score}, {"correct", score == 1.0}});
  }
  return {{"id", id}, {"kind", "questions"}, {"policy", "snapkv"}, {"scorer", "substring"},
          {"turns", rows}, {"accuracy", accuracy}};
}

TEST(TurnScoresTest, ScoresEachTurnAndReturnsTheMean) {
  const EvalTask task = Task("t", {{"829"}, {"melon"}, {"38"}, {"6092"}});
  json turns = json::array({{{"output", " 829."}}, {{"output", " melons"}},
                            {{"output", " 381."}}, {{"output", "no idea"}}});
  EXPECT_DOUBLE_EQ(ScoreTurns(turns, task, AnswerScorer::kSubstring), 0.5);
  EXPECT_EQ(turns[0]["score"], 1.0);
  EXPECT_EQ(turns[0]["correct"], true);
  EXPECT_EQ(turns[1]["score"], 1.0);
  EXPECT_EQ(turns[2]["score"], 0.0);  // 381 is not 38
  EXPECT_EQ(turns[2]["correct"], false);
  EXPECT_EQ(turns[3]["score"], 0.0);
  json short_turns = json::array({{{"output", "829"}}});
  EXPECT_THROW(ScoreTurns(short_turns, task, AnswerScorer::kSubstring), Error);
}

TEST(TurnScoresTest, RescoreChangesOnlyWhatTheScorerNowSaysOtherwise) {
  const std::vector<EvalTask> tasks = {Task("a", {{"3364319"}}), Task("b", {{"12"}, {"7"}})};
  std::vector<json> rows = {
      Row("a", {{" 33643197.", 1.0}}, 1.0),         // an extra digit: was counted, is not
      Row("a", {{" 3364319.", 1.0}}, 1.0),          // unchanged
      Row("b", {{" 123.", 1.0}, {" 7", 1.0}}, 1.0),  // one of two turns changes
      {{"id", "p"}, {"kind", "ppl"}, {"accuracy", 0.25}, {"turns", json::array()}},
  };
  const RescoreCount count = RescoreRows(rows, tasks);
  EXPECT_EQ(count.rows, 3);
  EXPECT_EQ(count.turns, 4);
  EXPECT_EQ(count.changed_turns, 2);
  EXPECT_EQ(count.changed_rows, 2);
  EXPECT_EQ(rows[0]["accuracy"], 0.0);
  EXPECT_EQ(rows[0]["turns"][0]["correct"], false);
  EXPECT_EQ(rows[1]["accuracy"], 1.0);
  EXPECT_EQ(rows[2]["accuracy"], 0.5);
  EXPECT_EQ(rows[2]["turns"][1]["score"], 1.0);
  EXPECT_EQ(rows[3]["accuracy"], 0.25);  // not a question row: left as it was
  // Scoring again changes nothing more.
  const RescoreCount again = RescoreRows(rows, tasks);
  EXPECT_EQ(again.changed_turns, 0);
  EXPECT_EQ(again.changed_rows, 0);
}

TEST(TurnScoresTest, RescoreUsesEachRowsScorer) {
  const std::vector<EvalTask> tasks = {Task("a", {{"mango"}})};
  std::vector<json> rows = {Row("a", {{"It is the mango.", 1.0}}, 1.0)};
  rows[0]["scorer"] = "exact";  // "it is mango" is not "mango"
  RescoreRows(rows, tasks);
  EXPECT_EQ(rows[0]["accuracy"], 0.0);
  rows[0]["scorer"] = "f1";
  RescoreRows(rows, tasks);
  EXPECT_DOUBLE_EQ(rows[0]["accuracy"].get<double>(), 0.5);  // [it is mango] vs [mango]
  rows[0]["scorer"] = "F1";
  EXPECT_THROW(RescoreRows(rows, tasks), Error);
}

TEST(TurnScoresTest, RescoreRefusesRowsOfOtherTasks) {
  std::vector<json> rows = {Row("zzz", {{"829", 1.0}}, 1.0)};
  try {
    RescoreRows(rows, {Task("a", {{"829"}})});
    FAIL() << "a row of an unknown task was scored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("zzz"), std::string::npos) << e.what();
  }
  rows = {Row("a", {{"829", 1.0}}, 1.0)};
  EXPECT_THROW(RescoreRows(rows, {Task("a", {{"829"}, {"1"}})}), Error);  // turns differ
  // Fields of the wrong kind are errors naming the row, not crashes.
  for (const char* bad : {R"({"output": 5})", R"({"score": 1.0})", R"("text")"}) {
    rows = {Row("a", {{"829", 1.0}}, 1.0)};
    rows[0]["turns"][0] = json::parse(bad);
    EXPECT_THROW(RescoreRows(rows, {Task("a", {{"829"}})}), Error) << bad;
  }
  for (const char* field : {"scorer", "kind", "accuracy", "id"}) {
    rows = {Row("a", {{"829", 1.0}}, 1.0)};
    rows[0][field] = json::array({1});
    EXPECT_THROW(RescoreRows(rows, {Task("a", {{"829"}})}), Error) << field;
  }
  rows = {Row("a", {{"829", 1.0}}, 1.0)};
  rows[0]["turns"] = "x";
  EXPECT_THROW(RescoreRows(rows, {Task("a", {{"829"}})}), Error);
}

}  // namespace
}  // namespace qevict
