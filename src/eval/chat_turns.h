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
//
// Two protocols decide where the first prompt ends (docs/evaluation.md, "Protocols"):
//  - question-in-prompt: as above, the first prompt holds the context and the first question;
//  - context-only: the first prompt ends where the context does, and the first question comes
//    as a later turn: the rest of the question-in-prompt first prompt. Chat: the first prompt
//    is the template's text up to the end of the context, the first turn a blank line, the
//    question, and what the template puts after the user message (its end-of-turn marker and
//    the assistant header). Completion: the first prompt is CONTEXT, the first turn
//      "\n\nQuestion: " QUESTION "\nAnswer:" [" " ANSWER_PREFIX].
//    The texts joined are those of question-in-prompt; each part is tokenized on its own, so
//    only a tokenizer that merges across the end of the context could tell them apart. Later
//    turns are the same in both.
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

enum class EvalProtocol { kQuestionInPrompt, kContextOnly };

// "question-in-prompt", "context-only".
const char* EvalProtocolName(EvalProtocol protocol);
// The inverse of EvalProtocolName; throws qevict::Error for any other name.
EvalProtocol ParseEvalProtocol(std::string_view name);

// The prompt texts of a kQuestions or kLongGen task in a resolved style (chat needs `chat`).
// Context-only needs a context with something other than whitespace in it (qevict::Error
// otherwise); it changes nothing for kLongGen.
struct TurnTexts {
  std::string first;               // the first prompt (chat: as the template renders it)
  // One per turn the first prompt does not ask, in turn order; each is appended after the
  // previous answer (context-only: the first one right after the first prompt).
  std::vector<std::string> later;
  // How many questions the first prompt asks: 1 (question-in-prompt) or 0 (context-only).
  // Turn t's prompt is later[t - first_asks] when t >= first_asks.
  size_t first_asks = 1;
  // kQuestions, one per turn: the end of the prompt that turn's answer continues: the first
  // prompt from its question on (question-in-prompt), then each later text whole.
  std::vector<std::string> tails;
};
TurnTexts BuildTurnTexts(const EvalTask& task, PromptStyle style, const ChatTemplate* chat,
                         EvalProtocol protocol = EvalProtocol::kQuestionInPrompt);

struct TurnTokens {
  std::vector<int32_t> first;               // prompt of the first turn (BOS included if any)
  std::vector<std::vector<int32_t>> later;  // TurnTexts::later, encoded
  size_t first_asks = 1;                    // TurnTexts::first_asks
  std::vector<int32_t> scored;              // kPerplexity: the teacher-forced tokens
  PromptStyle style = PromptStyle::kChat;   // resolved: kChat or kCompletion
  std::vector<std::string> tails;           // kQuestions: TurnTexts::tails
};

// Resolves `style` (ResolvePromptStyle) and encodes the task's prompts in it. A question split
// off the first prompt (context-only) is encoded as the first prompt is (special tokens
// parsed); later turns as before (chat: special tokens parsed; completion: plain text).
TurnTokens BuildTurnTokens(const LoadedModel& model, const EvalTask& task,
                           PromptStyle style = PromptStyle::kAuto,
                           EvalProtocol protocol = EvalProtocol::kQuestionInPrompt);

}  // namespace qevict
