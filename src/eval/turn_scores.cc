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
    const double score = TurnScore(turn.at("output").get<std::string>(), task.turns[t], scorer);
    turn["score"] = score;
    turn["correct"] = score == 1.0;
    sum += score;
  }
  return task.turns.empty() ? 0.0 : sum / static_cast<double>(task.turns.size());
}

RescoreCount RescoreRows(std::vector<json>& rows, const std::vector<EvalTask>& tasks) {
  std::unordered_map<std::string, const EvalTask*> by_id;
  for (const EvalTask& t : tasks) by_id.emplace(t.id, &t);
  RescoreCount count;
  for (json& row : rows) {
    const std::string kind = row.value("kind", "questions");
    if (kind != "questions") continue;
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
    json before = row.at("turns");
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
  return count;
}

}  // namespace qevict
