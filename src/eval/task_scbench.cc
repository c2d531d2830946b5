// scbench (after SCBench's multi-turn mode: one shared context, several queries in one session):
// five facts of five different kinds, one sentence each, at depths 0.1, 0.3, 0.5, 0.7 and 0.9 of
// the shipped prose (which kind goes where is random), and five turns asked one after another in
// the same session, each answered before the next is asked, in the order 0.5, 0.1, 0.9, 0.3,
// 0.7 (every turn jumps at least 0.4 of the context away from the last). The kinds:
//   "The code to open the COLOUR locker is NNNN."          -> NNNN (4 digits)
//   "NAME's favourite fruit is the FRUIT."                  -> FRUIT
//   "The train to CITY leaves from platform NN."            -> NN (10-49)
//   "The freighter SHIP carries a cargo of GOODS."          -> GOODS
//   "The INSTRUMENT lessons take place in room NNN."        -> NNN (100-999)
// None of the key or answer words occurs in data/haystack, and no number is part of another.
// Every turn has an answer prefix restating its key ("The train to Oslo leaves from platform");
// scored any (one answer a turn); the row's accuracy is the share of turns answered. SCBench's
// own tasks (retrieval of long keys, QA, summarization, ...) are on real documents of 100k+
// tokens, and it feeds the ground-truth answers of earlier turns into later ones; here the
// model's own answers stay in the session.
#include <algorithm>
#include <string>

#include "eval/task_util.h"

namespace qevict::eval_internal {
namespace {

constexpr int kFacts = 5;
constexpr double kDepths[kFacts] = {0.1, 0.3, 0.5, 0.7, 0.9};
constexpr int kAskOrder[kFacts] = {2, 0, 4, 1, 3};

constexpr std::string_view kColours[] = {"yellow",   "purple", "orange", "pink",    "grey",
                                         "golden",   "violet", "maroon", "beige",   "lavender",
                                         "indigo",   "teal",   "magenta", "turquoise"};
constexpr std::string_view kNames[] = {"Anna",  "Boris", "Clara",  "Dmitri", "Elena", "Farid",
                                       "Greta", "Hugo",  "Ingrid", "Jonas",  "Kofi",  "Lena",
                                       "Marco", "Nadia", "Oscar",  "Priya",  "Rosa",  "Stefan",
                                       "Tomas", "Ursula", "Viktor", "Wanda", "Yusuf", "Zara"};
constexpr std::string_view kFruits[] = {"mango",   "papaya",    "apricot",     "kiwi",
                                        "cherry",  "peach",     "lychee",      "guava",
                                        "quince",  "banana",    "pomegranate", "coconut",
                                        "pineapple", "tangerine", "raspberry", "blueberry"};
constexpr std::string_view kCities[] = {"Oslo",   "Lisbon",  "Vienna",  "Prague",   "Dublin",
                                        "Zurich", "Madrid",  "Warsaw",  "Helsinki", "Athens",
                                        "Budapest", "Geneva", "Milan",  "Munich",   "Krakow",
                                        "Seville", "Bergen", "Porto",   "Lyon",     "Antwerp"};
constexpr std::string_view kShips[] = {"Albatross", "Valkyrie", "Neptune", "Osprey",  "Tempest",
                                       "Kestrel",   "Marlin",   "Nautilus", "Calypso", "Orion",
                                       "Pegasus",   "Triton",   "Voyager", "Odyssey", "Meridian"};
constexpr std::string_view kGoods[] = {"copper", "rice",   "sugar",  "cotton",  "coal",  "rubber",
                                       "cocoa",  "zinc",   "nickel", "tobacco", "marble"};
constexpr std::string_view kInstruments[] = {
    "cello",     "banjo",   "oboe",      "tuba",     "clarinet", "accordion", "saxophone",
    "trombone",  "ukulele", "mandolin",  "xylophone", "bassoon", "harmonica"};

template <size_t N>
std::string Pick(Rng& rng, const std::string_view (&pool)[N]) {
  return std::string(pool[rng.Below(N)]);
}

struct Fact {
  std::string sentence;
  EvalTurn turn;
};

Fact MakeFact(int kind, Rng& rng, const std::string numbers[3]) {
  Fact f;
  EvalTurn& t = f.turn;
  switch (kind) {
    case 0: {
      const std::string colour = Pick(rng, kColours);
      f.sentence = "The code to open the " + colour + " locker is " + numbers[0] + ".";
      t.question =
          "What is the code to open the " + colour + " locker? Answer with the number only.";
      t.answers = {numbers[0]};
      t.answer_prefix = "The code to open the " + colour + " locker is";
      break;
    }
    case 1: {
      const std::string name = Pick(rng, kNames), fruit = Pick(rng, kFruits);
      f.sentence = name + "'s favourite fruit is the " + fruit + ".";
      t.question = "What is " + name + "'s favourite fruit? Answer in one word.";
      t.answers = {fruit};
      t.answer_prefix = name + "'s favourite fruit is the";
      break;
    }
    case 2: {
      const std::string city = Pick(rng, kCities);
      f.sentence = "The train to " + city + " leaves from platform " + numbers[1] + ".";
      t.question =
          "From which platform does the train to " + city + " leave? Answer with the number only.";
      t.answers = {numbers[1]};
      t.answer_prefix = "The train to " + city + " leaves from platform";
      break;
    }
    case 3: {
      const std::string ship = Pick(rng, kShips), goods = Pick(rng, kGoods);
      f.sentence = "The freighter " + ship + " carries a cargo of " + goods + ".";
      t.question = "What does the freighter " + ship + " carry? Answer in one word.";
      t.answers = {goods};
      t.answer_prefix = "The freighter " + ship + " carries a cargo of";
      break;
    }
    default: {
      const std::string instrument = Pick(rng, kInstruments);
      f.sentence = "The " + instrument + " lessons take place in room " + numbers[2] + ".";
      t.question = "In which room do the " + instrument +
                   " lessons take place? Answer with the number only.";
      t.answers = {numbers[2]};
      t.answer_prefix = "The " + instrument + " lessons take place in room";
      break;
    }
  }
  return f;
}

}  // namespace

EvalTask GenerateScbench(const TaskInstance& instance, TaskResources& resources) {
  Rng rng(instance.seed);
  // The locker code, the platform and the room: no one a substring of another, so that naming
  // the wrong one never scores.
  std::string numbers[3];
  do {
    numbers[0] = RandomDigits(rng, 4);
    numbers[1] = std::to_string(rng.Range(10, 49));
    numbers[2] = std::to_string(rng.Range(100, 999));
  } while (numbers[0].find(numbers[1]) != std::string::npos ||
           numbers[0].find(numbers[2]) != std::string::npos ||
           numbers[2].find(numbers[1]) != std::string::npos);
  std::vector<int> kinds = {0, 1, 2, 3, 4};
  rng.Shuffle(kinds);  // kinds[i]: the kind of fact at kDepths[i]
  std::vector<Fact> facts;
  std::vector<Needle> needles;
  for (int i = 0; i < kFacts; ++i) {
    facts.push_back(MakeFact(kinds[i], rng, numbers));
    needles.push_back(Needle{facts.back().sentence, kDepths[i]});
  }
  EvalTask task;
  task.task = instance.task;
  task.id = instance.id;
  task.kind = TaskKind::kQuestions;
  task.context = BuildNeedleContext(
      instance, resources, resources.prose(),
      "A few facts are hidden within the following text. Make sure to memorize them. I will "
      "quiz you about them afterwards, one question at a time.",
      needles);
  for (int i : kAskOrder) task.turns.push_back(facts[i].turn);
  task.max_new_tokens = 32;
  task.target_tokens = instance.length;
  task.depth = -1.0;
  return task;
}

}  // namespace qevict::eval_internal
