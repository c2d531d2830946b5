#include "engine/loaded_model.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace qevict {

namespace {

void CheckModelPath(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    throw Error("cannot open model file '" + path +
                "': no such file; give -m the path of a .gguf file, or run `make setup` (or "
                "scripts/fetch_model.sh) to download the reference models into models/");
  }
  if (std::filesystem::is_directory(status)) {
    throw Error("model path '" + path +
                "' is a directory, not a regular file: give -m one .gguf file in it");
  }
}

}  // namespace

LoadedModel LoadedModel::Load(const std::string& path) {
  CheckModelPath(path);
  LoadedModel m;
  m.model = TransformerModel::Load(path);
  try {
    m.tokenizer = Tokenizer::FromGguf(m.model->file());
    if (m.tokenizer->vocab_size() != m.model->config().n_vocab) {
      throw Error("tokenizer has " + std::to_string(m.tokenizer->vocab_size()) +
                  " tokens but token_embd.weight has " + std::to_string(m.model->config().n_vocab) +
                  " rows");
    }
  } catch (const Error& e) {
    throw Error("model '" + path + "': " + e.what() + UnreadableModelFix());
  }
  if (auto tmpl = m.model->file().FindString("tokenizer.chat_template")) {
    m.chat_template_source = std::string(*tmpl);
    m.chat = ParseChatTemplate(*tmpl);
  }
  return m;
}

void LoadedModel::OverrideChatTemplate(const std::string& name_or_file) {
  if (auto named = NamedChatTemplate(name_or_file)) {
    chat = named;
    chat_template_source = name_or_file;
    return;
  }
  std::ifstream in(name_or_file, std::ios::binary);
  if (!in) {
    throw Error("--chat-template '" + name_or_file +
                "' is neither a template name (chatml, llama3, llama2, gemma, phi3) nor a "
                "readable file");
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto parsed = ParseChatTemplate(text.str());
  if (!parsed) {
    throw Error("the chat template in '" + name_or_file +
                "' is not one qevict can render (Jinja is not interpreted: ChatML, Llama-3.0, "
                "Llama-2, Gemma and Phi-3 templates are recognized by their markers); give a "
                "name instead: chatml, llama3, llama2, gemma or phi3");
  }
  chat = parsed;
  chat_template_source = text.str();
}

std::vector<int32_t> LoadedModel::EncodeChat(const std::vector<ChatMessage>& messages,
                                             bool add_generation_prompt) const {
  if (!chat) {
    throw Error(chat_template_source.empty()
                    ? "the model has no chat template; use a raw prompt (without --chat)"
                    : "the model's chat template is not one qevict knows (ChatML, Llama-3, "
                      "Llama-2, Gemma, Phi-3); use a raw prompt (without --chat), or name the "
                      "family with --chat-template");
  }
  const std::string text = RenderChat(*chat, messages, add_generation_prompt);
  // Templates write BOS themselves where the family wants it.
  return tokenizer->Encode(text, /*add_bos=*/false, /*parse_special=*/true);
}

std::vector<int32_t> LoadedModel::EncodeRaw(const std::string& text) const {
  return tokenizer->Encode(text, tokenizer->add_bos(), /*parse_special=*/true);
}

}  // namespace qevict
