// drift: one context with three niah needles (depths 0.15, 0.5, 0.85) and three questions asked
// one after another in the same session, each about a different needle: the middle one first,
// then the first, then the last. A cache compressed once for question 1 must still serve 2 and 3.
#include "eval/task_util.h"

namespace qevict::eval_internal {

EvalTask GenerateDrift(const TaskInstance& instance, TaskResources& resources) {
  constexpr int kNeedles = 3;
  constexpr double kDepths[kNeedles] = {0.15, 0.5, 0.85};
  constexpr int kAskOrder[kNeedles] = {1, 0, 2};  // middle, first, last
  Rng rng(instance.seed);
  const std::vector<std::string> keys = DistinctKeys(rng, kNeedles);
  const std::vector<std::string> values = DistinctNumbers(rng, kNeedles, 7);
  std::vector<Needle> needles;
  for (int i = 0; i < kNeedles; ++i) {
    needles.push_back(Needle{NiahNeedle(keys[i], values[i]), kDepths[i]});
  }
  EvalTask task;
  task.task = instance.task;
  task.id = instance.id;
  task.kind = TaskKind::kQuestions;
  task.context =
      BuildNeedleContext(instance, resources, resources.prose(), kNiahInstruction, needles);
  for (int i : kAskOrder) task.turns.push_back(NiahTurn(keys[i], values[i]));
  task.max_new_tokens = 40;
  task.target_tokens = instance.length;
  task.depth = -1.0;
  return task;
}

}  // namespace qevict::eval_internal
