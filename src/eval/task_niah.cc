// niah: "The special magic number for KEY is VALUE." (7-digit value, two-word key) hidden at a
// depth in the shipped prose; the question names the key; scored by the value being contained.
#include "eval/task_util.h"

namespace qevict::eval_internal {

EvalTask GenerateNiah(const TaskInstance& instance, TaskResources& resources) {
  Rng rng(instance.seed);
  const std::string key = DistinctKeys(rng, 1)[0];
  const std::string value = RandomDigits(rng, 7);
  EvalTask task;
  task.task = instance.task;
  task.id = instance.id;
  task.kind = TaskKind::kQuestions;
  task.context = BuildNeedleContext(instance, resources, resources.prose(), kNiahInstruction,
                                    {Needle{NiahNeedle(key, value), instance.depth}});
  task.turns.push_back(NiahTurn(key, value));
  task.max_new_tokens = 40;
  task.target_tokens = instance.length;
  task.depth = instance.depth;
  return task;
}

}  // namespace qevict::eval_internal
