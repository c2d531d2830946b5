// Internal helpers shared by the task generators (task_*.cc) and the haystack: a portable
// deterministic RNG (std::mt19937_64 with our own range mapping, since the standard
// distributions differ between library implementations), per-instance seeds, random keys and
// values, and needle insertion at token depths. Not part of the public API.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "eval/haystack.h"
#include "eval/task.h"

namespace qevict::eval_internal {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  uint64_t Next() { return engine_(); }
  // Uniform in [0, n), n > 0, by rejection (no modulo bias).
  uint64_t Below(uint64_t n);
  // Uniform in [lo, hi].
  int64_t Range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(Below(hi - lo + 1)); }
  // Uniform in [0, 1) from the top 53 bits.
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  template <typename T>
  void Shuffle(std::vector<T>& v) {  // Fisher-Yates
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

// SplitMix64 finalizer.
uint64_t Mix64(uint64_t x);

// Seed of one task instance from everything that names it, so that adding a length, depth or
// sample to a grid leaves every other instance unchanged. depth < 0 means "not applicable".
uint64_t InstanceSeed(uint64_t seed, std::string_view task, int64_t length, double depth,
                      int sample);

// A decimal number of exactly `digits` digits (no leading zero).
std::string RandomDigits(Rng& rng, int digits);
// `count` distinct numbers of `digits` digits.
std::vector<std::string> DistinctNumbers(Rng& rng, int count, int digits);
// `count` distinct two-word lowercase keys ("gentle-harbor"), no word shared between two keys.
std::vector<std::string> DistinctKeys(Rng& rng, int count);
// `count` distinct names of `letters` uppercase letters.
std::vector<std::string> DistinctNames(Rng& rng, int count, int letters);

struct Needle {
  std::string text;
  double depth = 0;  // in [0, 1]
};

// Inserts each needle between two pieces, after the first `first_boundary` pieces (the head: a
// task's instruction), so that the tokens between the head and the needle are closest to
// depth × (tokens of the result after the head - tokens of the needle): depth 0 is right after
// the head, depth 1 the very end. Needles are placed in depth order (stable for equal depths).
// break_tokens is what a blank line costs.
std::vector<TextPiece> InsertNeedles(const std::vector<TextPiece>& pieces,
                                     const std::vector<Needle>& needles,
                                     const TokenCounter& count_tokens, int64_t break_tokens,
                                     size_t first_boundary);

// Everything a task generator needs; the haystacks are built (and their sentences counted) once
// per GenerateTasks call, on first use.
class TaskResources {
 public:
  explicit TaskResources(const TokenCounter& count_tokens) : count_tokens_(count_tokens) {}
  const TokenCounter& count_tokens() const { return count_tokens_; }
  const Haystack& prose();
  const Haystack& passkey();

 private:
  const TokenCounter& count_tokens_;
  std::optional<Haystack> prose_, passkey_;  // built on first use
};

// One instance of a task: what the grid asked for and its private seed.
struct TaskInstance {
  std::string task;
  std::string id;
  int64_t length = 0;   // 0 when the task takes no length
  double depth = -1.0;  // -1 when the task takes no depth
  int sample = 0;
  uint64_t seed = 0;  // InstanceSeed(...)
};

using TaskGenerator = EvalTask (*)(const TaskInstance&, TaskResources&);

// The generators (task_<name>.cc).
EvalTask GeneratePasskey(const TaskInstance& instance, TaskResources& resources);
EvalTask GenerateNiah(const TaskInstance& instance, TaskResources& resources);
EvalTask GenerateMultikey(const TaskInstance& instance, TaskResources& resources);
EvalTask GenerateVt(const TaskInstance& instance, TaskResources& resources);
EvalTask GenerateDrift(const TaskInstance& instance, TaskResources& resources);
EvalTask GenerateTwoFacts(const TaskInstance& instance, TaskResources& resources);  // task_drift.cc
EvalTask GenerateLongGen(const TaskInstance& instance, TaskResources& resources);
EvalTask GeneratePpl(const TaskInstance& instance, TaskResources& resources);
EvalTask GenerateMultivalue(const TaskInstance& instance, TaskResources& resources);
EvalTask GenerateMultiquery(const TaskInstance& instance, TaskResources& resources);
EvalTask GenerateCwe(const TaskInstance& instance, TaskResources& resources);
EvalTask GenerateFwe(const TaskInstance& instance, TaskResources& resources);
EvalTask GenerateScbench(const TaskInstance& instance, TaskResources& resources);

// cwe's vocabulary (task_cwe.cc): English nouns, none in data/haystack, none a substring of
// another. fwe's coded words avoid them.
std::vector<std::string_view> CommonWordList();

// Shared by the needle tasks (niah, multikey, drift, multiquery; multivalue uses the instruction).
inline constexpr std::string_view kNiahInstruction =
    "Some special magic numbers are hidden within the following text. Make sure to memorize "
    "them. I will quiz you about the numbers afterwards.";
std::string NiahNeedle(const std::string& key, const std::string& value);
std::string NiahQuestion(const std::string& key);
// The turn of NiahQuestion(key), answered with `value`, with its completion-style answer prefix
// ("The special magic number for KEY is").
EvalTurn NiahTurn(const std::string& key, const std::string& value);

// multikey's and multiquery's needles: four NiahNeedles with distinct keys and 7-digit values
// (drawn from rng in that order), the first at the grid depth and the others a quarter of the
// context apart from it (wrapping around), in a questions task of the instance whose turns,
// answer length and depth the caller sets.
struct SpreadNeedles {
  std::vector<std::string> keys, values;
  EvalTask task;
};
SpreadNeedles FourSpreadNeedles(const TaskInstance& instance, TaskResources& resources, Rng& rng);

// A question-task context of about instance.length tokens: an instruction paragraph, then the
// haystack with the needles inserted at their depths (fractions of the text after the
// instruction, which is a few dozen tokens).
std::string BuildNeedleContext(const TaskInstance& instance, TaskResources& resources,
                               const Haystack& haystack, std::string_view instruction,
                               const std::vector<Needle>& needles);

}  // namespace qevict::eval_internal
