#include "eval/chat_turns.h"

#include <tuple>
#include <utility>

#include "util/error.h"

namespace qevict {
namespace {

// Markers rendered through a template and found again. Neither starts or ends with a character
// Python counts as whitespace (\x1f is one): templates that trim message content (Llama-3,
// Gemma) would strip it.
constexpr char kSentinel[] = "[\x1fQEVICT_ANSWER\x1f]";  // an assistant answer
constexpr char kContextEnd[] = "[\x1fQEVICT_CONTEXT_END\x1f]";  // in the first user message

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

void CheckTask(const EvalTask& task, EvalProtocol protocol) {
  if (task.kind != TaskKind::kQuestions) return;
  std::string message = "task ";  // appended, not "task " + id: GCC 12's -Wrestrict misfires
  message += task.id;
  if (task.turns.empty()) {
    message += " has no question";
    throw Error(message);
  }
  if (protocol == EvalProtocol::kContextOnly &&
      task.context.find_first_not_of(" \t\n\r\f\v") == std::string::npos) {
    message += " has no context: the context-only protocol compresses the cache after one";
    throw Error(message);
  }
}

// Context-only, chat: the first user message rendered, cut where its context ends. The parts
// joined are the question-in-prompt first prompt (checked).
std::pair<std::string, std::string> SplitChatAtContextEnd(const EvalTask& task,
                                                          const ChatTemplate& chat) {
  const std::string marked = RenderChat(
      chat, {{"user", task.context + kContextEnd + "\n\n" + task.turns.front().question}},
      /*add_generation_prompt=*/true);
  const size_t at = marked.find(kContextEnd);
  QEVICT_CHECK(at != std::string::npos);
  std::pair<std::string, std::string> parts(marked.substr(0, at),
                                            marked.substr(at + sizeof(kContextEnd) - 1));
  QEVICT_CHECK(parts.first + parts.second ==
               RenderChat(chat, {{"user", FirstUserMessage(task)}}, /*add_generation_prompt=*/true));
  return parts;
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

const char* EvalProtocolName(EvalProtocol protocol) {
  return protocol == EvalProtocol::kContextOnly ? "context-only" : "question-in-prompt";
}

EvalProtocol ParseEvalProtocol(std::string_view name) {
  for (const EvalProtocol p : {EvalProtocol::kQuestionInPrompt, EvalProtocol::kContextOnly}) {
    if (name == EvalProtocolName(p)) return p;
  }
  throw Error("unknown protocol '" + std::string(name) +
              "' (expected question-in-prompt, context-only)");
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

TurnTexts BuildTurnTexts(const EvalTask& task, PromptStyle style, const ChatTemplate* chat,
                         EvalProtocol protocol) {
  CheckTask(task, protocol);
  QEVICT_CHECK(task.kind != TaskKind::kPerplexity);
  QEVICT_CHECK(style == PromptStyle::kChat || style == PromptStyle::kCompletion);
  TurnTexts out;
  const bool context_only =
      protocol == EvalProtocol::kContextOnly && task.kind == TaskKind::kQuestions;
  if (context_only) out.first_asks = 0;
  if (style == PromptStyle::kCompletion) {
    if (task.kind == TaskKind::kLongGen) {
      out.first = task.context;
      return out;
    }
    if (context_only) {
      out.first = task.context;
      out.later.push_back(CompletionTurn("\n\n", task.turns.front()));
      out.tails.push_back(out.later.back());
    } else {
      out.tails.push_back(CompletionTurn("", task.turns.front()));
      out.first = task.context.empty() ? out.tails.back()
                                       : task.context + "\n\n" + out.tails.back();
    }
    for (size_t t = 1; t < task.turns.size(); ++t) {
      out.later.push_back(CompletionTurn("\n", task.turns[t]));
      out.tails.push_back(out.later.back());
    }
    return out;
  }
  QEVICT_CHECK(chat != nullptr);
  std::vector<ChatMessage> messages = {{"user", FirstUserMessage(task)}};
  if (context_only) {
    std::string question;
    std::tie(out.first, question) = SplitChatAtContextEnd(task, *chat);
    out.later.push_back(question);
    out.tails.push_back(std::move(question));
  } else {
    out.first = RenderChat(*chat, messages, /*add_generation_prompt=*/true);
    if (task.kind != TaskKind::kQuestions) return out;
    const size_t question = out.first.rfind(task.turns.front().question);
    QEVICT_CHECK(question != std::string::npos);
    out.tails.push_back(out.first.substr(question));
  }
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

TurnTokens BuildTurnTokens(const LoadedModel& model, const EvalTask& task, PromptStyle style,
                           EvalProtocol protocol) {
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
  TurnTexts texts = BuildTurnTexts(task, out.style, chat ? &*model.chat : nullptr, protocol);
  // Chat: encoded as `qevict run --chat` encodes a conversation (LoadedModel::EncodeChat: the
  // template writes BOS if any).
  out.first = chat ? tok.Encode(texts.first, /*add_bos=*/false, /*parse_special=*/true)
                   : model.EncodeRaw(texts.first);
  out.first_asks = texts.first_asks;
  for (size_t i = 0; i < texts.later.size(); ++i) {
    // Template markers are special tokens; a completion turn is plain text, except a first
    // question split off the first prompt, encoded as the first prompt is.
    const bool split_off_first = i == 0 && texts.first_asks == 0;
    out.later.push_back(tok.Encode(texts.later[i], /*add_bos=*/false,
                                   /*parse_special=*/chat || split_off_first));
  }
  out.tails = std::move(texts.tails);
  return out;
}

}  // namespace qevict
