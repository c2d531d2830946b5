// cwe (common words extraction, after RULER's cwe): a numbered list of English words on one line,
// "1. cello 2. walrus 3. cello ...", in which 10 common words appear 30 times each and every
// other word 3 times, in random order; the list is as long as the context length asks (more
// rare words). Question: "What are the 10 most common words in the above list?"; scored by the
// share of the 10 that appear in the answer (RULER's string_match_all). As in RULER, the
// frequencies shrink for short contexts (10 x 30 words need about 2k tokens) and grow, ten to
// one, once every word of the vocabulary (562 nouns, none in data/haystack) is in the list.
// RULER also puts a worked example before the list, whose answer shows the format "1. word
// 2. word ..."; we do not, and the completion-style answer prefix ends "are: 1." instead, so that
// a base model writes the list on the answer's line (a line break ends a completion answer).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "eval/task_util.h"

namespace qevict::eval_internal {
namespace {

// Concrete English nouns, none occurring in data/haystack, none a substring of another (the
// answer match is a substring test).
constexpr std::string_view kWords[] = {
    "abacus", "accordion", "acrobat", "admiral", "adventure", "airport", "album", "alchemy",
    "algebra", "alligator", "almanac", "alphabet", "ambulance", "amulet", "anchovy", "anemone",
    "angel", "ankle", "antelope", "antenna", "anthem", "apricot", "aquarium", "arcade", "archer",
    "archive", "armadillo", "armchair", "artichoke", "asparagus", "asteroid", "astronaut",
    "athlete", "atlas", "attic", "auction", "aurora", "avalanche", "avenue", "avocado", "axle",
    "backpack", "bagel", "bakery", "balcony", "ballet", "banana", "bandage", "banjo", "banker",
    "banner", "banquet", "barber", "barley", "barrel", "basement", "basil", "bassoon", "battery",
    "bazaar", "beetle", "bellows", "beverage", "billboard", "binoculars", "biscuit", "bison",
    "blender", "blizzard", "blueprint", "bobcat", "bonnet", "boomerang", "bouquet", "boutique",
    "bracelet", "broccoli", "brochure", "buffalo", "bulldozer", "bungalow", "burrito", "butler",
    "button", "buzzard", "cabbage", "cabin", "cafeteria", "calculator", "camera", "cantaloupe",
    "caramel", "caravan", "cardigan", "carnival", "carousel", "carpenter", "carrot", "cartoon",
    "cashew", "casino", "casserole", "castle", "caterpillar", "cathedral", "cauliflower", "cavern",
    "celery", "cello", "cement", "census", "ceramic", "cereal", "chalk", "champion", "chandelier",
    "chapel", "cheetah", "chemist", "cherry", "chestnut", "chipmunk", "chocolate", "chorus",
    "cinema", "circus", "citizen", "clarinet", "clinic", "closet", "clover", "cocoa", "coconut",
    "collar", "colonel", "comedy", "concert", "condor", "confetti", "cookie", "copper", "corridor",
    "costume", "cottage", "cotton", "cougar", "coupon", "cowboy", "coyote", "crayon", "cricket",
    "crocodile", "croissant", "crystal", "cucumber", "cupcake", "cushion", "cyclone", "cymbal",
    "daffodil", "dagger", "dairy", "daisy", "dentist", "dessert", "detective", "dictionary",
    "dinosaur", "diploma", "dolphin", "domino", "donkey", "doorbell", "dragonfly", "drummer",
    "dumpling", "dungeon", "dynamo", "eclipse", "editor", "eggplant", "elbow", "elephant",
    "elevator", "elk", "embassy", "emerald", "emperor", "encyclopedia", "engine", "eraser",
    "escalator", "espresso", "estate", "eyebrow", "fabric", "factory", "falcon", "fantasy",
    "faucet", "ferry", "filament", "firefly", "flamingo", "flannel", "flashlight", "folder",
    "football", "fossil", "fountain", "freckle", "freezer", "furnace", "galaxy", "gallery",
    "gallon", "garage", "gardenia", "garlic", "gazelle", "gecko", "gelatin", "generator", "geyser",
    "ginger", "giraffe", "glacier", "gladiator", "globe", "goblet", "goggles", "goldfish",
    "gondola", "gorilla", "gourmet", "governor", "granite", "grapefruit", "grasshopper", "griddle",
    "guitar", "gymnasium", "hamburger", "hammock", "hamster", "handbag", "harmonica", "harpoon",
    "hazelnut", "headphones", "helicopter", "helmet", "hermit", "hippo", "hockey", "hornet",
    "hospital", "hotel", "hurricane", "hyena", "iceberg", "icicle", "igloo", "iguana", "inventor",
    "invoice", "ivory", "jacket", "jaguar", "janitor", "jasmine", "javelin", "jellyfish", "jersey",
    "jester", "jigsaw", "jockey", "journal", "juggler", "jukebox", "jungle", "kangaroo", "kayak",
    "kernel", "ketchup", "keyboard", "kiosk", "kitten", "kiwi", "knapsack", "koala", "laboratory",
    "ladder", "ladle", "lantern", "laptop", "lasagna", "lawyer", "lemonade", "leopard", "lettuce",
    "limestone", "limousine", "lizard", "lobster", "locket", "locomotive", "lollipop", "macaroni",
    "magazine", "magician", "magnet", "magnolia", "mailbox", "mammoth", "mandolin", "mango",
    "mansion", "marathon", "marble", "marina", "marshmallow", "mascot", "mattress", "meadow",
    "mechanic", "medal", "melody", "menu", "mermaid", "meteor", "microphone", "microscope",
    "microwave", "minnow", "mirror", "mitten", "moccasin", "monastery", "monitor", "monkey",
    "monsoon", "moose", "mosaic", "mosquito", "motel", "motorcycle", "muffin", "museum", "mushroom",
    "musician", "mustard", "napkin", "necklace", "nephew", "noodle", "notebook", "novel", "nugget",
    "oatmeal", "observatory", "ocelot", "octopus", "omelet", "onion", "opera", "orchestra",
    "orchid", "ostrich", "otter", "oven", "oyster", "paddle", "pagoda", "pajamas", "palace",
    "pancake", "panda", "panther", "papaya", "parachute", "parade", "parrot", "parsley", "passport",
    "pasta", "pastry", "peacock", "peanut", "pebble", "pelican", "pendant", "penguin", "pharmacy",
    "pheasant", "piano", "pickle", "pigeon", "pilgrim", "pillow", "pineapple", "pirate",
    "pistachio", "pizza", "plumber", "poet", "polka", "pony", "popcorn", "porcupine", "postcard",
    "potato", "pretzel", "printer", "professor", "pudding", "puffin", "puzzle", "pyramid", "python",
    "quail", "quarry", "quartz", "quiver", "raccoon", "racket", "radar", "radio", "radish",
    "raisin", "raven", "receipt", "referee", "reindeer", "reptile", "restaurant", "rhino", "robot",
    "rocket", "rodeo", "rooster", "ruby", "saddle", "safari", "saffron", "salad", "salmon",
    "sandal", "sandwich", "sapphire", "sardine", "satellite", "sausage", "saxophone", "scarecrow",
    "scarf", "scooter", "scorpion", "sculptor", "seahorse", "senator", "sheriff", "skeleton",
    "skyscraper", "slipper", "snorkel", "sofa", "sombrero", "spaghetti", "spatula", "spider",
    "spinach", "sponge", "stadium", "stapler", "starfish", "statue", "stethoscope", "strawberry",
    "submarine", "subway", "suitcase", "sunflower", "surgeon", "sushi", "swan", "sweater",
    "symphony", "syrup", "taco", "tambourine", "tangerine", "tapestry", "taxi", "teacup", "teapot",
    "television", "tennis", "tentacle", "terrace", "thermometer", "thimble", "tiger", "toaster",
    "toboggan", "tofu", "tornado", "tortoise", "tractor", "trampoline", "tricycle", "trombone",
    "trophy", "trumpet", "tuba", "tulip", "turkey", "turtle", "tuxedo", "typewriter", "ukulele",
    "umbrella", "unicorn", "uniform", "utensil", "vaccine", "vampire", "vanilla", "vase", "velvet",
    "veranda", "vest", "veteran", "villa", "vinegar", "violin", "volcano", "volleyball", "vulture",
    "waffle", "waiter", "walnut", "walrus", "wardrobe", "warrior", "wasp", "watermelon", "weasel",
    "wheelbarrow", "whistle", "wizard", "wolf", "wombat", "woodpecker", "wrestler", "xylophone",
    "yacht", "yogurt", "zebra", "zeppelin", "zipper", "zucchini",
};

constexpr int kCommon = 10;

constexpr std::string_view kInstruction =
    "Below is a numbered list of words. In these words, some appear more often than others. "
    "Memorize the ones that appear most often.";

struct Frequencies {
  int common = 30;  // times each common word appears
  int rare = 3;     // times each other word appears
  int rare_words = 0;
};

// The frequencies for a list of about `entries` words: RULER's 30 / 3 when the list is long
// enough for 10 x 30 common words to be at most half of it; in shorter lists entries / 20 (at
// least 2) and a tenth of it (at least 1); in lists longer than the vocabulary holds at 3 each,
// 10 and 1 times the smallest rare frequency that fits. The common frequency always exceeds the
// rare one.
Frequencies FrequenciesFor(int64_t entries, int64_t vocabulary) {
  Frequencies f;
  f.common = static_cast<int>(std::clamp<int64_t>(entries / 20, 2, 30));
  f.rare = std::max(1, f.common / 10);
  const int64_t max_rare_words = vocabulary - kCommon;
  while ((entries - kCommon * f.common) / f.rare > max_rare_words) {
    ++f.rare;
    f.common = 10 * f.rare;
  }
  f.rare_words = static_cast<int>(
      std::clamp<int64_t>((entries - kCommon * f.common) / f.rare, 0, max_rare_words));
  return f;
}

std::string NumberedList(const std::vector<std::string_view>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += ' ';
    out += std::to_string(i + 1) + ". ";
    out += words[i];
  }
  return out;
}

}  // namespace

std::vector<std::string_view> CommonWordList() {
  return std::vector<std::string_view>(std::begin(kWords), std::end(kWords));
}

EvalTask GenerateCwe(const TaskInstance& instance, TaskResources& resources) {
  const TokenCounter& count = resources.count_tokens();
  Rng rng(instance.seed);
  std::vector<std::string_view> vocabulary = CommonWordList();
  rng.Shuffle(vocabulary);  // the first 10 are the common words, then the rare ones in order
  const std::string head = std::string(kInstruction) + "\n\n";
  const int64_t head_tokens = count(head);
  const int64_t target = instance.length - head_tokens;
  // Entries ("12. walrus") per token, refined on the rendered list; each attempt is a pure
  // function of the entry count, so the result depends on the seed and length alone.
  int64_t entries = std::max<int64_t>(target / 5, 20);
  std::string context;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const Frequencies f = FrequenciesFor(entries, static_cast<int64_t>(vocabulary.size()));
    std::vector<std::string_view> list;
    for (int w = 0; w < kCommon; ++w) list.insert(list.end(), f.common, vocabulary[w]);
    for (int w = 0; w < f.rare_words; ++w) list.insert(list.end(), f.rare, vocabulary[kCommon + w]);
    Rng order(Mix64(instance.seed));
    order.Shuffle(list);
    context = head + NumberedList(list);
    const int64_t tokens = count(context);
    const int64_t error = instance.length - tokens;
    if (std::llabs(error) * 50 <= instance.length) break;  // within 2%
    const double per_entry =
        static_cast<double>(tokens - head_tokens) / static_cast<double>(list.size());
    // The parameter moves, not the list size: rounding the frequencies loses a few entries.
    entries = std::max<int64_t>(
        20, entries + static_cast<int64_t>(static_cast<double>(error) / per_entry));
  }
  EvalTask task;
  task.task = instance.task;
  task.id = instance.id;
  task.kind = TaskKind::kQuestions;
  task.context = std::move(context);
  EvalTurn turn;
  turn.question = "What are the 10 most common words in the above list?";
  turn.answers.assign(vocabulary.begin(), vocabulary.begin() + kCommon);
  turn.scoring = TurnScoring::kShare;
  turn.answer_prefix = "The top 10 words that appear most often in the list are: 1.";
  task.turns.push_back(std::move(turn));
  task.max_new_tokens = 100;
  task.target_tokens = instance.length;
  task.depth = -1.0;
  return task;
}

}  // namespace qevict::eval_internal
