// passkey: a five-digit pass key hidden at a depth in the classic repetitive filler
// ("The grass is green. The sky is blue. ..."), asked at the end; scored by exact number.
#include "eval/task_util.h"

namespace qevict::eval_internal {

EvalTask GeneratePasskey(const TaskInstance& instance, TaskResources& resources) {
  Rng rng(instance.seed);
  const std::string key = RandomDigits(rng, 5);
  const std::string needle =
      "The pass key is " + key + ". Remember it. " + key + " is the pass key.";
  EvalTask task;
  task.task = instance.task;
  task.id = instance.id;
  task.kind = TaskKind::kQuestions;
  task.context = BuildNeedleContext(
      instance, resources, resources.passkey(),
      "There is an important piece of information hidden inside a lot of irrelevant text. Find "
      "it and memorize it. I will quiz you about it afterwards.",
      {Needle{needle, instance.depth}});
  EvalTurn turn;
  turn.question = "What is the pass key? Answer with the number only.";
  turn.answers = {key};
  turn.answer_prefix = "The pass key is";
  task.turns.push_back(std::move(turn));
  task.max_new_tokens = 32;
  task.target_tokens = instance.length;
  task.depth = instance.depth;
  return task;
}

}  // namespace qevict::eval_internal
