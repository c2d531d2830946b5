// multikey: four niah needles with different keys and values; the one asked sits at the grid
// depth, the three distractors a quarter of the context apart from it (wrapping around).
#include <cmath>

#include "eval/task_util.h"

namespace qevict::eval_internal {

EvalTask GenerateMultikey(const TaskInstance& instance, TaskResources& resources) {
  constexpr int kNeedles = 4;
  Rng rng(instance.seed);
  const std::vector<std::string> keys = DistinctKeys(rng, kNeedles);
  const std::vector<std::string> values = DistinctNumbers(rng, kNeedles, 7);
  std::vector<Needle> needles;
  for (int i = 0; i < kNeedles; ++i) {
    const double depth = i == 0 ? instance.depth : std::fmod(instance.depth + 0.25 * i, 1.0);
    needles.push_back(Needle{NiahNeedle(keys[i], values[i]), depth});
  }
  EvalTask task;
  task.task = instance.task;
  task.id = instance.id;
  task.kind = TaskKind::kQuestions;
  task.context =
      BuildNeedleContext(instance, resources, resources.prose(), kNiahInstruction, needles);
  task.turns.push_back(NiahTurn(keys[0], values[0]));  // needle 0 asked
  task.max_new_tokens = 40;
  task.target_tokens = instance.length;
  task.depth = instance.depth;
  return task;
}

}  // namespace qevict::eval_internal
