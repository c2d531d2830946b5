// multiquery (after RULER's niah_multiquery): four niah needles "The special magic number for
// KEY is VALUE." with different keys and values, the first at the grid depth and the others a
// quarter of the context apart from it (wrapping around, as in multikey); one question names
// all four keys, in a random order as in RULER, and asks for their numbers; scored by the share
// of the four values that appear in the answer (RULER's string_match_all). RULER places the
// needles at evenly spaced depths and phrases the needle "One of the special magic numbers for
// KEY is: VALUE.".
#include <utility>

#include "eval/task_util.h"

namespace qevict::eval_internal {

EvalTask GenerateMultiquery(const TaskInstance& instance, TaskResources& resources) {
  Rng rng(instance.seed);
  SpreadNeedles spread = FourSpreadNeedles(instance, resources, rng);
  const std::vector<std::string>& keys = spread.keys;
  const std::vector<std::string>& values = spread.values;
  EvalTask& task = spread.task;
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
  return std::move(task);
}

}  // namespace qevict::eval_internal
