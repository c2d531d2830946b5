// Scores of question turns from recorded outputs (turn_scores.h).
#include "eval/turn_scores.h"

#include <unordered_map>

#include "eval/answer_match.h"
#include "util/error.h"

namespace qevict {

using nlohmann::json;

double ScoreTurns(json& turn_rows, const EvalTask& task, AnswerScorer scorer) {
  if (!turn_rows.is_array() || turn_rows.size() != task.turns.size()) {
    throw Error("task " + task.id + " has " + std::to_string(task.turns.size()) +
                " turns, its row " + std::to_string(turn_rows.is_array() ? turn_rows.size() : 0));
  }
  double sum = 0.0;
  for (size_t t = 0; t < task.turns.size(); ++t) {
    json& turn = turn_rows[t];
    if (!turn.is_object() || !turn.contains("output") || !turn["output"].is_string()) {
      throw Error("task " + task.id + ": turn " + std::to_string(t) +
                  " of its row has no output text (\"output\")");
    }
    const double score =
        TurnScore(turn["output"].get_ref<const std::string&>(), task.turns[t], scorer);
    turn["score"] = score;
    turn["correct"] = score == 1.0;
    sum += score;
  }
  return task.turns.empty() ? 0.0 : sum / static_cast<double>(task.turns.size());
}

namespace {

using TasksById = std::unordered_map<std::string, const EvalTask*>;

// One row of RescoreRows (json::exception for a field of the wrong type).
void RescoreRow(json& row, const TasksById& by_id, RescoreCount& count) {
  const std::string kind = row.value("kind", "questions");
  if (kind != "questions") return;
  const std::string id = row.at("id").get<std::string>();
  const auto it = by_id.find(id);
  if (it == by_id.end() || it->second->kind != TaskKind::kQuestions) {
    throw Error("row of task " + id + " (policy " + row.value("policy", "?") +
                "): no question task of that id among this command's instances; give the "
                "flags of the run that wrote the rows (its summary.json's command)");
  }
  const std::string scorer_name = row.value("scorer", "substring");
  const std::optional<AnswerScorer> scorer = ParseAnswerScorer(scorer_name);
  if (!scorer) throw Error("row of task " + id + ": unknown scorer '" + scorer_name + "'");
  const json before = row.contains("turns") ? row["turns"] : json();
  const double accuracy = ScoreTurns(row["turns"], *it->second, *scorer);
  for (size_t t = 0; t < before.size(); ++t) {
    // Rows written before turns had a "score" have "correct" alone.
    const json& old = before[t];
    const double was = old.contains("score") && old["score"].is_number()
                           ? old["score"].get<double>()
                           : (old.value("correct", false) ? 1.0 : 0.0);
    if (was != row["turns"][t]["score"].get<double>()) ++count.changed_turns;
  }
  if (row.value("accuracy", -1.0) != accuracy) ++count.changed_rows;
  row["accuracy"] = accuracy;
  ++count.rows;
  count.turns += static_cast<int64_t>(before.size());
}

}  // namespace

RescoreCount RescoreRows(std::vector<json>& rows, const std::vector<EvalTask>& tasks) {
  TasksById by_id;
  for (const EvalTask& t : tasks) by_id.emplace(t.id, &t);
  RescoreCount count;
  for (json& row : rows) {
    try {
      RescoreRow(row, by_id, count);
    } catch (const json::exception& e) {  // a field of the wrong type
      const std::string id =
          row.contains("id") && row["id"].is_string() ? row["id"].get<std::string>() : "?";
      throw Error("row of task " + id + ": " + e.what());
    }
  }
  return count;
}

}  // namespace qevict
