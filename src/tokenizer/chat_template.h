// Chat prompt formatting. Jinja templates are not interpreted: the GGUF's
// tokenizer.chat_template is recognized as one of the known families by its markers, and the
// family is rendered by code. An unknown template is a clear error (use raw-prompt mode).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qevict {

enum class ChatStyle { kChatML, kLlama3, kLlama2 };

struct ChatTemplate {
  ChatStyle style;
  // System message the template inserts when the conversation has none (SmolLM2's template
  // adds "You are a helpful AI assistant named SmolLM, trained by Hugging Face"); empty if none.
  std::string default_system;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// Recognizes the family of a Jinja template string, or nullopt when it is none we know.
std::optional<ChatTemplate> ParseChatTemplate(std::string_view jinja_template);
const char* ChatStyleName(ChatStyle style);

// The prompt text for these messages, exactly as the Jinja template would render it; with
// add_generation_prompt the assistant header is appended so generation starts the reply.
std::string RenderChat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                       bool add_generation_prompt);

}  // namespace qevict
