// vt (variable tracking): a chain "VAR A = 12345." "VAR B = VAR A." "VAR C = VAR B." and a
// distractor chain with another value, each chain's links in order at random depths through the
// prose; the question asks for every name holding the value; all three must be answered.
#include <algorithm>

#include "eval/task_util.h"

namespace qevict::eval_internal {
namespace {

constexpr int kChain = 3;  // short: the reference model is small

// The links of one chain at increasing random depths in [0.05, 0.95].
void AddChain(Rng& rng, const std::string* names, const std::string& value,
              std::vector<Needle>& needles) {
  double depths[kChain];
  for (double& d : depths) d = 0.05 + 0.9 * rng.Unit();
  std::sort(depths, depths + kChain);
  for (int i = 0; i < kChain; ++i) {
    const std::string rhs = i == 0 ? value : "VAR " + names[i - 1];
    needles.push_back(Needle{"VAR " + names[i] + " = " + rhs + ".", depths[i]});
  }
}

}  // namespace

EvalTask GenerateVt(const TaskInstance& instance, TaskResources& resources) {
  Rng rng(instance.seed);
  const std::vector<std::string> names = DistinctNames(rng, 2 * kChain, 5);
  const std::vector<std::string> values = DistinctNumbers(rng, 2, 5);
  std::vector<Needle> needles;
  AddChain(rng, &names[0], values[0], needles);       // asked
  AddChain(rng, &names[kChain], values[1], needles);  // distractor
  EvalTask task;
  task.task = instance.task;
  task.id = instance.id;
  task.kind = TaskKind::kQuestions;
  task.context = BuildNeedleContext(
      instance, resources, resources.prose(),
      "Memorize and track the chains of variable assignments hidden in the following text.",
      needles);
  EvalTurn turn;
  turn.question = "Which variables are assigned the value " + values[0] + "? List all of them.";
  turn.answers.assign(names.begin(), names.begin() + kChain);
  turn.scoring = TurnScoring::kAll;
  turn.answer_prefix = "The variables assigned the value " + values[0] + " are";
  task.turns.push_back(std::move(turn));
  task.max_new_tokens = 64;
  task.target_tokens = instance.length;
  task.depth = -1.0;
  return task;
}

}  // namespace qevict::eval_internal
