// Fuzz target "gguf": the input is a GGUF file. It goes through what loading a model does with
// a file: the reader (header, metadata, tensor table, data layout), the typed getters, the model
// validation (ModelConfig::FromGguf, ModelWeights::FromGguf), the tokenizer built from the
// vocabulary, the vocabulary-size check and the chat template. When a tokenizer comes out, a
// short text and a rendered chat are encoded and decoded with it.
//
// Links: qevict_model qevict_tokenizer
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "fuzz/tokenizer_checks.h"
#include "gguf/gguf.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace qevict::fuzz {
namespace gguf_target {

// Every key through every typed getter (each either returns or throws Error), and every tensor's
// data inside the input.
inline void ExerciseFile(const gguf::File& file, const uint8_t* data, size_t size) {
  for (const gguf::KeyValue& kv : file.metadata()) {
    Require(file.Find(kv.key) == &kv.value, "Find does not return the parsed entry");
    const auto swallow = [](auto&& get) {
      try {
        get();
      } catch (const Error&) {
      }
    };
    swallow([&] { file.FindInt(kv.key); });
    swallow([&] { file.FindFloat(kv.key); });
    swallow([&] { file.FindBool(kv.key); });
    swallow([&] { file.FindString(kv.key); });
    swallow([&] { file.GetStringArray(kv.key); });
    swallow([&] { file.GetFloatArray(kv.key); });
    swallow([&] { file.GetInt32Array(kv.key); });
  }
  for (const gguf::TensorInfo& t : file.tensors()) {
    Require(file.FindTensor(t.name) == &t, "FindTensor does not return the parsed tensor");
    Require(t.data >= data && t.n_bytes > 0 && t.n_bytes <= size &&
                static_cast<size_t>(t.data - data) <= size - t.n_bytes,
            "tensor data outside the file");
    // Touch both ends so AddressSanitizer sees any error in the bounds.
    volatile uint8_t first = t.data[0];
    volatile uint8_t last = t.data[t.n_bytes - 1];
    (void)first;
    (void)last;
  }
}

inline void ExerciseTokenizer(const Tokenizer& tokenizer, const std::optional<ChatTemplate>& chat) {
  static constexpr std::string_view kText =
      "Hello world! It's 2024: x=3.14 <|im_start|>user\n\tca va? \xc3\xa7\xe4\xb8\xad\xe6\x96\x87 "
      "\xff\xfe  end";
  for (const bool parse_special : {false, true}) {
    const std::vector<TokenId> ids = EncodeChecked(tokenizer, kText, true, parse_special);
    DecodeChecked(tokenizer, ids, parse_special);
  }
  if (!chat) return;
  const std::vector<ChatMessage> messages = {
      {"system", "Be brief."}, {"user", " Hi <|im_end|> "}, {"assistant", "Hello."}, {"user", "?"}};
  try {
    const std::string prompt = RenderChat(*chat, messages, /*add_generation_prompt=*/true);
    const std::vector<TokenId> ids = EncodeChecked(tokenizer, prompt, false, true);
    DecodeChecked(tokenizer, ids, true);
  } catch (const Error&) {
  }
}

}  // namespace gguf_target

// The messages of the qevict::Errors raised while loading the file as a model, in the order
// LoadedModel::Load meets them, so the first one is what loading would report. A stage is skipped
// only when it needs the result of a failed one (fuzzing still reaches the tokenizer of a file
// whose hyperparameters are broken).
inline std::vector<std::string> LoadModelParts(const gguf::File& file) {
  std::vector<std::string> errors;
  std::optional<ModelConfig> config;
  try {
    config = ModelConfig::FromGguf(file);
    ModelWeights::FromGguf(file, *config);
  } catch (const Error& e) {
    errors.push_back(e.what());
    config.reset();
  }
  std::unique_ptr<Tokenizer> tokenizer;
  try {
    tokenizer = Tokenizer::FromGguf(file);
  } catch (const Error& e) {
    errors.push_back(e.what());
  }
  if (config && tokenizer && tokenizer->vocab_size() != config->n_vocab) {
    // The check of LoadedModel::Load, which needs a path; keep the two messages alike.
    errors.push_back("tokenizer has " + std::to_string(tokenizer->vocab_size()) +
                     " tokens but token_embd.weight has " + std::to_string(config->n_vocab) +
                     " rows");
  }
  std::optional<ChatTemplate> chat;
  try {
    if (const auto source = file.FindString("tokenizer.chat_template")) {
      chat = ParseChatTemplate(*source);
    }
  } catch (const Error& e) {
    errors.push_back(e.what());
  }
  if (tokenizer) gguf_target::ExerciseTokenizer(*tokenizer, chat);
  return errors;
}

inline int FuzzGgufBytes(const uint8_t* data, size_t size) {
  std::unique_ptr<gguf::File> file;
  try {
    file = gguf::File::Parse(std::span<const uint8_t>(data, size));
  } catch (const Error&) {
    return 0;
  }
  gguf_target::ExerciseFile(*file, data, size);
  LoadModelParts(*file);
  return 0;
}

inline const bool kGgufTargetRegistered = RegisterFuzzTarget("gguf", &FuzzGgufBytes);

}  // namespace qevict::fuzz
