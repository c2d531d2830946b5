#include "engine/chat_prompt.h"

#include <string>

#include "util/error.h"

namespace qevict {
namespace {
// Cannot occur in text a user gives (a C0 control on each side) nor in a template.
constexpr std::string_view kSplitMarker = "\x01qevict-split\x02";
}  // namespace

SplitChatPrompt EncodeChatSplit(const LoadedModel& model, const std::vector<ChatMessage>& messages,
                                size_t index, size_t split_at) {
  QEVICT_CHECK(index < messages.size() && split_at <= messages[index].content.size());
  SplitChatPrompt out;
  if (!model.chat) {  // EncodeChat says why there is no template to render
    out.tokens = model.EncodeChat(messages, /*add_generation_prompt=*/true);
    return out;
  }
  std::vector<ChatMessage> marked = messages;
  marked[index].content.insert(split_at, kSplitMarker);
  const std::string rendered = RenderChat(*model.chat, marked, /*add_generation_prompt=*/true);
  const size_t at = rendered.find(kSplitMarker);
  if (at == std::string::npos || split_at == 0 ||
      rendered.find(kSplitMarker, at + 1) != std::string::npos) {
    // A template that drops or repeats the text: no stable opening, one encoding.
    out.tokens = model.EncodeChat(messages, /*add_generation_prompt=*/true);
    return out;
  }
  // Templates write BOS themselves where the family wants it (as EncodeChat).
  out.tokens = model.tokenizer->Encode(rendered.substr(0, at), /*add_bos=*/false,
                                       /*parse_special=*/true);
  out.stable = out.tokens.size();
  const std::vector<int32_t> rest = model.tokenizer->Encode(
      rendered.substr(at + kSplitMarker.size()), /*add_bos=*/false, /*parse_special=*/true);
  out.tokens.insert(out.tokens.end(), rest.begin(), rest.end());
  return out;
}

}  // namespace qevict
