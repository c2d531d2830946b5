// The token sequences one task instance feeds a session: the first prompt (context and first
// question, or the whole prompt / prefix) and, for every later turn, the tokens that close the
// previous answer and ask the next question. Neither depends on what the model answered, so
// every policy sees the same prompt tokens.
//
// Two prompt styles (docs/evaluation.md, "Prompt styles"):
//  - chat: the model's chat template. The first user message is the context, a blank line and
//    the first question; each later turn is what the template puts after the previous answer
//    (the end-of-turn marker, the next user message, the assistant header), found by rendering
//    the conversation with a sentinel answer. Answer prefixes are ignored.
//  - completion: raw text, for base models. The first prompt is
//      CONTEXT "\n\nQuestion: " QUESTION "\nAnswer:" [" " ANSWER_PREFIX]
//    ("Question: ..." alone when the context is empty), and each later turn appends
//      "\nQuestion: " QUESTION "\nAnswer:" [" " ANSWER_PREFIX]
//    after the previous answer, so the model continues the prefix.
// A longgen prompt is the context: the user message (chat) or the raw text (completion). A ppl
// prompt is always raw text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/loaded_model.h"
#include "eval/task.h"
#include "tokenizer/chat_template.h"

namespace qevict {

enum class PromptStyle { kAuto, kChat, kCompletion };

// "auto", "chat", "completion".
const char* PromptStyleName(PromptStyle style);
// The inverse of PromptStyleName; throws qevict::Error for any other name.
PromptStyle ParsePromptStyle(std::string_view name);
// kAuto: kChat when the model has a chat template qevict knows (model.chat), kCompletion
// otherwise; kChat and kCompletion as given. Throws qevict::Error for kChat when the model has
// no known template.
PromptStyle ResolvePromptStyle(const LoadedModel& model, PromptStyle requested);

// The prompt texts of a kQuestions or kLongGen task in a resolved style (chat needs `chat`).
struct TurnTexts {
  std::string first;               // the first prompt (chat: as the template renders it)
  std::vector<std::string> later;  // one per turn after the first, appended after its answer
  // kQuestions, one per turn: the end of the prompt that turn's answer continues: the first
  // prompt from its question on, then each later turn's text whole.
  std::vector<std::string> tails;
};
TurnTexts BuildTurnTexts(const EvalTask& task, PromptStyle style, const ChatTemplate* chat);

struct TurnTokens {
  std::vector<int32_t> first;               // prompt of the first turn (BOS included if any)
  std::vector<std::vector<int32_t>> later;  // one per turn after the first
  std::vector<int32_t> scored;              // kPerplexity: the teacher-forced tokens
  PromptStyle style = PromptStyle::kChat;   // resolved: kChat or kCompletion
  std::vector<std::string> tails;           // kQuestions: TurnTexts::tails
};

// Resolves `style` (ResolvePromptStyle) and encodes the task's prompts in it.
TurnTokens BuildTurnTokens(const LoadedModel& model, const EvalTask& task,
                           PromptStyle style = PromptStyle::kAuto);

}  // namespace qevict
