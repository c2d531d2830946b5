// The tokenizer vocabulary as plain data, independent of where it came from (a GGUF file's
// tokenizer.ggml.* keys, or a test). Tokenizer::FromVocab validates it and builds the tokenizer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/token_texts.h"

namespace qevict {

using TokenId = int32_t;

// tokenizer.ggml.token_type values (as llama.cpp / gguf-py define them).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <|im_start|>, <s>, ...: rendered only on request
  kUserDefined = 4,  // added tokens that stand for their literal text
  kUnused = 5,
  kByte = 6,         // SentencePiece byte fallback pieces <0xNN>
};

struct Vocab {
  std::string model;  // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre;    // tokenizer.ggml.pre; empty means "default"
  TokenTexts tokens;                     // id -> text (byte-level mapped for "gpt2")
  std::vector<float> scores;             // empty, or one per token
  std::vector<TokenType> token_types;    // empty (all normal), or one per token
  std::vector<std::string> merges;       // "left right", rank = index; "gpt2" only

  TokenId bos = -1;  // -1: none
  TokenId eos = -1;
  TokenId eot = -1;  // end of turn (tokenizer.ggml.eot_token_id)
  TokenId eom = -1;  // end of message (tokenizer.ggml.eom_token_id)
  TokenId unknown = -1;
  TokenId padding = -1;

  std::optional<bool> add_bos;           // default: true for "llama", false for "gpt2"
  std::optional<bool> add_space_prefix;  // "llama" only; default true
  // Use a word's own token when the whole word is in the vocabulary instead of running the
  // merges (HF BPE ignore_merges; Llama 3). Default: true for the llama-bpe pre-tokenizer.
  std::optional<bool> ignore_merges;

  int size() const { return static_cast<int>(tokens.size()); }
  TokenType type(TokenId id) const {
    return token_types.empty() ? TokenType::kNormal : token_types[id];
  }
  float score(TokenId id) const { return scores.empty() ? 0.0f : scores[id]; }
};

// Throws qevict::Error naming the inconsistent field (with its GGUF key) when the vocabulary is
// unusable: no tokens, scores/token types of the wrong length, an unknown token type, a special
// id out of range, or (for "gpt2") a merge that does not name two tokens whose concatenation is
// a token. The model and pre-tokenizer names are checked by the tokenizer that uses them.
void ValidateVocab(const Vocab& vocab);

// Splits a merge rule "left right" at its separating space (the first space after the first
// character, so a left side may itself be a space). Returns false when there is none.
bool SplitMerge(const std::string& merge, std::string* left, std::string* right);

}  // namespace qevict
