#include "eval/chat_turns.h"

#include <utility>

#include "util/error.h"

namespace qevict {
namespace {

// A marker rendered through a template as an assistant answer and found again. It neither
// starts nor ends with a character Python counts as whitespace (\x1f is one): templates that
// trim message content (Llama-3, Gemma) would strip it.
constexpr char kSentinel[] = "[\x1fQEVICT_ANSWER\x1f]";

std::string FirstUserMessage(const EvalTask& task) {
  if (task.kind != TaskKind::kQuestions) return task.context;
  if (task.context.empty()) return task.turns.front().question;
  return task.context + "\n\n" + task.turns.front().question;
}

// `before`, "Question: Q\nAnswer:" and the answer prefix, if any, after a space.
std::string CompletionTurn(std::string before, const EvalTurn& turn) {
  std::string text = std::move(before);
  text += "Question: ";
  text += turn.question;
  text += "\nAnswer:";
  if (!turn.answer_prefix.empty()) {
    text += ' ';
    text += turn.answer_prefix;
  }
  return text;
}

void CheckTask(const EvalTask& task) {
  if (task.kind == TaskKind::kQuestions && task.turns.empty()) {
    std::string message = "task ";  // appended, not "task " + id: GCC 12's -Wrestrict misfires
    message += task.id;
    message += " has no question";
    throw Error(message);
  }
}

}  // namespace

const char* PromptStyleName(PromptStyle style) {
  switch (style) {
    case PromptStyle::kAuto: return "auto";
    case PromptStyle::kChat: return "chat";
    case PromptStyle::kCompletion: return "completion";
  }
  return "?";
}

PromptStyle ParsePromptStyle(std::string_view name) {
  for (const PromptStyle s : {PromptStyle::kAuto, PromptStyle::kChat, PromptStyle::kCompletion}) {
    if (name == PromptStyleName(s)) return s;
  }
  throw Error("unknown prompt style '" + std::string(name) + "' (expected auto, chat, completion)");
}

PromptStyle ResolvePromptStyle(const LoadedModel& model, PromptStyle requested) {
  if (requested == PromptStyle::kAuto) {
    return model.chat.has_value() ? PromptStyle::kChat : PromptStyle::kCompletion;
  }
  if (requested == PromptStyle::kChat && !model.chat.has_value()) {
    throw Error(std::string("--prompt-style chat: ") +
                (model.chat_template_source.empty()
                     ? "the model has no chat template"
                     : "the model's chat template is not one qevict knows (ChatML, Llama-3, "
                       "Llama-2)") +
                "; use --prompt-style completion");
  }
  return requested;
}

TurnTexts BuildTurnTexts(const EvalTask& task, PromptStyle style, const ChatTemplate* chat) {
  CheckTask(task);
  QEVICT_CHECK(task.kind != TaskKind::kPerplexity);
  QEVICT_CHECK(style == PromptStyle::kChat || style == PromptStyle::kCompletion);
  TurnTexts out;
  if (style == PromptStyle::kCompletion) {
    if (task.kind == TaskKind::kLongGen) {
      out.first = task.context;
      return out;
    }
    out.tails.push_back(CompletionTurn("", task.turns.front()));
    out.first = task.context.empty() ? out.tails.back()
                                     : task.context + "\n\n" + out.tails.back();
    for (size_t t = 1; t < task.turns.size(); ++t) {
      out.later.push_back(CompletionTurn("\n", task.turns[t]));
      out.tails.push_back(out.later.back());
    }
    return out;
  }
  QEVICT_CHECK(chat != nullptr);
  std::vector<ChatMessage> messages = {{"user", FirstUserMessage(task)}};
  out.first = RenderChat(*chat, messages, /*add_generation_prompt=*/true);
  if (task.kind != TaskKind::kQuestions) return out;
  const size_t question = out.first.rfind(task.turns.front().question);
  QEVICT_CHECK(question != std::string::npos);
  out.tails.push_back(out.first.substr(question));
  for (size_t t = 1; t < task.turns.size(); ++t) {
    // What follows the previous answer: render the conversation with a sentinel answer and keep
    // the text after it (it starts with the end-of-turn marker the answer did not include).
    messages.push_back({"assistant", kSentinel});
    messages.push_back({"user", task.turns[t].question});
    const std::string text = RenderChat(*chat, messages, /*add_generation_prompt=*/true);
    const size_t at = text.rfind(kSentinel);
    QEVICT_CHECK(at != std::string::npos);
    out.later.push_back(text.substr(at + sizeof(kSentinel) - 1));
    out.tails.push_back(out.later.back());
  }
  return out;
}

TurnTokens BuildTurnTokens(const LoadedModel& model, const EvalTask& task, PromptStyle style) {
  TurnTokens out;
  out.style = ResolvePromptStyle(model, style);
  const Tokenizer& tok = *model.tokenizer;
  if (task.kind == TaskKind::kPerplexity) {
    // Plain text, no template: the model continues prose.
    out.first = model.EncodeRaw(task.context);
    out.scored = tok.Encode(task.scored_text, /*add_bos=*/false, /*parse_special=*/false);
    if (out.first.empty() || out.scored.empty()) {
      throw Error("task " + task.id + ": empty context or scored text");
    }
    return out;
  }
  const bool chat = out.style == PromptStyle::kChat;
  TurnTexts texts = BuildTurnTexts(task, out.style, chat ? &*model.chat : nullptr);
  if (chat) {
    // Encoded as `qevict run --chat` encodes a conversation (the template writes BOS if any).
    out.first = model.EncodeChat({{"user", FirstUserMessage(task)}}, /*add_generation_prompt=*/true);
  } else {
    out.first = model.EncodeRaw(texts.first);
  }
  for (const std::string& later : texts.later) {
    // Template markers are special tokens; a completion turn is plain text.
    out.later.push_back(tok.Encode(later, /*add_bos=*/false, /*parse_special=*/chat));
  }
  out.tails = std::move(texts.tails);
  return out;
}

}  // namespace qevict
