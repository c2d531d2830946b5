// The prompt tokens of both styles and both protocols (eval/chat_turns.h) with the reference
// models' tokenizers: completion prompts end with the answer prefix's own tokens, so the model
// continues it; chat prompts are the template's, whatever the answer prefixes, so chat-style
// results do not change when tasks gain prefixes; context-only splits the same tokens. The texts
// themselves are checked in src/eval/chat_turns_test.cc.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "engine/session.h"
#include "eval/chat_turns.h"
#include "eval/task_generators.h"
#include "tests/test_support.h"

namespace qevict {
namespace {

EvalTask TwoTurns() {
  EvalTask task;
  task.id = "two";
  task.context = "The door code is 2468. The safe code is 1357.";
  EvalTurn first, second;
  first.question = "What is the door code?";
  first.answers = {"2468"};
  first.answer_prefix = "The door code is";
  second.question = "What is the safe code?";
  second.answers = {"1357"};
  second.answer_prefix = "The safe code is";
  task.turns = {first, second};
  return task;
}

bool EndsWith(const std::vector<int32_t>& tokens, const std::vector<int32_t>& tail) {
  return tokens.size() >= tail.size() &&
         std::equal(tail.begin(), tail.end(), tokens.end() - static_cast<std::ptrdiff_t>(tail.size()));
}

TEST(PromptStyleModelTest, CompletionPromptsEndWithTheAnswerPrefixTokens) {
  QEVICT_REQUIRE_MODEL(m);
  const Tokenizer& tok = *m->tokenizer;
  const EvalTask task = TwoTurns();
  const TurnTokens turns = BuildTurnTokens(*m, task, PromptStyle::kCompletion);
  EXPECT_EQ(turns.style, PromptStyle::kCompletion);
  // The raw text, BOS as the model wants it, no template marker anywhere.
  EXPECT_EQ(turns.first, m->EncodeRaw(task.context +
                                      "\n\nQuestion: What is the door code?\nAnswer: The door code is"));
  const std::string first = tok.Decode(turns.first, /*render_special=*/true);
  EXPECT_EQ(first.find("<|im_start|>"), std::string::npos) << first;
  EXPECT_TRUE(first.ends_with("\nAnswer: The door code is")) << first;
  // The prefix is its own words at the end: the model's next token follows "is".
  EXPECT_TRUE(EndsWith(turns.first, tok.Encode(" The door code is", false, false)));
  ASSERT_EQ(turns.later.size(), 1u);
  EXPECT_EQ(turns.later[0],
            tok.Encode("\nQuestion: What is the safe code?\nAnswer: The safe code is", false, false));
  EXPECT_TRUE(EndsWith(turns.later[0], tok.Encode(" The safe code is", false, false)));
  EXPECT_EQ(turns.tails,
            (std::vector<std::string>{"Question: What is the door code?\nAnswer: The door code is",
                                      "\nQuestion: What is the safe code?\nAnswer: The safe code is"}));
}

TEST(PromptStyleModelTest, ChatPromptsIgnoreAnswerPrefixes) {
  QEVICT_REQUIRE_MODEL(m);
  ASSERT_TRUE(m->chat.has_value());  // SmolLM2: auto is chat
  const Tokenizer& tok = *m->tokenizer;
  const EvalTask task = TwoTurns();
  EvalTask without = task;
  for (EvalTurn& turn : without.turns) turn.answer_prefix.clear();
  const TurnTokens turns = BuildTurnTokens(*m, task);
  EXPECT_EQ(turns.style, PromptStyle::kChat);
  const TurnTokens plain = BuildTurnTokens(*m, without, PromptStyle::kChat);
  EXPECT_EQ(turns.first, plain.first);
  EXPECT_EQ(turns.later, plain.later);
  EXPECT_EQ(turns.first,
            m->EncodeChat({{"user", task.context + "\n\nWhat is the door code?"}}, true));
  ASSERT_EQ(turns.later.size(), 1u);
  EXPECT_EQ(tok.Decode(turns.later[0], /*render_special=*/true),
            "<|im_end|>\n<|im_start|>user\nWhat is the safe code?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(turns.tails[0], "What is the door code?<|im_end|>\n<|im_start|>assistant\n");

  // The generated tasks now carry prefixes: their chat prompts are those without.
  TaskGrid grid;
  grid.tasks = {"passkey", "niah", "multikey", "vt", "drift"};
  grid.lengths = {512};
  grid.depths = {0.5};
  const TokenCounter count = [&](std::string_view text) {
    return static_cast<int64_t>(tok.Encode(text, false, false).size());
  };
  for (const EvalTask& t : GenerateTasks(grid, count)) {
    SCOPED_TRACE(t.id);
    EvalTask stripped = t;
    for (EvalTurn& turn : stripped.turns) {
      EXPECT_FALSE(turn.answer_prefix.empty());
      turn.answer_prefix.clear();
    }
    const TurnTokens with = BuildTurnTokens(*m, t, PromptStyle::kAuto);
    const TurnTokens bare = BuildTurnTokens(*m, stripped, PromptStyle::kAuto);
    EXPECT_EQ(with.first, bare.first);
    EXPECT_EQ(with.later, bare.later);
    // In completion style they differ by the prefix, at the end of each turn.
    const TurnTokens completion = BuildTurnTokens(*m, t, PromptStyle::kCompletion);
    EXPECT_TRUE(tok.Decode(completion.first).ends_with(t.turns[0].answer_prefix));
    for (size_t i = 1; i < t.turns.size(); ++i) {
      EXPECT_TRUE(tok.Decode(completion.later[i - 1]).ends_with("\nAnswer: " + t.turns[i].answer_prefix));
    }
  }
}

// Context-only (eval/chat_turns.h): the first prompt ends where the context does, and the
// first question is a later turn. On both reference tokenizers, for every generated question
// task in completion style and (SmolLM2, which has a chat template) in chat style, the two
// parts' tokens joined are the question-in-prompt first prompt's, and the later turns are the
// same tokens.
TEST(PromptStyleModelTest, ContextOnlyTokensJoinedAreTheQuestionInPromptTokens) {
  QEVICT_REQUIRE_MODEL(smol);
  std::vector<const LoadedModel*> models = {smol};
  if (const LoadedModel* gemma = testing::GemmaModel()) models.push_back(gemma);
  TaskGrid grid;
  grid.tasks = {"passkey", "niah", "multikey", "vt", "drift", "multivalue", "multiquery",
                "cwe", "fwe", "scbench", "twofacts"};
  grid.lengths = {1024};
  grid.depths = {0.3};
  for (const LoadedModel* m : models) {
    const Tokenizer& tok = *m->tokenizer;
    const TokenCounter count = [&](std::string_view text) {
      return static_cast<int64_t>(tok.Encode(text, false, false).size());
    };
    for (const EvalTask& t : GenerateTasks(grid, count)) {
      for (const PromptStyle style : {PromptStyle::kChat, PromptStyle::kCompletion}) {
        if (style == PromptStyle::kChat && !m->chat.has_value()) continue;  // Gemma 3 270M base
        SCOPED_TRACE(t.id + (style == PromptStyle::kChat ? " chat" : " completion"));
        const TurnTokens whole = BuildTurnTokens(*m, t, style);
        const TurnTokens split = BuildTurnTokens(*m, t, style, EvalProtocol::kContextOnly);
        EXPECT_EQ(whole.first_asks, 1u);
        ASSERT_EQ(split.first_asks, 0u);
        ASSERT_EQ(split.later.size(), whole.later.size() + 1);
        std::vector<int32_t> joined = split.first;
        joined.insert(joined.end(), split.later[0].begin(), split.later[0].end());
        EXPECT_EQ(joined, whole.first);
        EXPECT_EQ(std::vector<std::vector<int32_t>>(split.later.begin() + 1, split.later.end()),
                  whole.later);
        // The first prompt is the context (and the template's head): no question in it.
        EXPECT_EQ(tok.Decode(split.first).find(t.turns[0].question), std::string::npos);
        EXPECT_TRUE(tok.Decode(split.later[0]).starts_with("\n\n"));
      }
    }
  }
}

}  // namespace
}  // namespace qevict
