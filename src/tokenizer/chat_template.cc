#include "tokenizer/chat_template.h"

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace qevict {
namespace {

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// The default system message of a ChatML template: the text of a string literal that continues
// "<|im_start|>system\n" up to "<|im_end|>" (as in SmolLM2's and Qwen2.5's templates). Empty
// when the system turn is built from a variable instead ("...system\n' + messages[0]...").
std::string ExtractChatMlDefaultSystem(std::string_view tmpl) {
  static constexpr std::string_view kEscapedHeader = "<|im_start|>system\\n";
  static constexpr std::string_view kRawHeader = "<|im_start|>system\n";
  static constexpr std::string_view kEnd = "<|im_end|>";
  for (std::string_view header : {kEscapedHeader, kRawHeader}) {
    size_t at = tmpl.find(header);
    while (at != std::string_view::npos) {
      std::string text;
      size_t pos = at + header.size();
      while (pos < tmpl.size()) {
        if (tmpl.substr(pos).starts_with(kEnd)) return text;
        const char c = tmpl[pos];
        if (c == '\'' || c == '"') break;  // the literal ends: not a fixed message
        if (c == '\\' && pos + 1 < tmpl.size()) {  // Jinja / Python string escapes
          const char e = tmpl[pos + 1];
          text.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e);
          pos += 2;
          continue;
        }
        text.push_back(c);
        ++pos;
      }
      // The scan from a header that starts before `pos` would run in step with this one from
      // that header's end on (a header holds no quote, and its only backslash starts an escape
      // pair either way), so it would stop at the same place: skip those. Rescanning from every
      // header made a crafted template quadratic (a hang; tests/fuzz_regressions/chat_template).
      if (pos >= tmpl.size()) break;
      at = tmpl.find(header, pos);
    }
  }
  return "";
}

// Python's str.strip() (Jinja's trim filter): removes leading and trailing whitespace.
std::string_view StripPythonSpace(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    const unicode::DecodedChar c = unicode::DecodeUtf8(text, begin);
    if (!unicode::IsPythonSpace(c.cp)) break;
    begin += c.length;
  }
  size_t end = text.size();
  while (end > begin) {
    size_t start = end - 1;  // back up to the first byte of the last character
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    const unicode::DecodedChar c = unicode::DecodeUtf8(text, start);
    if (start + c.length != end || !unicode::IsPythonSpace(c.cp)) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

std::string RenderChatMl(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt) {
  std::string out;
  if (!messages.empty() && messages[0].role != "system" && !tmpl.default_system.empty()) {
    out += "<|im_start|>system\n" + tmpl.default_system + "<|im_end|>\n";
  }
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string RenderLlama3(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt) {
  std::string out;
  if (!messages.empty() && tmpl.renders_bos) out += tmpl.bos_token;
  for (const ChatMessage& m : messages) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    out += StripPythonSpace(m.content);
    out += "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Llama-2 and Gemma raise unless roles alternate user/assistant after an optional system one.
void RequireAlternation(const std::vector<ChatMessage>& messages, size_t first,
                        const char* family) {
  for (size_t i = first; i < messages.size(); ++i) {
    const bool expect_user = (i - first) % 2 == 0;
    if ((messages[i].role == "user") != expect_user) {
      throw Error(std::string("chat: the ") + family +
                  " template needs roles alternating user/assistant/user/... (after an optional "
                  "first system message); message " + std::to_string(i) + " has role \"" +
                  messages[i].role + "\"");
    }
  }
}

std::string RenderLlama2(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages) {
  if (messages.empty()) {  // the template reads messages[0] unconditionally
    throw Error("chat: the Llama-2 template needs at least one message");
  }
  const bool has_system = !messages.empty() && messages[0].role == "system";
  const size_t first = has_system ? 1 : 0;
  RequireAlternation(messages, first, "Llama-2");
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::string content = m.content;
    if (i == first && has_system) {
      content = "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + m.content;
    }
    const std::string_view stripped = StripPythonSpace(content);
    if (m.role == "user") {
      if (tmpl.renders_bos) out += tmpl.bos_token;
      out += "[INST] ";
      out += stripped;
      out += " [/INST]";
    } else if (m.role == "assistant") {
      out += " ";
      out += stripped;
      out += " " + tmpl.eos_token;
    }
  }
  return out;
}

// Gemma 2/3: BOS, then <start_of_turn>user|model turns with trimmed content; a system message
// is not a turn of its own but is prefixed (and a blank line) to the first user turn.
std::string RenderGemma(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt) {
  if (messages.empty()) throw Error("chat: the Gemma template needs at least one message");
  const bool has_system = messages[0].role == "system";
  const size_t first = has_system ? 1 : 0;
  RequireAlternation(messages, first, "Gemma");
  std::string out = tmpl.renders_bos ? tmpl.bos_token : "";
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    out += "<start_of_turn>";
    out += m.role == "assistant" ? "model" : m.role;
    out += "\n";
    if (i == first && has_system) out += messages[0].content + "\n\n";
    out += StripPythonSpace(m.content);
    out += "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

// Phi-3: <|role|> headers, each message closed by <|end|>; without a generation prompt the
// template ends with EOS.
std::string RenderPhi3(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                       bool add_generation_prompt) {
  std::string out = tmpl.renders_bos && !messages.empty() ? tmpl.bos_token : "";
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") continue;
    out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  }
  out += add_generation_prompt ? "<|assistant|>\n" : tmpl.eos_token;
  return out;
}

}  // namespace

std::optional<ChatTemplate> ParseChatTemplate(std::string_view jinja_template) {
  ChatTemplate tmpl;
  tmpl.renders_bos = Contains(jinja_template, "bos_token");
  if (Contains(jinja_template, "<|im_start|>")) {
    tmpl.style = ChatStyle::kChatML;
    tmpl.default_system = ExtractChatMlDefaultSystem(jinja_template);
    tmpl.renders_bos = false;
    return tmpl;
  }
  if (Contains(jinja_template, "<|start_header_id|>")) {
    // Llama 3.1+ templates open with a dated system block (and tool support) we do not render.
    if (Contains(jinja_template, "Cutting Knowledge Date")) return std::nullopt;
    tmpl.style = ChatStyle::kLlama3;
    tmpl.bos_token = "<|begin_of_text|>";
    tmpl.eos_token = "<|eot_id|>";
    return tmpl;
  }
  if (Contains(jinja_template, "<start_of_turn>")) {
    tmpl.style = ChatStyle::kGemma;
    tmpl.bos_token = "<bos>";
    tmpl.eos_token = "<eos>";
    return tmpl;
  }
  if (Contains(jinja_template, "<|user|>") && Contains(jinja_template, "<|end|>")) {
    tmpl.style = ChatStyle::kPhi3;
    tmpl.bos_token = "<s>";
    tmpl.eos_token = "<|endoftext|>";
    return tmpl;
  }
  if (Contains(jinja_template, "[INST]") && Contains(jinja_template, "<<SYS>>")) {
    tmpl.style = ChatStyle::kLlama2;
    tmpl.bos_token = "<s>";
    tmpl.eos_token = "</s>";
    return tmpl;
  }
  return std::nullopt;
}

std::optional<ChatTemplate> NamedChatTemplate(std::string_view name) {
  // The families' own markers, through the recognizer, so that a name renders exactly as the
  // family's GGUF template would (BOS and EOS texts included).
  if (name == "chatml") return ParseChatTemplate("<|im_start|>");
  if (name == "llama3") return ParseChatTemplate("{{ bos_token }}<|start_header_id|>");
  if (name == "llama2") return ParseChatTemplate("{{ bos_token }}[INST] <<SYS>>");
  if (name == "gemma") return ParseChatTemplate("{{ bos_token }}<start_of_turn>");
  if (name == "phi3") return ParseChatTemplate("<|user|><|end|>");
  return std::nullopt;
}

const char* ChatStyleName(ChatStyle style) {
  switch (style) {
    case ChatStyle::kChatML:
      return "chatml";
    case ChatStyle::kLlama3:
      return "llama3";
    case ChatStyle::kLlama2:
      return "llama2";
    case ChatStyle::kGemma:
      return "gemma";
    case ChatStyle::kPhi3:
      return "phi3";
  }
  return "?";
}

std::string RenderChat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                       bool add_generation_prompt) {
  switch (tmpl.style) {
    case ChatStyle::kChatML:
      return RenderChatMl(tmpl, messages, add_generation_prompt);
    case ChatStyle::kLlama3:
      return RenderLlama3(tmpl, messages, add_generation_prompt);
    case ChatStyle::kLlama2:
      return RenderLlama2(tmpl, messages);
    case ChatStyle::kGemma:
      return RenderGemma(tmpl, messages, add_generation_prompt);
    case ChatStyle::kPhi3:
      return RenderPhi3(tmpl, messages, add_generation_prompt);
  }
  return "";
}

}  // namespace qevict
