#include "tokenizer/gguf_vocab.h"

#include <cstdint>
#include <optional>
#include <string>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace qevict {
namespace {

// Longest token, score, token type and merge arrays accepted (ModelConfig's vocabulary limit).
// Each entry costs far more memory than its bytes in the file (an empty token string is 8 bytes
// there, well over 100 once copied and indexed), so a crafted count is refused before any of it
// is read.
constexpr uint64_t kMaxVocabEntries = uint64_t{1} << 22;

void CheckArrayLength(const gguf::File& file, std::string_view key) {
  const gguf::Value* value = file.Find(key);
  if (value != nullptr && value->type == gguf::ValueType::kArray &&
      value->array_size > kMaxVocabEntries) {
    throw Error("tokenizer: " + std::string(key) + " has " + std::to_string(value->array_size) +
                " entries, over the limit of " + std::to_string(kMaxVocabEntries));
  }
}

std::vector<std::string> ToStrings(const std::vector<std::string_view>& views) {
  return std::vector<std::string>(views.begin(), views.end());
}

// A special token id, -1 when absent. Ids past the vocabulary are left for ValidateVocab to
// report; values no token id can have are reported here.
TokenId FindTokenId(const gguf::File& file, std::string_view key) {
  const std::optional<int64_t> value = file.FindInt(key);
  if (!value) return -1;
  if (*value == -1 || *value == 0xFFFFFFFF) return -1;  // "none" as written by some converters
  if (*value < 0 || *value > INT32_MAX) {
    throw Error("tokenizer: " + std::string(key) + " = " + std::to_string(*value) +
                " is out of range for a token id");
  }
  return static_cast<TokenId>(*value);
}

}  // namespace

Vocab VocabFromGguf(const gguf::File& file) {
  Vocab vocab;
  if (!file.Has("tokenizer.ggml.model")) {
    throw Error("tokenizer: the GGUF file has no tokenizer.ggml.model (no tokenizer stored)");
  }
  vocab.model = std::string(file.GetString("tokenizer.ggml.model"));
  vocab.pre = std::string(file.FindString("tokenizer.ggml.pre").value_or(""));
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                          "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}) {
    CheckArrayLength(file, key);
  }
  if (file.Has("tokenizer.ggml.tokens")) {
    vocab.tokens = TokenTexts::From(file.GetStringArray("tokenizer.ggml.tokens"));
  }
  if (file.Has("tokenizer.ggml.scores")) {
    vocab.scores = file.GetFloatArray("tokenizer.ggml.scores");
  }
  if (file.Has("tokenizer.ggml.token_type")) {
    for (int32_t type : file.GetInt32Array("tokenizer.ggml.token_type")) {
      vocab.token_types.push_back(static_cast<TokenType>(type));
    }
  }
  if (file.Has("tokenizer.ggml.merges")) {
    vocab.merges = ToStrings(file.GetStringArray("tokenizer.ggml.merges"));
  }
  vocab.bos = FindTokenId(file, "tokenizer.ggml.bos_token_id");
  vocab.eos = FindTokenId(file, "tokenizer.ggml.eos_token_id");
  vocab.eot = FindTokenId(file, "tokenizer.ggml.eot_token_id");
  vocab.eom = FindTokenId(file, "tokenizer.ggml.eom_token_id");
  vocab.unknown = FindTokenId(file, "tokenizer.ggml.unknown_token_id");
  vocab.padding = FindTokenId(file, "tokenizer.ggml.padding_token_id");
  vocab.add_bos = file.FindBool("tokenizer.ggml.add_bos_token");
  vocab.add_space_prefix = file.FindBool("tokenizer.ggml.add_space_prefix");
  return vocab;
}

std::unique_ptr<Tokenizer> Tokenizer::FromGguf(const gguf::File& file) {
  return FromVocab(VocabFromGguf(file));
}

}  // namespace qevict
