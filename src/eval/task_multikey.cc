// multikey: four niah needles with different keys and values; the one asked sits at the grid
// depth, the three distractors a quarter of the context apart from it (wrapping around).
#include <utility>

#include "eval/task_util.h"

namespace qevict::eval_internal {

EvalTask GenerateMultikey(const TaskInstance& instance, TaskResources& resources) {
  Rng rng(instance.seed);
  SpreadNeedles spread = FourSpreadNeedles(instance, resources, rng);
  EvalTask& task = spread.task;
  task.turns.push_back(NiahTurn(spread.keys[0], spread.values[0]));  // needle 0 asked
  task.max_new_tokens = 40;
  return std::move(task);
}

}  // namespace qevict::eval_internal
