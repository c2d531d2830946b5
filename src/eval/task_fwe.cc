// fwe (frequent words extraction, after RULER's fwe): "coded text", a run of made-up six-letter
// words ("bafoki") separated by spaces, whose counts follow a Zipf law with alpha 2: the word of
// rank k appears floor(N k^-2 / zeta(2)) times (N about the number of words the length holds).
// As in RULER the rank-1 "word" is noise, "....", which the question says to ignore; the answers
// are the words of ranks 2, 3 and 4 ("What are the three most frequently appearing coded words
// in the above text?"), scored by the share of the three found. Words of rank 5 and beyond
// appear strictly fewer times than the rank-4 word. Differences from RULER: its coded words are
// random letters, ours alternate consonants and vowels (fewer tokens, easier to copy), are none
// of data/haystack's words nor of cwe's word list, and a word whose count would be 0 is left out;
// RULER's answer prefix ends "are:", ours 'are "', so that a base model quotes the words on the
// answer's line (after "are:" small models start a list on the next line, and a line break
// ends a completion answer).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <numbers>
#include <set>
#include <string>

#include "eval/task_util.h"

namespace qevict::eval_internal {
namespace {

constexpr int kAnswers = 3;
constexpr std::string_view kNoise = "....";
constexpr std::string_view kConsonants = "bdfgklmnprstvz";
constexpr std::string_view kVowels = "aeiou";

constexpr std::string_view kInstruction =
    "Read the following coded text and track the frequency of each coded word. Find the three "
    "most frequently appearing coded words.";

// Lowercase words of the prose haystack and cwe's word list: coded words must be none of them.
std::set<std::string> BannedWords(TaskResources& resources) {
  std::set<std::string> banned;
  for (std::string_view w : CommonWordList()) banned.emplace(w);
  const Haystack& prose = resources.prose();
  for (size_t p = 0; p < prose.paragraph_count(); ++p) {
    for (const TextPiece& piece : prose.paragraph(p)) {
      std::string word;
      for (const char c : piece.text + " ") {
        if (std::isalpha(static_cast<unsigned char>(c))) {
          word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        } else if (!word.empty()) {
          banned.insert(word);
          word.clear();
        }
      }
    }
  }
  return banned;
}

// Appends distinct coded words (CVCVCV, none banned) to `words` until it holds `count`.
void AddCodedWords(Rng& rng, size_t count, const std::set<std::string>& banned,
                   std::vector<std::string>& words) {
  std::set<std::string> seen(words.begin(), words.end());
  while (words.size() < count) {
    std::string w;
    for (int i = 0; i < 3; ++i) {
      w += kConsonants[rng.Below(kConsonants.size())];
      w += kVowels[rng.Below(kVowels.size())];
    }
    if (banned.count(w) == 0 && seen.insert(w).second) words.push_back(std::move(w));
  }
}

// Counts per rank (index 0: rank 1, the noise) for a text of about `words` words.
std::vector<int64_t> ZipfCounts(int64_t words) {
  constexpr double kZeta2 = std::numbers::pi * std::numbers::pi / 6.0;
  std::vector<int64_t> counts;
  for (int64_t k = 1;; ++k) {
    const auto c = static_cast<int64_t>(static_cast<double>(words) /
                                        (static_cast<double>(k * k) * kZeta2));
    if (c < 1 && k > kAnswers + 2) break;
    counts.push_back(std::max<int64_t>(c, 1));
  }
  // Ranks 1..5 strictly decreasing (ties only happen in very short texts), and every rank past
  // the answers' below the last answer.
  for (int r = kAnswers; r >= 0; --r) counts[r] = std::max(counts[r], counts[r + 1] + 1);
  for (size_t r = kAnswers + 1; r < counts.size(); ++r) {
    counts[r] = std::min(counts[r], counts[kAnswers] - 1);
  }
  return counts;
}

}  // namespace

EvalTask GenerateFwe(const TaskInstance& instance, TaskResources& resources) {
  const TokenCounter& count = resources.count_tokens();
  Rng rng(instance.seed);
  const std::set<std::string> banned = BannedWords(resources);
  const std::string head = std::string(kInstruction) + "\n\n";
  const int64_t head_tokens = count(head);
  int64_t words = std::max<int64_t>((instance.length - head_tokens) / 2, 20);
  std::vector<std::string> vocabulary;  // rank k+1 at index k (index 0 unused: the noise)
  std::string context;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const std::vector<int64_t> counts = ZipfCounts(words);
    AddCodedWords(rng, counts.size(), banned, vocabulary);  // only grows: a prefix is kept
    std::vector<std::string_view> text;
    for (size_t r = 0; r < counts.size(); ++r) {
      const std::string_view w = r == 0 ? kNoise : std::string_view(vocabulary[r]);
      text.insert(text.end(), static_cast<size_t>(counts[r]), w);
    }
    Rng order(Mix64(instance.seed));
    order.Shuffle(text);
    context = head;
    for (size_t i = 0; i < text.size(); ++i) {
      if (i > 0) context += ' ';
      context += text[i];
    }
    const int64_t tokens = count(context);
    const int64_t error = instance.length - tokens;
    if (std::llabs(error) * 50 <= instance.length) break;  // within 2%
    const double per_word =
        static_cast<double>(tokens - head_tokens) / static_cast<double>(text.size());
    // The parameter moves, not the word count: rounding the counts down loses a few words.
    words = std::max<int64_t>(20, words + static_cast<int64_t>(static_cast<double>(error) / per_word));
  }
  EvalTask task;
  task.task = instance.task;
  task.id = instance.id;
  task.kind = TaskKind::kQuestions;
  task.context = std::move(context);
  EvalTurn turn;
  turn.question =
      "Do not provide any explanation. Please ignore the dots '....'. What are the three most "
      "frequently appearing coded words in the above text?";
  turn.answers.assign(vocabulary.begin() + 1, vocabulary.begin() + 1 + kAnswers);
  turn.scoring = TurnScoring::kShare;
  turn.answer_prefix =
      "According to the coded text above, the three most frequently appearing words are \"";
  task.turns.push_back(std::move(turn));
  task.max_new_tokens = 40;
  task.target_tokens = instance.length;
  task.depth = -1.0;
  return task;
}

}  // namespace qevict::eval_internal
