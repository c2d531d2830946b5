// Tests of the haystack (data/haystack, eval/haystack.h) and the task generators
// (eval/task_generators.h) with a fake token counter (whitespace words × 4/3), plus one check of
// the context lengths with the real SmolLM2 tokenizer when the model file is present.
#include "eval/task_generators.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "eval/answer_match.h"
#include "eval/haystack.h"
#include "eval/task_util.h"
#include "tokenizer/tokenizer_test_util.h"
#include "util/error.h"

namespace qevict {
namespace {

int64_t FakeCount(std::string_view text) {
  int64_t words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return (words * 4 + 2) / 3;
}

const TokenCounter kFake = FakeCount;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

// Token fraction before `needle` (which must occur) of the haystack that follows the task's
// instruction paragraph (depth 0: right after the instruction; 1: the end of the context).
double DepthOf(const std::string& context, const std::string& needle) {
  const size_t pos = context.find(needle);
  EXPECT_NE(pos, std::string::npos) << needle;
  if (pos == std::string::npos) return -1;
  const size_t body = context.find("\n\n") + 2;
  const double before = static_cast<double>(FakeCount(context.substr(body, pos - body)));
  const double total = static_cast<double>(FakeCount(context.substr(body)) - FakeCount(needle));
  return before / total;
}

TaskGrid AllTasksGrid() {
  TaskGrid grid;
  grid.tasks = TaskNames();
  grid.lengths = {1024, 4096};
  grid.depths = {0.0, 0.5, 1.0};
  grid.samples = 2;
  grid.seed = 7;
  return grid;
}

// The needle sentence of a niah-style question ("... for KEY mentioned ...").
std::string KeyOf(const std::string& question) {
  const std::string prefix = "magic number for ";
  const size_t a = question.find(prefix) + prefix.size();
  return question.substr(a, question.find(' ', a) - a);
}

// ---------------------------------------------------------------------------------------------

TEST(HaystackTest, ProseHasNoDigitsNorNeedleWords) {
  const std::vector<std::string> paragraphs = LoadHaystackParagraphs(HaystackDir());
  size_t words = 0;
  for (const std::string& p : paragraphs) {
    for (char c : p) ASSERT_FALSE(std::isdigit(static_cast<unsigned char>(c))) << p;
    const std::string lower = Lower(p);
    for (const char* banned : {"magic", "special", "variable", "pass key", "passkey"}) {
      EXPECT_EQ(lower.find(banned), std::string::npos) << banned << " in: " << p;
    }
    words += static_cast<size_t>(FakeCount(p)) * 3 / 4;
  }
  EXPECT_GE(paragraphs.size(), 40u);
  EXPECT_GE(words, 4500u);
}

TEST(HaystackTest, SplitsSentencesAndParagraphs) {
  EXPECT_EQ(SplitSentences("One two. Three? Four! Five"),
            (std::vector<std::string>{"One two.", "Three?", "Four!", "Five"}));
  EXPECT_EQ(SplitSentences("  A b.c d.  "), (std::vector<std::string>{"A b.c d."}));

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("qevict_haystack_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "b.txt") << "Second file.\n";
  std::ofstream(dir / "a.txt") << "First para\nwraps here.\n\n\n  Second para. Two.\n";
  std::ofstream(dir / "ignored.md") << "Not prose.\n";
  ::setenv("QEVICT_HAYSTACK_DIR", dir.c_str(), 1);
  EXPECT_EQ(HaystackDir(), dir.string());
  EXPECT_EQ(
      LoadHaystackParagraphs(HaystackDir()),
      (std::vector<std::string>{"First para wraps here.", "Second para. Two.", "Second file."}));
  ::unsetenv("QEVICT_HAYSTACK_DIR");
  EXPECT_NE(HaystackDir(), dir.string());
  std::filesystem::remove_all(dir);
  EXPECT_THROW(LoadHaystackParagraphs(dir.string()), Error);
}

TEST(HaystackTest, FillIsDeterministicNearTargetAndCycles) {
  const Haystack prose = Haystack::LoadProse(kFake);
  for (int64_t target : {int64_t{300}, int64_t{2000}, 3 * prose.total_tokens()}) {
    const auto a = prose.Fill(target, 11);
    const auto b = prose.Fill(target, 11);
    const std::string text = JoinPieces(a);
    EXPECT_EQ(text, JoinPieces(b));
    EXPECT_NE(text, JoinPieces(prose.Fill(target, 12)));
    // By the cached sentence counts the run ends at the sentence boundary nearest the target;
    // the rounding fake counter counts the joined text a little lower.
    const double cached = static_cast<double>(PieceTokens(a, prose.paragraph_break_tokens()));
    EXPECT_NEAR(cached, static_cast<double>(target), 30.0) << target;
    EXPECT_NEAR(static_cast<double>(FakeCount(text)), cached, 0.03 * cached) << target;
  }
  const Haystack passkey = Haystack::Passkey(kFake);
  const std::string filler = JoinPieces(passkey.Fill(200, 1));
  EXPECT_EQ(filler.rfind("The grass is green. The sky is blue. The sun is yellow. Here we go. "
                         "There and back again. The grass is green.",
                         0),
            0u);
}

// ---------------------------------------------------------------------------------------------

TEST(TaskGeneratorsTest, DeterministicPerSeed) {
  const TaskGrid grid = AllTasksGrid();
  const std::vector<EvalTask> a = GenerateTasks(grid, kFake);
  const std::vector<EvalTask> b = GenerateTasks(grid, kFake);
  TaskGrid other = grid;
  other.seed = 8;
  const std::vector<EvalTask> c = GenerateTasks(other, kFake);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), c.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].context, b[i].context);
    EXPECT_EQ(a[i].scored_text, b[i].scored_text);
    ASSERT_EQ(a[i].turns.size(), b[i].turns.size());
    for (size_t t = 0; t < a[i].turns.size(); ++t) {
      EXPECT_EQ(a[i].turns[t].question, b[i].turns[t].question);
      EXPECT_EQ(a[i].turns[t].answers, b[i].turns[t].answers);
    }
    EXPECT_EQ(a[i].id, c[i].id);
    EXPECT_NE(a[i].context, c[i].context) << a[i].id;
  }
}

TEST(TaskGeneratorsTest, AddingGridValuesKeepsOtherInstances) {
  TaskGrid small;
  small.tasks = {"niah", "ppl"};
  small.lengths = {2048};
  small.depths = {0.25};
  TaskGrid big = small;
  big.lengths = {1024, 2048};
  big.depths = {0.25, 0.75};
  big.samples = 2;
  const std::vector<EvalTask> a = GenerateTasks(small, kFake);
  const std::vector<EvalTask> b = GenerateTasks(big, kFake);
  for (const EvalTask& t : a) {
    bool found = false;
    for (const EvalTask& u : b) {
      if (u.id != t.id) continue;
      found = true;
      EXPECT_EQ(u.context, t.context);
      EXPECT_EQ(u.scored_text, t.scored_text);
    }
    EXPECT_TRUE(found) << t.id;
  }
}

TEST(TaskGeneratorsTest, LaterSamplesAreTheTailOfALargerGrid) {
  TaskGrid all;  // samples 0..4 of a needle task and a task without depths
  all.tasks = {"niah", "drift"};
  all.lengths = {2048};
  all.depths = {0.25, 0.75};
  all.samples = 5;
  TaskGrid later = all;  // samples 2..4: the instances a grid of 2 samples lacks
  later.samples = 3;
  later.first_sample = 2;
  const std::vector<EvalTask> a = GenerateTasks(all, kFake);
  const std::vector<EvalTask> b = GenerateTasks(later, kFake);
  ASSERT_EQ(b.size(), 9u);  // 2 depths x 3 niah, 3 drift
  std::vector<std::string> ids;
  for (const EvalTask& t : b) {
    ids.push_back(t.id);
    const auto same =
        std::find_if(a.begin(), a.end(), [&](const EvalTask& u) { return u.id == t.id; });
    ASSERT_NE(same, a.end()) << t.id;
    EXPECT_EQ(same->context, t.context) << t.id;
    EXPECT_EQ(same->scored_text, t.scored_text) << t.id;
    ASSERT_EQ(same->turns.size(), t.turns.size()) << t.id;
    for (size_t i = 0; i < t.turns.size(); ++i) {
      EXPECT_EQ(same->turns[i].question, t.turns[i].question) << t.id;
      EXPECT_EQ(same->turns[i].answers, t.turns[i].answers) << t.id;
    }
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"niah-L2048-d0.25-s2", "niah-L2048-d0.25-s3",
                                           "niah-L2048-d0.25-s4", "niah-L2048-d0.75-s2",
                                           "niah-L2048-d0.75-s3", "niah-L2048-d0.75-s4",
                                           "drift-L2048-s2", "drift-L2048-s3", "drift-L2048-s4"}));
}

TEST(TaskGeneratorsTest, IdsCountsAndFields) {
  const TaskGrid grid = AllTasksGrid();
  const std::vector<EvalTask> tasks = GenerateTasks(grid, kFake);
  // 5 depth tasks × 2 lengths × 3 depths × 2 samples + 7 tasks × 2 lengths × 2 + longgen 2.
  EXPECT_EQ(tasks.size(), 5u * 2 * 3 * 2 + 7 * 2 * 2 + 2);
  std::set<std::string> ids;
  for (const EvalTask& t : tasks) EXPECT_TRUE(ids.insert(t.id).second) << t.id;
  EXPECT_TRUE(ids.count("niah-L4096-d0.50-s1"));
  EXPECT_TRUE(ids.count("passkey-L1024-d0.00-s0"));
  EXPECT_TRUE(ids.count("multikey-L1024-d1.00-s0"));
  EXPECT_TRUE(ids.count("drift-L4096-s1"));
  EXPECT_TRUE(ids.count("vt-L1024-s0"));
  EXPECT_TRUE(ids.count("ppl-L4096-s0"));
  EXPECT_TRUE(ids.count("longgen-s1"));
  EXPECT_TRUE(ids.count("multivalue-L4096-d0.50-s1"));
  EXPECT_TRUE(ids.count("multiquery-L1024-d1.00-s0"));
  EXPECT_TRUE(ids.count("cwe-L4096-s1"));
  EXPECT_TRUE(ids.count("fwe-L1024-s0"));
  EXPECT_TRUE(ids.count("scbench-L4096-s0"));
  EXPECT_TRUE(ids.count("twofacts-L1024-s1"));
  for (const EvalTask& t : tasks) {
    const bool depth_task = t.task == "passkey" || t.task == "niah" || t.task == "multikey" ||
                            t.task == "multivalue" || t.task == "multiquery";
    if (depth_task) {
      EXPECT_GE(t.depth, 0.0) << t.id;
    } else {
      EXPECT_EQ(t.depth, -1.0) << t.id;
    }
    if (t.task == "longgen") {
      EXPECT_EQ(t.kind, TaskKind::kLongGen);
      EXPECT_EQ(t.target_tokens, 0);
      EXPECT_EQ(t.max_new_tokens, 384);
      EXPECT_TRUE(t.turns.empty());
      EXPECT_EQ(t.context.rfind("Continue the following text:", 0), 0u);
      EXPECT_NEAR(static_cast<double>(FakeCount(t.context)), 200.0, 40.0);
    } else if (t.task == "ppl") {
      EXPECT_EQ(t.kind, TaskKind::kPerplexity);
      EXPECT_TRUE(t.turns.empty());
    } else {
      EXPECT_EQ(t.kind, TaskKind::kQuestions);
      ASSERT_FALSE(t.turns.empty()) << t.id;
      const std::map<std::string, int> max_new = {{"vt", 64},         {"passkey", 32},
                                                   {"multivalue", 64}, {"multiquery", 64},
                                                   {"cwe", 100},       {"fwe", 40},
                                                   {"scbench", 32},  {"drift", 24},
                                                   {"twofacts", 24}};
      EXPECT_EQ(t.max_new_tokens, max_new.count(t.task) ? max_new.at(t.task) : 40) << t.id;
      // RULER-style tasks with several answers score the share found; the rest any (vt all).
      const bool share = t.task == "multivalue" || t.task == "multiquery" || t.task == "cwe" ||
                         t.task == "fwe";
      for (const EvalTurn& turn : t.turns) {
        EXPECT_EQ(turn.scoring, share            ? TurnScoring::kShare
                                : t.task == "vt" ? TurnScoring::kAll
                                                 : TurnScoring::kAny)
            << t.id;
      }
      EXPECT_EQ(t.turns.size(), static_cast<size_t>(GeneratedTaskTurns(t.task))) << t.id;
    }
  }
  EXPECT_EQ(GenerateTasks(AllTasksGrid(), kFake).front().id, "passkey-L1024-d0.00-s0");
}

TEST(TaskGeneratorsTest, ContextLengthWithinFivePercent) {
  TaskGrid grid;
  grid.tasks = {"passkey",    "niah",       "multikey", "vt",  "drift",   "ppl",
                "multivalue", "multiquery", "cwe",      "fwe", "scbench", "twofacts"};
  grid.lengths = {512, 1024, 2048, 4096, 8192, 16384};
  grid.depths = {0.3};
  for (const EvalTask& t : GenerateTasks(grid, kFake)) {
    const double tokens = static_cast<double>(FakeCount(t.context + " " + t.scored_text));
    EXPECT_NEAR(tokens, static_cast<double>(t.target_tokens), 0.05 * t.target_tokens) << t.id;
  }
}

TEST(TaskGeneratorsTest, NeedlesOnceAtTheirDepth) {
  TaskGrid grid;
  grid.tasks = {"passkey", "niah", "multikey"};
  grid.lengths = {1024, 2048, 8192};
  grid.depths = {0.0, 0.1, 0.25, 0.5, 0.77, 0.9, 1.0};
  for (const EvalTask& t : GenerateTasks(grid, kFake)) {
    const std::string& answer = t.turns.at(0).answers.at(0);
    std::string needle;
    if (t.task == "passkey") {
      needle = "The pass key is " + answer + ". Remember it. " + answer + " is the pass key.";
      EXPECT_EQ(Occurrences(t.context, "pass key is"), 1u) << t.id;
    } else {
      needle = "The special magic number for " + KeyOf(t.turns[0].question) + " is " + answer + ".";
      EXPECT_EQ(Occurrences(t.context, "special magic number for"), t.task == "multikey" ? 4u : 1u)
          << t.id;
    }
    EXPECT_EQ(Occurrences(t.context, needle), 1u) << t.id;
    EXPECT_NEAR(DepthOf(t.context, needle), t.depth, 0.03) << t.id;
    if (t.task == "multikey") {  // distractors a quarter apart from the asked needle
      size_t pos = 0;
      std::vector<double> depths;
      while ((pos = t.context.find("The special magic number for ", pos)) != std::string::npos) {
        const std::string sentence = t.context.substr(pos, t.context.find('.', pos) + 1 - pos);
        depths.push_back(DepthOf(t.context, sentence));
        ++pos;
      }
      ASSERT_EQ(depths.size(), 4u);
      for (int k = 1; k < 4; ++k) {
        const double want = std::fmod(t.depth + 0.25 * k, 1.0);
        bool near = false;
        for (double d : depths) near |= std::fabs(d - want) <= 0.03;
        EXPECT_TRUE(near) << t.id << " distractor at " << want;
      }
    }
  }
}

TEST(TaskGeneratorsTest, AnswersAppearInContext) {
  for (const EvalTask& t : GenerateTasks(AllTasksGrid(), kFake)) {
    for (const EvalTurn& turn : t.turns) {
      ASSERT_FALSE(turn.answers.empty()) << t.id;
      for (const std::string& a : turn.answers) {
        EXPECT_NE(t.context.find(a), std::string::npos) << t.id << " " << a;
      }
    }
  }
}

// Every question has an answer prefix for completion-style prompts, which the needle it asks
// about continues: the prefix, a space and the answer are in the context (vt: the prefix names
// the asked value).
TEST(TaskGeneratorsTest, AnswerPrefixesLeadIntoTheAnswer) {
  std::set<std::string> tasks_seen;
  for (const EvalTask& t : GenerateTasks(AllTasksGrid(), kFake)) {
    for (const EvalTurn& turn : t.turns) {
      SCOPED_TRACE(t.id + ": " + turn.answer_prefix);
      tasks_seen.insert(t.task);
      ASSERT_FALSE(turn.answer_prefix.empty());
      EXPECT_FALSE(std::isspace(static_cast<unsigned char>(turn.answer_prefix.back())));
      if (t.task == "vt") {
        const std::string value = turn.question.substr(turn.question.find("value ") + 6, 5);
        EXPECT_EQ(turn.answer_prefix, "The variables assigned the value " + value + " are");
        continue;
      }
      if (t.task == "multivalue" || t.task == "multiquery") {  // the keys the question names
        const std::string ask = "magic numbers for ";
        const size_t a = turn.question.find(ask) + ask.size();
        const std::string keys = turn.question.substr(a, turn.question.find(" mentioned") - a);
        EXPECT_EQ(turn.answer_prefix, "The special magic numbers for " + keys + " are");
        continue;
      }
      if (t.task == "cwe") {
        EXPECT_EQ(turn.answer_prefix, "The top 10 words that appear most often in the list are: 1.");
        continue;
      }
      if (t.task == "fwe") {
        EXPECT_EQ(turn.answer_prefix,
                  "According to the coded text above, the three most frequently appearing words "
                  "are \"");
        continue;
      }
      EXPECT_EQ(Occurrences(t.context, turn.answer_prefix + " " + turn.answers.at(0)), 1u);
      if (t.task == "scbench") {  // "The train to Oslo leaves from platform" + " 12" + "."
        EXPECT_EQ(Occurrences(t.context, turn.answer_prefix + " " + turn.answers[0] + "."), 1u);
        continue;
      }
      if (t.task == "passkey") {
        EXPECT_EQ(turn.answer_prefix, "The pass key is");
      } else if (t.task != "drift" && t.task != "twofacts") {  // their own tests below
        EXPECT_EQ(turn.answer_prefix, "The special magic number for " + KeyOf(turn.question) + " is");
      }
    }
  }
  EXPECT_EQ(tasks_seen,
            (std::set<std::string>{"passkey", "niah", "multikey", "vt", "drift", "multivalue",
                                   "multiquery", "cwe", "fwe", "scbench", "twofacts"}));
}

TEST(TaskGeneratorsTest, DriftAsksFourDifferentFactsOutOfOrder) {
  TaskGrid grid;
  grid.tasks = {"drift"};
  grid.lengths = {2048, 4096};
  grid.samples = 6;
  std::set<std::string> first_prefixes;
  for (const EvalTask& t : GenerateTasks(grid, kFake)) {
    ASSERT_EQ(t.turns.size(), 4u) << t.id;
    EXPECT_EQ(t.max_new_tokens, 24);
    std::set<std::string> prefixes, values;
    std::vector<double> depths;
    for (const EvalTurn& turn : t.turns) {
      ASSERT_EQ(turn.answers.size(), 1u);
      prefixes.insert(turn.answer_prefix.substr(0, 12));  // the kind of fact
      values.insert(turn.answers[0]);
      // The fact is its answer prefix, its value and a period, once in the context.
      const std::string fact = turn.answer_prefix + " " + turn.answers[0] + ".";
      EXPECT_EQ(Occurrences(t.context, fact), 1u) << t.id << ": " << fact;
      depths.push_back(DepthOf(t.context, fact));
    }
    first_prefixes.insert(t.turns[0].answer_prefix.substr(0, 12));
    EXPECT_EQ(prefixes.size(), 4u) << t.id;  // four different kinds of fact
    EXPECT_EQ(values.size(), 4u) << t.id;
    // Asked: the second fact, the last, the first, the third.
    EXPECT_NEAR(depths[0], 0.37, 0.03) << t.id;
    EXPECT_NEAR(depths[1], 0.9, 0.03) << t.id;
    EXPECT_NEAR(depths[2], 0.1, 0.03) << t.id;
    EXPECT_NEAR(depths[3], 0.63, 0.03) << t.id;
  }
  EXPECT_GT(first_prefixes.size(), 1u);  // which kind sits where is drawn per instance
}

// twofacts (`make demo`): two facts of two kinds at depths 0.25 and 0.75, the later one asked
// first.
TEST(TaskGeneratorsTest, TwoFactsAsksTheLaterFactFirst) {
  TaskGrid grid;
  grid.tasks = {"twofacts"};
  grid.lengths = {2048, 16384};
  grid.samples = 6;
  std::set<std::string> first_prefixes;
  for (const EvalTask& t : GenerateTasks(grid, kFake)) {
    ASSERT_EQ(t.turns.size(), 2u) << t.id;
    EXPECT_EQ(t.max_new_tokens, 24);
    EXPECT_NE(t.turns[0].answer_prefix.substr(0, 12), t.turns[1].answer_prefix.substr(0, 12))
        << t.id;  // two different kinds of fact
    std::vector<double> depths;
    for (const EvalTurn& turn : t.turns) {
      ASSERT_EQ(turn.answers.size(), 1u);
      const std::string fact = turn.answer_prefix + " " + turn.answers[0] + ".";
      EXPECT_EQ(Occurrences(t.context, fact), 1u) << t.id << ": " << fact;
      depths.push_back(DepthOf(t.context, fact));
    }
    EXPECT_NEAR(depths[0], 0.75, 0.03) << t.id;
    EXPECT_NEAR(depths[1], 0.25, 0.03) << t.id;
    first_prefixes.insert(t.turns[0].answer_prefix.substr(0, 12));
  }
  EXPECT_GT(first_prefixes.size(), 1u);  // which kind sits where is drawn per instance
}

TEST(TaskGeneratorsTest, VariableTrackingChain) {
  TaskGrid grid;
  grid.tasks = {"vt"};
  grid.lengths = {1024, 4096};
  grid.samples = 4;
  for (const EvalTask& t : GenerateTasks(grid, kFake)) {
    ASSERT_EQ(t.turns.size(), 1u);
    const EvalTurn& turn = t.turns[0];
    EXPECT_EQ(turn.scoring, TurnScoring::kAll);
    ASSERT_EQ(turn.answers.size(), 3u);
    const std::string value = turn.question.substr(turn.question.find("value ") + 6, 5);
    EXPECT_EQ(Occurrences(t.context, "VAR " + turn.answers[0] + " = " + value + "."), 1u) << t.id;
    size_t previous = t.context.find("VAR " + turn.answers[0] + " = ");
    for (size_t i = 1; i < 3; ++i) {
      const std::string link = "VAR " + turn.answers[i] + " = VAR " + turn.answers[i - 1] + ".";
      EXPECT_EQ(Occurrences(t.context, link), 1u) << t.id << " " << link;
      const size_t pos = t.context.find(link);
      EXPECT_GT(pos, previous) << t.id;  // links in chain order
      previous = pos;
    }
    for (const std::string& name : turn.answers) {
      EXPECT_EQ(name.size(), 5u);
      for (char c : name) EXPECT_TRUE(c >= 'A' && c <= 'Z') << name;
    }
    // Two chains (asked and distractor) of 3 links, 5 "VAR " each.
    EXPECT_EQ(Occurrences(t.context, "VAR "), 10u) << t.id;
  }
}

TEST(TaskGeneratorsTest, PerplexityContinuesWithoutOverlap) {
  TaskGrid grid;
  grid.tasks = {"ppl"};
  grid.lengths = {256, 1024, 4096, 8192};
  grid.samples = 2;
  for (const EvalTask& t : GenerateTasks(grid, kFake)) {
    ASSERT_FALSE(t.scored_text.empty()) << t.id;
    EXPECT_EQ(t.context.find(t.scored_text), std::string::npos) << t.id;
    for (const std::string& sentence : SplitSentences(t.scored_text)) {  // new text, no repeat
      EXPECT_EQ(t.context.find(sentence), std::string::npos) << t.id << ": " << sentence;
    }
    EXPECT_FALSE(t.context.empty()) << t.id;
    const double scored = static_cast<double>(std::min<int64_t>(256, t.target_tokens / 2));
    EXPECT_NEAR(static_cast<double>(FakeCount(t.scored_text)), scored, 40.0) << t.id;
    EXPECT_TRUE(std::isspace(static_cast<unsigned char>(t.scored_text[0]))) << t.id;
  }
}

// Lowercase words of the haystack prose.
std::set<std::string> HaystackWords() {
  std::set<std::string> words;
  for (const std::string& p : LoadHaystackParagraphs(HaystackDir())) {
    std::string w;
    for (const char c : p + " ") {
      if (std::isalpha(static_cast<unsigned char>(c))) {
        w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else if (!w.empty()) {
        words.insert(w);
        w.clear();
      }
    }
  }
  return words;
}

// Whitespace-separated words of `text`.
std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The words by count, most frequent first (ties by word).
std::vector<std::pair<std::string, int>> ByCount(const std::vector<std::string>& words) {
  std::map<std::string, int> counts;
  for (const std::string& w : words) ++counts[w];
  std::vector<std::pair<std::string, int>> out(counts.begin(), counts.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

TEST(TaskGeneratorsTest, MultivalueFourValuesOfOneKeyAroundTheDepth) {
  TaskGrid grid;
  grid.tasks = {"multivalue"};
  grid.lengths = {1024, 4096};
  grid.depths = {0.0, 0.3, 0.5, 0.9};
  grid.samples = 2;
  for (const EvalTask& t : GenerateTasks(grid, kFake)) {
    ASSERT_EQ(t.turns.size(), 1u);
    const EvalTurn& turn = t.turns[0];
    ASSERT_EQ(turn.answers.size(), 4u) << t.id;
    EXPECT_EQ(std::set<std::string>(turn.answers.begin(), turn.answers.end()).size(), 4u);
    const std::string ask = "magic numbers for ";
    const size_t a = turn.question.find(ask) + ask.size();
    const std::string key = turn.question.substr(a, turn.question.find(' ', a) - a);
    EXPECT_EQ(Occurrences(t.context, "special magic numbers for"), 4u) << t.id;
    EXPECT_EQ(Occurrences(t.context, key), 4u) << t.id;
    for (int i = 0; i < 4; ++i) {
      const std::string needle =
          "One of the special magic numbers for " + key + " is " + turn.answers[i] + ".";
      EXPECT_EQ(Occurrences(t.context, needle), 1u) << t.id << " " << needle;
      EXPECT_EQ(Occurrences(t.context, turn.answers[i]), 1u) << t.id;
      EXPECT_NEAR(DepthOf(t.context, needle), std::fmod(t.depth + 0.25 * i, 1.0), 0.03) << t.id;
    }
    // All four in the answer score 1, two of them 0.5.
    EXPECT_EQ(TurnScore(turn.answers[3] + ", " + turn.answers[1] + ", " + turn.answers[0] +
                            " and " + turn.answers[2],
                        turn),
              1.0);
    EXPECT_EQ(TurnScore(turn.answers[2] + " " + turn.answers[0], turn), 0.5);
  }
}

TEST(TaskGeneratorsTest, MultiqueryAsksForFourKeys) {
  TaskGrid grid;
  grid.tasks = {"multiquery"};
  grid.lengths = {1024, 4096};
  grid.depths = {0.1, 0.6};
  grid.samples = 3;
  for (const EvalTask& t : GenerateTasks(grid, kFake)) {
    ASSERT_EQ(t.turns.size(), 1u);
    const EvalTurn& turn = t.turns[0];
    ASSERT_EQ(turn.answers.size(), 4u) << t.id;
    EXPECT_EQ(Occurrences(t.context, "The special magic number for "), 4u) << t.id;
    // The question names four keys, "A, B, C and D", each of whose needle holds the answer of
    // the same rank; the needle of the first needle key is at the grid depth.
    const std::string ask = "magic numbers for ";
    const size_t a = turn.question.find(ask) + ask.size();
    std::string list = turn.question.substr(a, turn.question.find(" mentioned") - a);
    std::vector<std::string> keys;
    for (const std::string& w : Words(list)) {
      if (w == "and") continue;
      keys.push_back(w.back() == ',' ? w.substr(0, w.size() - 1) : w);
    }
    ASSERT_EQ(keys.size(), 4u) << turn.question;
    EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), 4u);
    std::vector<double> depths;
    for (int i = 0; i < 4; ++i) {
      const std::string needle =
          "The special magic number for " + keys[i] + " is " + turn.answers[i] + ".";
      EXPECT_EQ(Occurrences(t.context, needle), 1u) << t.id << " " << needle;
      depths.push_back(DepthOf(t.context, needle));
    }
    std::sort(depths.begin(), depths.end());
    for (int k = 0; k < 4; ++k) {
      const double want = std::fmod(t.depth + 0.25 * k, 1.0);
      bool near = false;
      for (double d : depths) near |= std::fabs(d - want) <= 0.03;
      EXPECT_TRUE(near) << t.id << " no needle at " << want;
    }
    EXPECT_EQ(TurnScore(turn.answers[1] + " " + turn.answers[3], turn), 0.5);
  }
}

TEST(TaskGeneratorsTest, CweWordsAreNotInTheHaystackNorInsideEachOther) {
  const std::set<std::string> haystack = HaystackWords();
  const std::vector<std::string_view> words = eval_internal::CommonWordList();
  EXPECT_GE(words.size(), 500u);
  std::set<std::string_view> distinct(words.begin(), words.end());
  EXPECT_EQ(distinct.size(), words.size());
  for (std::string_view w : words) {
    EXPECT_EQ(haystack.count(std::string(w)), 0u) << w;
    EXPECT_EQ(haystack.count(std::string(w) + "s"), 0u) << w;
    for (char c : w) EXPECT_TRUE(c >= 'a' && c <= 'z') << w;
    for (std::string_view other : words) {
      if (other != w) {
        EXPECT_EQ(other.find(w), std::string_view::npos) << w << " in " << other;
      }
    }
  }
}

// cwe: a numbered list whose 10 most frequent words are the answers, each strictly more frequent
// than any other word: 30 against 3 where the list is long enough (RULER's numbers).
TEST(TaskGeneratorsTest, CweAnswersAreTheTenMostCommonWords) {
  TaskGrid grid;
  grid.tasks = {"cwe"};
  grid.lengths = {256, 1024, 4096, 8192, 65536};
  grid.samples = 2;
  const std::string head =
      "Below is a numbered list of words. In these words, some appear more often than others. "
      "Memorize the ones that appear most often.\n\n";
  for (const EvalTask& t : GenerateTasks(grid, kFake)) {
    SCOPED_TRACE(t.id);
    ASSERT_EQ(t.turns.size(), 1u);
    const EvalTurn& turn = t.turns[0];
    EXPECT_EQ(turn.question, "What are the 10 most common words in the above list?");
    ASSERT_EQ(turn.answers.size(), 10u);
    ASSERT_EQ(t.context.rfind(head, 0), 0u);
    const std::vector<std::string> tokens = Words(t.context.substr(head.size()));
    ASSERT_EQ(tokens.size() % 2, 0u);
    std::vector<std::string> list;
    for (size_t i = 0; i < tokens.size(); i += 2) {  // "1." "cello" "2." "walrus" ...
      ASSERT_EQ(tokens[i], std::to_string(i / 2 + 1) + ".");
      list.push_back(tokens[i + 1]);
    }
    const auto ranked = ByCount(list);
    ASSERT_GT(ranked.size(), 10u);
    const std::set<std::string> answers(turn.answers.begin(), turn.answers.end());
    EXPECT_EQ(answers.size(), 10u);
    const int common = ranked[0].second, rare = ranked[10].second;
    for (int i = 0; i < 10; ++i) {
      EXPECT_TRUE(answers.count(ranked[i].first)) << ranked[i].first;
      EXPECT_EQ(ranked[i].second, common) << ranked[i].first;
    }
    EXPECT_GT(common, rare);
    for (size_t i = 10; i < ranked.size(); ++i) EXPECT_EQ(ranked[i].second, rare);
    if (t.target_tokens == 4096) {  // 1.3k entries of 3 fake tokens
      EXPECT_EQ(common, 30);
      EXPECT_EQ(rare, 3);
    }
    if (t.target_tokens == 65536) {  // beyond the vocabulary at 3 each: ten to one
      EXPECT_GE(ranked.size(), eval_internal::CommonWordList().size() * 9 / 10);
      EXPECT_EQ(common, 10 * rare);
      EXPECT_GT(rare, 3);
    }
    // A full answer scores 1, the top five 0.5, and a list of rare words nothing.
    std::string all, half, wrong;
    for (int i = 0; i < 10; ++i) all += turn.answers[i] + ", ";
    for (int i = 0; i < 5; ++i) half += turn.answers[i] + ", ";
    for (size_t i = 10; i < 15; ++i) wrong += ranked[i].first + ", ";
    EXPECT_EQ(TurnScore(all, turn), 1.0);
    EXPECT_EQ(TurnScore(half, turn), 0.5);
    EXPECT_EQ(TurnScore(wrong, turn), 0.0);
  }
}

// fwe: Zipf counts (alpha 2) over coded words, the "...." noise first, then the three answers,
// then every other word strictly less often.
TEST(TaskGeneratorsTest, FweAnswersAreTheThreeMostFrequentCodedWords) {
  const std::set<std::string> haystack = HaystackWords();
  TaskGrid grid;
  grid.tasks = {"fwe"};
  grid.lengths = {256, 1024, 4096, 16384};
  grid.samples = 3;
  const std::string head =
      "Read the following coded text and track the frequency of each coded word. Find the three "
      "most frequently appearing coded words.\n\n";
  for (const EvalTask& t : GenerateTasks(grid, kFake)) {
    SCOPED_TRACE(t.id);
    ASSERT_EQ(t.turns.size(), 1u);
    const EvalTurn& turn = t.turns[0];
    ASSERT_EQ(turn.answers.size(), 3u);
    ASSERT_EQ(t.context.rfind(head, 0), 0u);
    const std::vector<std::string> words = Words(t.context.substr(head.size()));
    const auto ranked = ByCount(words);
    ASSERT_GE(ranked.size(), 5u);
    EXPECT_EQ(ranked[0].first, "....");
    for (int i = 1; i <= 3; ++i) {
      EXPECT_EQ(ranked[i].first, turn.answers[i - 1]);
      EXPECT_GT(ranked[i - 1].second, ranked[i].second);
    }
    EXPECT_GT(ranked[3].second, ranked[4].second);
    // Zipf: rank k about N k^-2 / zeta(2), so rank 2 is a quarter of the noise.
    const double n = static_cast<double>(words.size());
    if (t.target_tokens >= 4096) {
      EXPECT_NEAR(ranked[0].second / n, 0.608, 0.02);
      EXPECT_NEAR(static_cast<double>(ranked[1].second) / ranked[0].second, 0.25, 0.02);
    }
    for (size_t i = 1; i < ranked.size(); ++i) {
      const std::string& w = ranked[i].first;
      ASSERT_EQ(w.size(), 6u) << w;
      for (size_t c = 0; c < 6; ++c) {
        EXPECT_EQ(std::string_view("aeiou").find(w[c]) != std::string_view::npos, c % 2 == 1)
            << w;
      }
      EXPECT_EQ(haystack.count(w), 0u) << w;
    }
  }
}

// scbench: five facts of five kinds at depths 0.1 .. 0.9, asked one per turn in the order 0.5,
// 0.1, 0.9, 0.3, 0.7; no key or answer word in the haystack, no answer inside another.
TEST(TaskGeneratorsTest, ScbenchFiveFactsAskedAcrossTheContext) {
  const std::set<std::string> haystack = HaystackWords();
  // Words of the fact templates; every other word of a fact is a key or an answer.
  const std::set<std::string> template_words = {
      "the", "code", "to", "open", "locker", "is", "favourite", "fruit", "train", "leaves", "from",
      "platform", "freighter", "carries", "a", "cargo", "of", "lessons", "take", "place", "in",
      "room", "s"};
  TaskGrid grid;
  grid.tasks = {"scbench"};
  grid.lengths = {2048, 4096};
  grid.samples = 60;
  std::set<std::string> kinds_first;
  for (const EvalTask& t : GenerateTasks(grid, kFake)) {
    SCOPED_TRACE(t.id);
    ASSERT_EQ(t.turns.size(), 5u);
    EXPECT_EQ(t.max_new_tokens, 32);
    std::vector<std::string> shapes;
    std::vector<double> depths;
    for (const EvalTurn& turn : t.turns) {
      ASSERT_EQ(turn.answers.size(), 1u);
      EXPECT_EQ(turn.scoring, TurnScoring::kAny);
      const std::string fact = turn.answer_prefix + " " + turn.answers[0] + ".";
      EXPECT_EQ(Occurrences(t.context, fact), 1u) << fact;
      depths.push_back(DepthOf(t.context, fact));
      // The template: the prefix without its key words.
      std::string shape;
      std::string word;
      for (const char c : fact + " ") {
        if (std::isalpha(static_cast<unsigned char>(c))) {
          word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          continue;
        }
        if (word.empty()) continue;
        if (template_words.count(word)) {
          shape += word + " ";
        } else {
          EXPECT_EQ(haystack.count(word), 0u) << "'" << word << "' of: " << fact;
        }
        word.clear();
      }
      shapes.push_back(shape);
      for (const EvalTurn& other : t.turns) {
        if (&other != &turn) {
          EXPECT_EQ(NormalizeForMatch(other.answers[0]).find(NormalizeForMatch(turn.answers[0])),
                    std::string::npos)
              << turn.answers[0] << " in " << other.answers[0];
        }
      }
    }
    EXPECT_EQ(std::set<std::string>(shapes.begin(), shapes.end()).size(), 5u);  // five kinds
    const double want[5] = {0.5, 0.1, 0.9, 0.3, 0.7};
    for (int i = 0; i < 5; ++i) EXPECT_NEAR(depths[i], want[i], 0.03) << i;
    kinds_first.insert(shapes[0]);
  }
  EXPECT_EQ(kinds_first.size(), 5u);  // which kind sits where changes with the instance
}

void ExpectError(const TaskGrid& grid, const std::string& fragment) {
  try {
    GenerateTasks(grid, kFake);
    ADD_FAILURE() << "no error; expected one containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(TaskGeneratorsTest, InvalidGridsThrowWithMessages) {
  TaskGrid ok;
  ok.tasks = {"niah"};
  ok.lengths = {1024};
  ok.depths = {0.5};
  EXPECT_NO_THROW(GenerateTasks(ok, kFake));

  TaskGrid g = ok;
  g.tasks = {};
  ExpectError(g, "no evaluation tasks");
  g = ok;
  g.tasks = {"niah", "nope"};
  ExpectError(g, "unknown evaluation task 'nope'");
  g = ok;
  g.tasks = {"niah", "niah"};
  ExpectError(g, "listed twice");
  g = ok;
  g.lengths = {255};
  ExpectError(g, "context length 255 is out of range");
  g.lengths = {1000001};
  ExpectError(g, "out of range");
  g.lengths = {1024, 1024};
  ExpectError(g, "context length 1024 listed twice");
  g = ok;
  g.lengths = {};
  ExpectError(g, "no context lengths");
  g = ok;
  g.depths = {1.5};
  ExpectError(g, "needle depth 1.5 is outside [0, 1]");
  g.depths = {-0.1};
  ExpectError(g, "outside [0, 1]");
  g.depths = {std::nan("")};
  ExpectError(g, "outside [0, 1]");
  g.depths = {};
  ExpectError(g, "no needle depths");
  g = ok;
  g.samples = 0;
  ExpectError(g, "samples must be in [1, 1000], got 0");
  g.samples = 1001;
  ExpectError(g, "got 1001");
  g = ok;
  g.first_sample = -1;
  ExpectError(g, "--first-sample must be in [0, 999] with --samples 1");
  g.samples = 10;
  g.first_sample = 991;
  ExpectError(g,
              "--first-sample must be in [0, 990] with --samples 10 (sample indices stay below "
              "1000), got 991");
  g.first_sample = 990;
  EXPECT_NO_THROW(GenerateTasks(g, kFake));

  TaskGrid longgen_only;  // needs neither lengths nor depths
  longgen_only.tasks = {"longgen"};
  longgen_only.samples = 3;
  EXPECT_EQ(GenerateTasks(longgen_only, kFake).size(), 3u);
}

TEST(TaskGeneratorsTest, RealTokenizerLengths) {
  QEVICT_REQUIRE_SMOLLM2(tokenizer);
  const TokenCounter count = [tokenizer](std::string_view text) {
    return static_cast<int64_t>(tokenizer->Encode(text, false, false).size());
  };
  TaskGrid grid;
  grid.tasks = TaskNames();
  grid.lengths = {1024, 8192};
  grid.depths = {0.0, 0.5, 1.0};
  for (const EvalTask& t : GenerateTasks(grid, count)) {
    if (t.kind == TaskKind::kLongGen) continue;
    const double tokens = static_cast<double>(count(t.context + t.scored_text));
    EXPECT_NEAR(tokens, static_cast<double>(t.target_tokens), 0.05 * t.target_tokens) << t.id;
    if (t.kind == TaskKind::kPerplexity) {  // the prose is long enough not to repeat at 8k
      for (const std::string& sentence : SplitSentences(t.scored_text)) {
        EXPECT_EQ(t.context.find(sentence), std::string::npos) << t.id << ": " << sentence;
      }
    }
  }
}

}  // namespace
}  // namespace qevict
