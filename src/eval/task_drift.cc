// drift: one context holding four facts of four different kinds (a safe's code, a person's
// favourite fruit, a train's platform, a room number), each a plain key-value sentence at its
// own depth (0.1, 0.37, 0.63, 0.9; which kind goes where is drawn per instance), and four
// questions asked one after another in the same session, each about a different fact and each
// answered before the next is asked: the second fact first, then the last, the first and the
// third. A cache compressed for the first question must still serve the others, whose facts
// the first question did not attend to: attention drifts back to what was archived.
//
// twofacts (the `make demo` task): the claim of the cold tier in its smallest form. One context
// holding two of those facts, of two kinds drawn per instance, at depths 0.25 and 0.75, and two
// questions in one session: the later fact first, then the earlier one, which the first
// question did not attend to.
//
// The facts differ in form, not only in their key, so that a small model does not answer one
// question with another fact's value (with four "special magic number for KEY" needles,
// SmolLM2-135M's full cache answered 0.53); the values are short things a model copies (digits,
// one word). No key or value word occurs in data/haystack/.
#include <span>
#include <string_view>

#include "eval/task_util.h"

namespace qevict::eval_internal {
namespace {

constexpr std::string_view kColors[] = {"purple", "orange", "yellow", "golden",
                                        "violet", "turquoise", "maroon", "indigo"};
constexpr std::string_view kNames[] = {"Anna", "Boris", "Clara", "Daniel", "Elena",
                                       "Felix", "Greta", "Hugo",  "Ines",   "Jonas"};
constexpr std::string_view kFruits[] = {"mango", "cherry", "banana",  "peach",  "lemon",
                                        "grape", "apricot", "melon", "papaya", "kiwi"};
constexpr std::string_view kCities[] = {"Lisbon", "Oslo",   "Vienna", "Dublin",
                                        "Prague", "Madrid", "Athens", "Warsaw"};
constexpr std::string_view kPlaces[] = {"museum",  "clinic",   "bakery",     "gallery",
                                        "theatre", "embassy", "pharmacy", "observatory"};

template <size_t N>
std::string Pick(Rng& rng, const std::string_view (&words)[N]) {
  return std::string(words[rng.Below(N)]);
}

struct Fact {
  std::string sentence;  // placed in the context
  EvalTurn turn;         // the question about it
};

Fact MakeFact(const std::string& sentence, const std::string& question,
              const std::string& answer_prefix, const std::string& answer) {
  Fact f;
  f.sentence = sentence;
  f.turn.question = question + " Answer briefly.";
  f.turn.answers = {answer};
  f.turn.answer_prefix = answer_prefix;
  return f;
}

// The four facts, one of each kind, in kind order.
std::vector<Fact> DrawFacts(Rng& rng) {
  const std::string color = Pick(rng, kColors), name = Pick(rng, kNames),
                    fruit = Pick(rng, kFruits), city = Pick(rng, kCities),
                    place = Pick(rng, kPlaces);
  const std::string code = RandomDigits(rng, 4), platform = RandomDigits(rng, 2),
                    room = RandomDigits(rng, 3);
  const std::string safe = "The code to open the " + color + " safe is";
  const std::string likes = name + "'s favourite fruit is the";
  const std::string train = "The train to " + city + " leaves from platform";
  const std::string where = "The room number of the " + place + " is";
  return {
      MakeFact(safe + " " + code + ".", "What is the code to open the " + color + " safe?", safe,
               code),
      MakeFact(likes + " " + fruit + ".", "What is " + name + "'s favourite fruit?", likes, fruit),
      MakeFact(train + " " + platform + ".",
               "From which platform does the train to " + city + " leave?", train, platform),
      MakeFact(where + " " + room + ".", "What is the room number of the " + place + "?", where,
               room),
  };
}

constexpr std::string_view kDriftInstruction =
    "Read the following text carefully. It contains a few facts that you will be asked about "
    "afterwards.";

// Facts of drawn kinds (one kind per depth, shuffled per instance) at `depths` of the context,
// then one question per fact in `ask_order` (indices into depths), as turns of one session.
EvalTask FactsTask(const TaskInstance& instance, TaskResources& resources,
                   std::span<const double> depths, std::span<const int> ask_order) {
  Rng rng(instance.seed);
  std::vector<Fact> facts = DrawFacts(rng);
  rng.Shuffle(facts);  // facts[slot]: the kind at each depth is drawn per instance
  std::vector<Needle> needles;
  for (size_t slot = 0; slot < depths.size(); ++slot) {
    needles.push_back(Needle{facts[slot].sentence, depths[slot]});
  }
  EvalTask task;
  task.task = instance.task;
  task.id = instance.id;
  task.kind = TaskKind::kQuestions;
  task.context =
      BuildNeedleContext(instance, resources, resources.prose(), kDriftInstruction, needles);
  for (int slot : ask_order) task.turns.push_back(facts[slot].turn);
  task.max_new_tokens = 24;
  task.target_tokens = instance.length;
  task.depth = -1.0;
  return task;
}

}  // namespace

EvalTask GenerateDrift(const TaskInstance& instance, TaskResources& resources) {
  constexpr double kDepths[] = {0.1, 0.37, 0.63, 0.9};
  constexpr int kAskOrder[] = {1, 3, 0, 2};  // by depth slot: second, last, first, third
  return FactsTask(instance, resources, kDepths, kAskOrder);
}

EvalTask GenerateTwoFacts(const TaskInstance& instance, TaskResources& resources) {
  constexpr double kDepths[] = {0.25, 0.75};
  constexpr int kAskOrder[] = {1, 0};  // by depth slot: the later fact, then the earlier
  return FactsTask(instance, resources, kDepths, kAskOrder);
}

}  // namespace qevict::eval_internal
