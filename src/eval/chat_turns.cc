#include "eval/chat_turns.h"

#include "tokenizer/chat_template.h"
#include "util/error.h"

namespace qevict {
namespace {

constexpr char kSentinel[] = "\x1fQEVICT_ANSWER\x1f";

std::string FirstUserMessage(const EvalTask& task) {
  if (task.kind != TaskKind::kQuestions) return task.context;
  if (task.context.empty()) return task.turns.front().question;
  return task.context + "\n\n" + task.turns.front().question;
}

}  // namespace

TurnTokens BuildTurnTokens(const LoadedModel& model, const EvalTask& task) {
  TurnTokens out;
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
  if (task.kind == TaskKind::kQuestions && task.turns.empty()) {
    throw Error("task " + task.id + " has no question");
  }
  out.chat = model.chat.has_value();
  if (!out.chat) {
    if (task.kind == TaskKind::kLongGen) {
      out.first = model.EncodeRaw(task.context);
      return out;
    }
    out.first = model.EncodeRaw(task.context + "\n\nQuestion: " + task.turns.front().question +
                                "\nAnswer:");
    for (size_t t = 1; t < task.turns.size(); ++t) {
      out.later.push_back(tok.Encode("\nQuestion: " + task.turns[t].question + "\nAnswer:",
                                     /*add_bos=*/false, /*parse_special=*/false));
    }
    return out;
  }
  std::vector<ChatMessage> messages = {{"user", FirstUserMessage(task)}};
  out.first = model.EncodeChat(messages, /*add_generation_prompt=*/true);
  for (size_t t = 1; t < task.turns.size(); ++t) {
    // What follows the previous answer: render the conversation with a sentinel answer and keep
    // the text after it (it starts with the end-of-turn marker the answer did not include).
    messages.push_back({"assistant", kSentinel});
    messages.push_back({"user", task.turns[t].question});
    const std::string text = RenderChat(*model.chat, messages, /*add_generation_prompt=*/true);
    const size_t at = text.rfind(kSentinel);
    QEVICT_CHECK(at != std::string::npos);
    out.later.push_back(tok.Encode(std::string_view(text).substr(at + sizeof(kSentinel) - 1),
                                   /*add_bos=*/false, /*parse_special=*/true));
  }
  return out;
}

}  // namespace qevict
