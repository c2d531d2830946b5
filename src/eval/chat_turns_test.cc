// Tests of the prompt texts of both styles (eval/chat_turns.h) without a model: completion-style
// text with answer prefixes, chat-style text through a ChatML template (answer prefixes ignored),
// and how a style is named, parsed and resolved. The token sequences are checked with the
// reference model in tests/prompt_style_test.cc.
#include "eval/chat_turns.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace qevict {
namespace {

EvalTask ThreeTurns() {
  EvalTask task;
  task.id = "t";
  task.context = "Alice's number is 12. Bob's number is 34.";
  EvalTurn first, second, third;
  first.question = "What is Alice's number?";
  first.answers = {"12"};
  first.answer_prefix = "Alice's number is";
  second.question = "What is Bob's number?";
  second.answers = {"34"};  // no prefix
  third.question = "And Alice's again?";
  third.answers = {"12"};
  third.answer_prefix = "Alice's number is";
  task.turns = {first, second, third};
  return task;
}

ChatTemplate ChatMl() {
  ChatTemplate t;
  t.style = ChatStyle::kChatML;
  return t;
}

TEST(PromptTextsTest, CompletionEndsEachTurnWithItsAnswerPrefix) {
  const TurnTexts texts = BuildTurnTexts(ThreeTurns(), PromptStyle::kCompletion, nullptr);
  EXPECT_EQ(texts.first,
            "Alice's number is 12. Bob's number is 34.\n\n"
            "Question: What is Alice's number?\nAnswer: Alice's number is");
  ASSERT_EQ(texts.later.size(), 2u);
  // Appended after the previous answer, whatever it was.
  EXPECT_EQ(texts.later[0], "\nQuestion: What is Bob's number?\nAnswer:");
  EXPECT_EQ(texts.later[1], "\nQuestion: And Alice's again?\nAnswer: Alice's number is");
  ASSERT_EQ(texts.tails.size(), 3u);
  EXPECT_EQ(texts.tails[0], "Question: What is Alice's number?\nAnswer: Alice's number is");
  EXPECT_EQ(texts.tails[1], texts.later[0]);
  EXPECT_EQ(texts.tails[2], texts.later[1]);
}

TEST(PromptTextsTest, CompletionWithoutContextOrPrefix) {
  EvalTask task = ThreeTurns();
  task.context = "";
  task.turns.resize(1);
  task.turns[0].answer_prefix = "";
  const TurnTexts texts = BuildTurnTexts(task, PromptStyle::kCompletion, nullptr);
  EXPECT_EQ(texts.first, "Question: What is Alice's number?\nAnswer:");
  EXPECT_TRUE(texts.later.empty());
  EXPECT_EQ(texts.tails, std::vector<std::string>{texts.first});
}

TEST(PromptTextsTest, CompletionLongGenIsTheRawContext) {
  EvalTask task;
  task.id = "g";
  task.kind = TaskKind::kLongGen;
  task.context = "Continue the following text:\n\nOnce upon a time";
  const TurnTexts texts = BuildTurnTexts(task, PromptStyle::kCompletion, nullptr);
  EXPECT_EQ(texts.first, task.context);
  EXPECT_TRUE(texts.later.empty());
  EXPECT_TRUE(texts.tails.empty());
}

TEST(PromptTextsTest, ChatUsesTheTemplateAndIgnoresAnswerPrefixes) {
  const ChatTemplate chatml = ChatMl();
  const TurnTexts texts = BuildTurnTexts(ThreeTurns(), PromptStyle::kChat, &chatml);
  EXPECT_EQ(texts.first,
            "<|im_start|>user\nAlice's number is 12. Bob's number is 34.\n\n"
            "What is Alice's number?<|im_end|>\n<|im_start|>assistant\n");
  ASSERT_EQ(texts.later.size(), 2u);
  // What the template puts after the previous answer: its end marker, the next question.
  EXPECT_EQ(texts.later[0],
            "<|im_end|>\n<|im_start|>user\nWhat is Bob's number?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(texts.later[1],
            "<|im_end|>\n<|im_start|>user\nAnd Alice's again?<|im_end|>\n<|im_start|>assistant\n");
  ASSERT_EQ(texts.tails.size(), 3u);
  EXPECT_EQ(texts.tails[0], "What is Alice's number?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(texts.tails[2], texts.later[1]);

  EvalTask without = ThreeTurns();
  for (EvalTurn& turn : without.turns) turn.answer_prefix.clear();
  const TurnTexts plain = BuildTurnTexts(without, PromptStyle::kChat, &chatml);
  EXPECT_EQ(plain.first, texts.first);
  EXPECT_EQ(plain.later, texts.later);
  EXPECT_EQ(plain.tails, texts.tails);
}

TEST(PromptTextsTest, ChatWithoutContextAsksTheQuestionAlone) {
  const ChatTemplate chatml = ChatMl();
  EvalTask task = ThreeTurns();
  task.context = "";
  task.turns.resize(1);
  const TurnTexts texts = BuildTurnTexts(task, PromptStyle::kChat, &chatml);
  EXPECT_EQ(texts.first, "<|im_start|>user\nWhat is Alice's number?<|im_end|>\n<|im_start|>assistant\n");
}

// Context-only: the first prompt ends with the context; the first question comes as a later
// turn holding the rest of the question-in-prompt first prompt; later turns are unchanged.
void ExpectFirstPromptSplitAtContextEnd(const TurnTexts& in_prompt, const TurnTexts& split) {
  EXPECT_EQ(in_prompt.first_asks, 1u);
  EXPECT_EQ(split.first_asks, 0u);
  ASSERT_EQ(split.later.size(), in_prompt.later.size() + 1);
  EXPECT_EQ(split.first + split.later[0], in_prompt.first);
  EXPECT_EQ(std::vector<std::string>(split.later.begin() + 1, split.later.end()), in_prompt.later);
  EXPECT_EQ(split.tails, split.later);  // every turn's prompt is a later text, whole
}

TEST(PromptTextsTest, ContextOnlyCompletionSplitsTheFirstPromptAtTheContextEnd) {
  const EvalTask task = ThreeTurns();
  const TurnTexts texts = BuildTurnTexts(task, PromptStyle::kCompletion, nullptr,
                                         EvalProtocol::kContextOnly);
  ExpectFirstPromptSplitAtContextEnd(BuildTurnTexts(task, PromptStyle::kCompletion, nullptr),
                                     texts);
  EXPECT_EQ(texts.first, "Alice's number is 12. Bob's number is 34.");
  EXPECT_EQ(texts.later.at(0), "\n\nQuestion: What is Alice's number?\nAnswer: Alice's number is");
}

TEST(PromptTextsTest, ContextOnlyChatSplitsTheUserMessageAtTheContextEnd) {
  const EvalTask task = ThreeTurns();
  const ChatTemplate chatml = ChatMl();
  const TurnTexts texts =
      BuildTurnTexts(task, PromptStyle::kChat, &chatml, EvalProtocol::kContextOnly);
  ExpectFirstPromptSplitAtContextEnd(BuildTurnTexts(task, PromptStyle::kChat, &chatml), texts);
  EXPECT_EQ(texts.first, "<|im_start|>user\nAlice's number is 12. Bob's number is 34.");
  EXPECT_EQ(texts.later.at(0), "\n\nWhat is Alice's number?<|im_end|>\n<|im_start|>assistant\n");
  // Every template family: the parts joined are the question-in-prompt prompt, which the
  // first part ends inside of, right after the context.
  for (const ChatStyle style : {ChatStyle::kChatML, ChatStyle::kLlama3, ChatStyle::kLlama2,
                                ChatStyle::kGemma, ChatStyle::kPhi3}) {
    ChatTemplate chat;
    chat.style = style;
    chat.bos_token = "<s>";
    chat.eos_token = "</s>";
    SCOPED_TRACE(static_cast<int>(style));
    const TurnTexts split =
        BuildTurnTexts(task, PromptStyle::kChat, &chat, EvalProtocol::kContextOnly);
    ExpectFirstPromptSplitAtContextEnd(BuildTurnTexts(task, PromptStyle::kChat, &chat), split);
    EXPECT_TRUE(split.first.ends_with(task.context)) << split.first;
    EXPECT_TRUE(split.later[0].starts_with("\n\n" + task.turns[0].question)) << split.later[0];
  }
}

TEST(PromptTextsTest, ContextOnlyNeedsAContextAndLeavesLongGenAlone) {
  const ChatTemplate chatml = ChatMl();
  EvalTask task = ThreeTurns();
  for (const char* context : {"", " \n\t "}) {
    task.context = context;
    for (const PromptStyle style : {PromptStyle::kCompletion, PromptStyle::kChat}) {
      try {
        BuildTurnTexts(task, style, &chatml, EvalProtocol::kContextOnly);
        ADD_FAILURE() << "no exception for context '" << context << "'";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("task t has no context"), std::string::npos)
            << e.what();
      }
    }
    EXPECT_NO_THROW(BuildTurnTexts(task, PromptStyle::kCompletion, nullptr));
  }
  EvalTask longgen;
  longgen.id = "g";
  longgen.kind = TaskKind::kLongGen;
  longgen.context = "Continue the following text:\n\nOnce";
  const TurnTexts texts = BuildTurnTexts(longgen, PromptStyle::kCompletion, nullptr,
                                         EvalProtocol::kContextOnly);
  EXPECT_EQ(texts.first, longgen.context);
  EXPECT_TRUE(texts.later.empty());
}

TEST(PromptStyleTest, ProtocolNamesParse) {
  for (const EvalProtocol p : {EvalProtocol::kQuestionInPrompt, EvalProtocol::kContextOnly}) {
    EXPECT_EQ(ParseEvalProtocol(EvalProtocolName(p)), p);
  }
  EXPECT_STREQ(EvalProtocolName(EvalProtocol::kQuestionInPrompt), "question-in-prompt");
  EXPECT_STREQ(EvalProtocolName(EvalProtocol::kContextOnly), "context-only");
  EXPECT_THROW(ParseEvalProtocol("context"), Error);
  EXPECT_THROW(ParseEvalProtocol(""), Error);
}

// Templates that trim message content render the later turns too (a sentinel answer made of
// Python whitespace at its ends used to be stripped, failing an internal check).
TEST(PromptTextsTest, ChatLaterTurnsThroughTrimmingTemplates) {
  ChatTemplate gemma;
  gemma.style = ChatStyle::kGemma;
  const TurnTexts texts = BuildTurnTexts(ThreeTurns(), PromptStyle::kChat, &gemma);
  ASSERT_EQ(texts.later.size(), 2u);
  EXPECT_EQ(texts.later[0],
            "<end_of_turn>\n<start_of_turn>user\nWhat is Bob's number?<end_of_turn>\n"
            "<start_of_turn>model\n");
  ChatTemplate llama3;
  llama3.style = ChatStyle::kLlama3;
  const TurnTexts l3 = BuildTurnTexts(ThreeTurns(), PromptStyle::kChat, &llama3);
  ASSERT_EQ(l3.later.size(), 2u);
  EXPECT_TRUE(l3.later[1].starts_with("<|eot_id|>")) << l3.later[1];
  EXPECT_NE(l3.later[1].find("And Alice's again?"), std::string::npos) << l3.later[1];
}

TEST(PromptTextsTest, AQuestionTaskWithoutTurnsIsAnError) {
  EvalTask task;
  task.id = "empty";
  task.context.push_back('c');  // not = "c": GCC 12's -Wrestrict misfires here
  EXPECT_THROW(BuildTurnTexts(task, PromptStyle::kCompletion, nullptr), Error);
}

TEST(PromptStyleTest, NamesParseAndResolve) {
  for (const PromptStyle s : {PromptStyle::kAuto, PromptStyle::kChat, PromptStyle::kCompletion}) {
    EXPECT_EQ(ParsePromptStyle(PromptStyleName(s)), s);
  }
  EXPECT_STREQ(PromptStyleName(PromptStyle::kCompletion), "completion");
  try {
    ParsePromptStyle("raw");
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected auto, chat, completion"), std::string::npos);
  }

  LoadedModel with_template;  // only what ResolvePromptStyle reads
  with_template.chat = ChatMl();
  with_template.chat_template_source = "{{ '<|im_start|>' }}";
  EXPECT_EQ(ResolvePromptStyle(with_template, PromptStyle::kAuto), PromptStyle::kChat);
  EXPECT_EQ(ResolvePromptStyle(with_template, PromptStyle::kChat), PromptStyle::kChat);
  // A base model whose file carries a template is still evaluated with completion prompts.
  EXPECT_EQ(ResolvePromptStyle(with_template, PromptStyle::kCompletion), PromptStyle::kCompletion);

  LoadedModel unknown_template;
  unknown_template.chat_template_source = "{% for m in messages %}{{ m.content }}{% endfor %}";
  EXPECT_EQ(ResolvePromptStyle(unknown_template, PromptStyle::kAuto), PromptStyle::kCompletion);
  LoadedModel no_template;
  EXPECT_EQ(ResolvePromptStyle(no_template, PromptStyle::kAuto), PromptStyle::kCompletion);
  auto message = [](const LoadedModel& m) {
    try {
      ResolvePromptStyle(m, PromptStyle::kChat);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(no_template),
            "--prompt-style chat: the model has no chat template; use --prompt-style completion");
  EXPECT_NE(message(unknown_template).find("not one qevict knows"), std::string::npos);
}

}  // namespace
}  // namespace qevict
