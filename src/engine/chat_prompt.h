// Chat prompts whose opening stays the same from one run to the next: the rendered conversation
// encoded in two parts, split at a point of one message's text (the end of a document). Every
// later conversation that keeps what comes before that point -- the same system message, the
// same document -- starts with the same tokens, whatever question follows, so a prompt cache
// saved there (--prompt-cache) or a chat's document read before the first question is reused
// as it is. One encoding of the whole rendering would not do: the tokenizer may merge the
// document's last characters with the text after it ("\n" + "\n\nWhat" reads as "\n\n", "\n").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/loaded_model.h"

namespace qevict {

struct SplitChatPrompt {
  std::vector<int32_t> tokens;  // the conversation with the generation prompt
  size_t stable = 0;            // leading tokens: the rendering up to the split point
};

// `messages` rendered with the model's chat template and the generation prompt, split after
// the first `split_at` bytes of messages[index].content. Throws as LoadedModel::EncodeChat does.
SplitChatPrompt EncodeChatSplit(const LoadedModel& model, const std::vector<ChatMessage>& messages,
                                size_t index, size_t split_at);

}  // namespace qevict
