// Tests of the haystack (data/haystack, eval/haystack.h) and the task generators
// (eval/task_generators.h) with a fake token counter (whitespace words × 4/3), plus one check of
// the context lengths with the real SmolLM2 tokenizer when the model file is present.
#include "eval/task_generators.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "eval/haystack.h"
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

TEST(TaskGeneratorsTest, IdsCountsAndFields) {
  const TaskGrid grid = AllTasksGrid();
  const std::vector<EvalTask> tasks = GenerateTasks(grid, kFake);
  // 3 depth tasks × 2 lengths × 3 depths × 2 samples + 3 tasks × 2 lengths × 2 + longgen 2.
  EXPECT_EQ(tasks.size(), 3u * 2 * 3 * 2 + 3 * 2 * 2 + 2);
  std::set<std::string> ids;
  for (const EvalTask& t : tasks) EXPECT_TRUE(ids.insert(t.id).second) << t.id;
  EXPECT_TRUE(ids.count("niah-L4096-d0.50-s1"));
  EXPECT_TRUE(ids.count("passkey-L1024-d0.00-s0"));
  EXPECT_TRUE(ids.count("multikey-L1024-d1.00-s0"));
  EXPECT_TRUE(ids.count("drift-L4096-s1"));
  EXPECT_TRUE(ids.count("vt-L1024-s0"));
  EXPECT_TRUE(ids.count("ppl-L4096-s0"));
  EXPECT_TRUE(ids.count("longgen-s1"));
  for (const EvalTask& t : tasks) {
    const bool depth_task = t.task == "passkey" || t.task == "niah" || t.task == "multikey";
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
      EXPECT_EQ(t.max_new_tokens, t.task == "vt" ? 64 : t.task == "passkey" ? 32 : 40) << t.id;
    }
  }
  EXPECT_EQ(GenerateTasks(AllTasksGrid(), kFake).front().id, "passkey-L1024-d0.00-s0");
}

TEST(TaskGeneratorsTest, ContextLengthWithinFivePercent) {
  TaskGrid grid;
  grid.tasks = {"passkey", "niah", "multikey", "vt", "drift", "ppl"};
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
      EXPECT_EQ(Occurrences(t.context, turn.answer_prefix + " " + turn.answers.at(0)), 1u);
      if (t.task == "passkey") {
        EXPECT_EQ(turn.answer_prefix, "The pass key is");
      } else {
        EXPECT_EQ(turn.answer_prefix, "The special magic number for " + KeyOf(turn.question) + " is");
      }
    }
  }
  EXPECT_EQ(tasks_seen, (std::set<std::string>{"passkey", "niah", "multikey", "vt", "drift"}));
}

TEST(TaskGeneratorsTest, DriftAsksThreeDifferentNeedlesMiddleFirst) {
  TaskGrid grid;
  grid.tasks = {"drift"};
  grid.lengths = {2048, 4096};
  grid.samples = 3;
  for (const EvalTask& t : GenerateTasks(grid, kFake)) {
    ASSERT_EQ(t.turns.size(), 3u) << t.id;
    EXPECT_EQ(t.max_new_tokens, 40);
    std::set<std::string> keys, values;
    std::vector<double> depths;
    for (const EvalTurn& turn : t.turns) {
      const std::string key = KeyOf(turn.question);
      keys.insert(key);
      values.insert(turn.answers.at(0));
      const std::string needle =
          "The special magic number for " + key + " is " + turn.answers[0] + ".";
      EXPECT_EQ(Occurrences(t.context, needle), 1u) << t.id;
      depths.push_back(DepthOf(t.context, needle));
    }
    EXPECT_EQ(keys.size(), 3u);
    EXPECT_EQ(values.size(), 3u);
    EXPECT_NEAR(depths[0], 0.5, 0.03) << t.id;
    EXPECT_NEAR(depths[1], 0.15, 0.03) << t.id;
    EXPECT_NEAR(depths[2], 0.85, 0.03) << t.id;
  }
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
