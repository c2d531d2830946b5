// Fuzz target "chat_template": ParseChatTemplate on arbitrary text, and RenderChat of fuzzed
// messages with the recognized template (or, when the text is none we know, with a template of
// the style the flags pick, so the renderers are fuzzed whatever the text).
//
// Input: one flags byte, then NUL-separated parts: the template text, then one part per message,
// "role\ncontent" (no newline: the part is the role, content empty).
//   bit 0     add_generation_prompt
//   bits 1-2  style when the template is not recognized: ChatML, Llama-3, Llama-2, none
//   bit 3     renders_bos forced on for that fallback template
// Seeds written by hand start with a digit: '0' (0x30) to '7' set bits 0-2 only.
//
// Links: qevict_tokenizer
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_target.h"
#include "tokenizer/chat_template.h"
#include "util/error.h"

namespace qevict::fuzz {

inline int FuzzChatTemplateBytes(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t flags = in.Byte();
  const std::string_view source = in.Until('\0');
  std::vector<ChatMessage> messages;
  while (!in.empty()) {
    const std::string_view part = in.Until('\0');
    const size_t newline = part.find('\n');
    ChatMessage message;
    message.role = std::string(part.substr(0, newline));
    if (newline != std::string_view::npos) message.content = std::string(part.substr(newline + 1));
    messages.push_back(std::move(message));
  }

  std::optional<ChatTemplate> tmpl = ParseChatTemplate(source);
  if (tmpl) {
    Require(ChatStyleName(tmpl->style)[0] != '?', "ParseChatTemplate returned an unknown style");
  } else {
    const int style = (flags >> 1) & 3;
    if (style == 3) return 0;
    tmpl = ChatTemplate{};
    tmpl->style = static_cast<ChatStyle>(style);
    tmpl->renders_bos = flags & 8;
    tmpl->bos_token = "<s>";
    tmpl->eos_token = "</s>";
    tmpl->default_system = "You are a fuzzer.";
  }
  try {
    const std::string prompt = RenderChat(*tmpl, messages, /*add_generation_prompt=*/flags & 1);
    // ChatML writes every message's content verbatim, in order.
    size_t at = 0;
    for (const ChatMessage& m : messages) {
      if (tmpl->style != ChatStyle::kChatML) break;
      at = prompt.find(m.content, at);
      Require(at != std::string::npos, "ChatML prompt lacks a message's content");
      at += m.content.size();
    }
  } catch (const Error&) {
  }
  return 0;
}

inline const bool kChatTemplateTargetRegistered =
    RegisterFuzzTarget("chat_template", &FuzzChatTemplateBytes);

}  // namespace qevict::fuzz
