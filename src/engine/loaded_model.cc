#include "engine/loaded_model.h"

#include "util/error.h"

namespace qevict {

LoadedModel LoadedModel::Load(const std::string& path) {
  LoadedModel m;
  m.model = TransformerModel::Load(path);
  m.tokenizer = Tokenizer::FromGguf(m.model->file());
  if (m.tokenizer->vocab_size() != m.model->config().n_vocab) {
    throw Error("tokenizer has " + std::to_string(m.tokenizer->vocab_size()) +
                " tokens but token_embd.weight has " +
                std::to_string(m.model->config().n_vocab) + " rows");
  }
  if (auto tmpl = m.model->file().FindString("tokenizer.chat_template")) {
    m.chat_template_source = std::string(*tmpl);
    m.chat = ParseChatTemplate(*tmpl);
  }
  return m;
}

std::vector<int32_t> LoadedModel::EncodeChat(const std::vector<ChatMessage>& messages,
                                             bool add_generation_prompt) const {
  if (!chat) {
    throw Error(chat_template_source.empty()
                    ? "the model has no chat template; use a raw prompt (without --chat)"
                    : "the model's chat template is not one qevict knows (ChatML, Llama-3, "
                      "Llama-2); use a raw prompt (without --chat)");
  }
  const std::string text = RenderChat(*chat, messages, add_generation_prompt);
  // Templates write BOS themselves where the family wants it.
  return tokenizer->Encode(text, /*add_bos=*/false, /*parse_special=*/true);
}

std::vector<int32_t> LoadedModel::EncodeRaw(const std::string& text) const {
  return tokenizer->Encode(text, tokenizer->add_bos(), /*parse_special=*/true);
}

}  // namespace qevict
