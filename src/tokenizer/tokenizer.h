// Tokenizers built from GGUF metadata (tokenizer.ggml.*):
//  - byte-level BPE (tokenizer.ggml.model = "gpt2") with the pre-tokenizer named by
//    tokenizer.ggml.pre ("smollm", "llama-bpe", "qwen2", and "default"/gpt2);
//  - SentencePiece-style BPE (tokenizer.ggml.model = "llama") over scores, with byte fallback.
// Encodings must equal the model's Hugging Face tokenizer (tests/golden/tokenizer_*.json).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace qevict {

using TokenId = int32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Validates the vocabulary (sizes, merges naming known tokens, special ids in range) and
  // throws qevict::Error on anything inconsistent.
  static std::unique_ptr<Tokenizer> FromGguf(const gguf::File& file);
  // The same from a plain vocabulary (what FromGguf reads, or a test's). Throws qevict::Error
  // for an invalid vocabulary or an unknown model / pre-tokenizer name.
  static std::unique_ptr<Tokenizer> FromVocab(Vocab vocab);

  // Text to ids. With parse_special, control/user-defined tokens written literally in the text
  // (e.g. "<|im_start|>") map to their ids; otherwise they are tokenized as plain text.
  // add_bos prepends BOS when the model asks for it (tokenizer.ggml.add_bos_token).
  virtual std::vector<TokenId> Encode(std::string_view text, bool add_bos,
                                      bool parse_special) const = 0;

  // The bytes a token stands for (may be a partial UTF-8 sequence); control tokens render as
  // their text only when `render_special`.
  virtual std::string TokenToPiece(TokenId id, bool render_special = false) const = 0;
  std::string Decode(const std::vector<TokenId>& ids, bool render_special = false) const;

  virtual int vocab_size() const = 0;
  virtual TokenId bos() const = 0;  // -1 when none
  virtual TokenId eos() const = 0;  // -1 when none
  virtual bool add_bos() const = 0;
  virtual bool IsEndOfGeneration(TokenId id) const = 0;  // eos, eot, <|im_end|>, ...
  virtual std::string_view model_name() const = 0;       // "gpt2" or "llama"
  virtual std::string_view pre_name() const = 0;         // pre-tokenizer name

 protected:
  // SentencePiece models prefix text with a space when encoding; Decode drops it again from the
  // first piece it renders.
  virtual bool DecodeStripsLeadingSpace() const { return false; }
};

}  // namespace qevict
