// Shared machinery of the task generators: portable RNG, instance seeds, random keys / values /
// names, needle insertion at token depths and the common needle-task context layout.
#include "eval/task_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <set>

#include "util/error.h"

namespace qevict::eval_internal {
namespace {

// Words of the niah keys; none of them occurs in data/haystack.
constexpr std::string_view kKeyAdjectives[] = {
    "amber", "brave",  "golden", "rapid",  "silent", "crimson", "mellow",  "nimble", "frosty",
    "misty", "rustic", "cosmic", "velvet", "humble", "dusty",   "scarlet", "jolly",  "vivid",
    "fuzzy", "breezy", "eager",  "fancy",  "hazy",   "icy",     "ivory",   "jade",   "mossy",
    "noble", "plucky", "royal",  "shiny",  "sleepy", "lively",  "tawny",   "witty",  "zesty"};
constexpr std::string_view kKeyNouns[] = {
    "lantern", "falcon",  "meadow",  "pebble", "canyon",  "thimble", "beacon",  "lagoon",
    "badger",  "comet",   "garnet",  "parrot", "walnut",  "saddle",  "prairie", "tundra",
    "marble",  "cobalt",  "kettle",  "turnip", "ember",   "glacier", "otter",   "puffin",
    "violin",  "zephyr",  "raven",   "anchor", "trumpet", "maple",   "acorn",   "pillow",
    "rocket",  "feather", "dolphin", "biscuit"};

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// `count` distinct indices below n, in random order.
std::vector<size_t> PickDistinct(Rng& rng, size_t count, size_t n) {
  QEVICT_CHECK(count <= n);
  std::vector<size_t> all(n);
  std::iota(all.begin(), all.end(), size_t{0});
  for (size_t i = 0; i < count; ++i) std::swap(all[i], all[i + rng.Below(n - i)]);
  all.resize(count);
  return all;
}

}  // namespace

uint64_t Rng::Below(uint64_t n) {
  QEVICT_CHECK(n > 0);
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  const uint64_t limit = max - (max % n + 1) % n;  // largest multiple of n, minus one
  uint64_t x;
  do {
    x = Next();
  } while (x > limit);
  return x % n;
}

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t InstanceSeed(uint64_t seed, std::string_view task, int64_t length, double depth,
                      int sample) {
  const uint64_t depth_code =
      depth < 0 ? ~uint64_t{0} : static_cast<uint64_t>(std::llround(depth * 1e6));
  uint64_t h = Mix64(seed);
  h = Mix64(h ^ Fnv1a(task));
  h = Mix64(h ^ static_cast<uint64_t>(length));
  h = Mix64(h ^ depth_code);
  h = Mix64(h ^ static_cast<uint64_t>(sample));
  return h;
}

std::string RandomDigits(Rng& rng, int digits) {
  std::string s;
  for (int i = 0; i < digits; ++i) {
    s += static_cast<char>('0' + (i == 0 ? rng.Range(1, 9) : rng.Range(0, 9)));
  }
  return s;
}

std::vector<std::string> DistinctNumbers(Rng& rng, int count, int digits) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  while (static_cast<int>(out.size()) < count) {
    std::string s = RandomDigits(rng, digits);
    if (seen.insert(s).second) out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> DistinctKeys(Rng& rng, int count) {
  constexpr size_t kAdj = std::size(kKeyAdjectives), kNoun = std::size(kKeyNouns);
  std::vector<size_t> adj = PickDistinct(rng, count, kAdj);
  std::vector<size_t> noun = PickDistinct(rng, count, kNoun);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(std::string(kKeyAdjectives[adj[i]]) + "-" + std::string(kKeyNouns[noun[i]]));
  }
  return out;
}

std::vector<std::string> DistinctNames(Rng& rng, int count, int letters) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  while (static_cast<int>(out.size()) < count) {
    std::string s;
    for (int i = 0; i < letters; ++i) s += static_cast<char>('A' + rng.Below(26));
    if (seen.insert(s).second) out.push_back(std::move(s));
  }
  return out;
}

std::vector<TextPiece> InsertNeedles(const std::vector<TextPiece>& pieces,
                                     const std::vector<Needle>& needles,
                                     const TokenCounter& count_tokens, int64_t break_tokens,
                                     size_t first_boundary) {
  std::vector<TextPiece> needle_pieces;
  int64_t total = PieceTokens(pieces, break_tokens);
  for (const Needle& n : needles) {
    needle_pieces.push_back(TextPiece{n.text, count_tokens(n.text), false});
    total += needle_pieces.back().tokens;
  }
  std::vector<size_t> order(needles.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return needles[a].depth < needles[b].depth; });

  std::vector<TextPiece> out;
  out.reserve(pieces.size() + needles.size());
  size_t next = 0;
  int64_t before = 0;  // tokens emitted so far, with the blank line after a paragraph's end
  auto emit = [&] {
    const TextPiece& p = pieces[next++];
    before += p.tokens + (p.paragraph_end ? break_tokens : 0);
    out.push_back(p);
  };
  while (next < std::min(first_boundary, pieces.size())) emit();
  const int64_t head = before;  // depths are fractions of what follows the fixed head
  for (size_t i : order) {
    const double target =
        static_cast<double>(head) +
        needles[i].depth * static_cast<double>(total - head - needle_pieces[i].tokens);
    while (next < pieces.size()) {
      const TextPiece& p = pieces[next];
      const double after =
          static_cast<double>(before + p.tokens + (p.paragraph_end ? break_tokens : 0));
      if (std::abs(after - target) >= std::abs(static_cast<double>(before) - target)) break;
      emit();
    }
    out.push_back(needle_pieces[i]);
    before += needle_pieces[i].tokens;
  }
  while (next < pieces.size()) emit();
  return out;
}

const Haystack& TaskResources::prose() {
  if (!prose_) prose_ = Haystack::LoadProse(count_tokens_);
  return *prose_;
}

const Haystack& TaskResources::passkey() {
  if (!passkey_) passkey_ = Haystack::Passkey(count_tokens_);
  return *passkey_;
}

std::string NiahNeedle(const std::string& key, const std::string& value) {
  return "The special magic number for " + key + " is " + value + ".";
}

SpreadNeedles FourSpreadNeedles(const TaskInstance& instance, TaskResources& resources, Rng& rng) {
  constexpr int kNeedles = 4;
  SpreadNeedles out;
  out.keys = DistinctKeys(rng, kNeedles);
  out.values = DistinctNumbers(rng, kNeedles, 7);
  std::vector<Needle> needles;
  for (int i = 0; i < kNeedles; ++i) {
    const double depth = i == 0 ? instance.depth : std::fmod(instance.depth + 0.25 * i, 1.0);
    needles.push_back(Needle{NiahNeedle(out.keys[i], out.values[i]), depth});
  }
  out.task.task = instance.task;
  out.task.id = instance.id;
  out.task.kind = TaskKind::kQuestions;
  out.task.context =
      BuildNeedleContext(instance, resources, resources.prose(), kNiahInstruction, needles);
  out.task.target_tokens = instance.length;
  out.task.depth = instance.depth;
  return out;
}

std::string NiahQuestion(const std::string& key) {
  return "What is the special magic number for " + key +
         " mentioned in the text? Answer with the number only.";
}

EvalTurn NiahTurn(const std::string& key, const std::string& value) {
  EvalTurn turn;
  turn.question = NiahQuestion(key);
  turn.answers = {value};
  turn.answer_prefix = "The special magic number for " + key + " is";
  return turn;
}

std::string BuildNeedleContext(const TaskInstance& instance, TaskResources& resources,
                               const Haystack& haystack, std::string_view instruction,
                               const std::vector<Needle>& needles) {
  const TokenCounter& count = resources.count_tokens();
  TextPiece header{std::string(instruction), count(instruction), true};
  int64_t needle_tokens = 0;
  for (const Needle& n : needles) needle_tokens += count(n.text);
  int64_t filler_target =
      instance.length - header.tokens - haystack.paragraph_break_tokens() - needle_tokens;
  std::string context;
  // Sentence counts summed need not equal the count of the joined text (a tokenizer merges
  // across boundaries); the whole context is counted once and the filler corrected up to twice.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<TextPiece> pieces = {header};
    for (TextPiece& p : haystack.Fill(std::max<int64_t>(filler_target, 1), Mix64(instance.seed))) {
      pieces.push_back(std::move(p));
    }
    context = JoinPieces(
        InsertNeedles(pieces, needles, count, haystack.paragraph_break_tokens(), /*first=*/1));
    const int64_t error = instance.length - count(context);
    if (std::llabs(error) * 50 <= instance.length) break;  // within 2%
    filler_target += error;
  }
  return context;
}

}  // namespace qevict::eval_internal
