// multiquery (after RULER's niah_multiquery): four niah needles "The special magic number for
// KEY is VALUE." with different keys and values, the first at the grid depth and the others a
// quarter of the context apart from it (wrapping around, as in multikey); one question names
// all four keys, in a random order as in RULER, and asks for their numbers; scored by the share
// of the four values that appear in the answer (RULER's string_match_all). RULER places the
// needles at evenly spaced depths and phrases the needle "One of the special magic numbers for
// KEY is: VALUE.".
#include <cmath>

#include "eval/task_util.h"

namespace qevict::eval_internal {

EvalTask GenerateMultiquery(const TaskInstance& instance, TaskResources& resources) {
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
  std::vector<int> asked = {0, 1, 2, 3};
  rng.Shuffle(asked);
  const std::string key_list = keys[asked[0]] + ", " + keys[asked[1]] + ", " + keys[asked[2]] +
                               " and " + keys[asked[3]];
  EvalTurn turn;
  turn.question = "What are the special magic numbers for " + key_list +
                  " mentioned in the text? Answer with the numbers only.";
  for (int i : asked) turn.answers.push_back(values[i]);
  turn.scoring = TurnScoring::kShare;
  turn.answer_prefix = "The special magic numbers for " + key_list + " are";
  task.turns.push_back(std::move(turn));
  task.max_new_tokens = 64;
  task.target_tokens = instance.length;
  task.depth = instance.depth;
  return task;
}

}  // namespace qevict::eval_internal
