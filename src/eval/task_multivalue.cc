// multivalue (after RULER's niah_multivalue): one key with four values, in four needles "One of
// the special magic numbers for KEY is VALUE." (7-digit values, a two-word key as in niah); the
// first at the grid depth, the others a quarter of the context apart from it (wrapping around,
// as multikey's distractors). The question asks for all the numbers of the key; scored by the
// share of the four that appear in the answer (RULER's string_match_all). RULER places the
// needles at evenly spaced depths and phrases the needle "... is: VALUE."; the rest follows it.
#include <cmath>

#include "eval/task_util.h"

namespace qevict::eval_internal {

EvalTask GenerateMultivalue(const TaskInstance& instance, TaskResources& resources) {
  constexpr int kValues = 4;
  Rng rng(instance.seed);
  const std::string key = DistinctKeys(rng, 1)[0];
  const std::vector<std::string> values = DistinctNumbers(rng, kValues, 7);
  std::vector<Needle> needles;
  for (int i = 0; i < kValues; ++i) {
    const double depth = i == 0 ? instance.depth : std::fmod(instance.depth + 0.25 * i, 1.0);
    needles.push_back(
        Needle{"One of the special magic numbers for " + key + " is " + values[i] + ".", depth});
  }
  EvalTask task;
  task.task = instance.task;
  task.id = instance.id;
  task.kind = TaskKind::kQuestions;
  task.context =
      BuildNeedleContext(instance, resources, resources.prose(), kNiahInstruction, needles);
  EvalTurn turn;
  turn.question = "What are all the special magic numbers for " + key +
                  " mentioned in the text? Answer with the numbers only.";
  turn.answers = values;
  turn.scoring = TurnScoring::kShare;
  turn.answer_prefix = "The special magic numbers for " + key + " are";
  task.turns.push_back(std::move(turn));
  task.max_new_tokens = 64;
  task.target_tokens = instance.length;
  task.depth = instance.depth;
  return task;
}

}  // namespace qevict::eval_internal
