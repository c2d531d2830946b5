// A model ready to serve: weights, tokenizer and chat template, all from one GGUF file.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/transformer_model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace qevict {

struct LoadedModel {
  std::unique_ptr<TransformerModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat;   // nullopt: no template or one we do not know
  std::string chat_template_source;   // the Jinja text from the file ("" when absent)

  // Throws qevict::Error with a message naming the file and the problem.
  static LoadedModel Load(const std::string& path);

  // --chat-template: a family name (chatml, llama3, llama2, gemma, phi3) or a Jinja file whose
  // family qevict recognizes, instead of the GGUF's template. Throws when it is neither.
  void OverrideChatTemplate(const std::string& name_or_file);

  // The prompt tokens for a conversation; throws when the model has no known chat template.
  std::vector<int32_t> EncodeChat(const std::vector<ChatMessage>& messages,
                                  bool add_generation_prompt) const;
  // The prompt tokens for raw text (BOS added when the model wants it).
  std::vector<int32_t> EncodeRaw(const std::string& text) const;
};

}  // namespace qevict
