// Chat prompt formatting. Jinja templates are not interpreted: the GGUF's
// tokenizer.chat_template is recognized as one of the known families by its markers, and the
// family is rendered by code. An unknown template is a clear error (use raw-prompt mode).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qevict {

enum class ChatStyle { kChatML, kLlama3, kLlama2, kGemma, kPhi3 };

struct ChatTemplate {
  ChatStyle style;
  // System message the template inserts when the conversation has none (SmolLM2's template
  // adds "You are a helpful AI assistant named SmolLM, trained by Hugging Face"); empty if none.
  std::string default_system;
  // Whether the template writes bos_token into the text (Llama-3 before the first message,
  // Llama-2 before every user turn). The rendered prompt then already holds BOS: encode it with
  // parse_special and add_bos = false. bos_token / eos_token are the texts substituted for the
  // template's variables; set them from the vocabulary when it differs from the family default.
  bool renders_bos = false;
  std::string bos_token;
  std::string eos_token;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// Recognizes the family of a Jinja template string, or nullopt when it is none we know:
// ChatML ("<|im_start|>": SmolLM2, Qwen 2/2.5/3), Llama-3.0 ("<|start_header_id|>"; the
// Llama-3.1+ templates with their dated system block are not rendered and give nullopt),
// Llama-2 ("[INST]" with "<<SYS>>"), Gemma ("<start_of_turn>": user/model turns, a system
// message prefixed to the first user turn) and Phi-3 ("<|user|>" ... "<|end|>").
std::optional<ChatTemplate> ParseChatTemplate(std::string_view jinja_template);
const char* ChatStyleName(ChatStyle style);
// A family by its name (chatml, llama3, llama2, gemma, phi3), as --chat-template takes it, with
// the family's own BOS/EOS texts; nullopt for another name.
std::optional<ChatTemplate> NamedChatTemplate(std::string_view name);

// The prompt text for these messages, exactly as the Jinja template would render it; with
// add_generation_prompt the assistant header is appended so generation starts the reply.
// Throws qevict::Error where the template would raise (Llama-2 and Gemma: no messages, or roles
// not alternating user/assistant after the optional system message).
std::string RenderChat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                       bool add_generation_prompt);

}  // namespace qevict
