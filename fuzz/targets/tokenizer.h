// Fuzz target "tokenizer": arbitrary text to encode and arbitrary ids to decode, with tokenizers
// built once: the model's byte-level BPE vocabulary (models/SmolLM2-135M-Instruct.Q4_1.gguf, or
// tests/fixtures/gguf/tiny_llama_valid.gguf when the model is absent) under each pre-tokenizer,
// and a small SentencePiece vocabulary with and without the space prefix.
//
// Input: one flags byte, then the text (encode) or the ids (decode).
//   bits 0-2  tokenizer (modulo the number built)     bit 5  render_special
//   bit 3     parse_special                           bit 6  decode ids instead of encoding text
//   bit 4     add_bos                                 bit 7  ids are 4-byte int32 (else uint16)
//
// Links: qevict_tokenizer
#pragma once

#include "source_dir.h"
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/spm_vocab.h"
#include "fuzz/tokenizer_checks.h"
#include "gguf/gguf.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace qevict::fuzz {
namespace tokenizer_target {

inline std::string ModelVocabPath() {
  const std::string root = QEVICT_SOURCE_DIR;
  const std::string model = root + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (std::filesystem::exists(model)) return model;
  return root + "/tests/fixtures/gguf/tiny_llama_valid.gguf";
}

struct FuzzedTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;
  // Whether the byte alone encodes to a token that decodes back to it (byte-level BPE
  // vocabularies may lack bytes that are rare or invalid in UTF-8; those become the unknown
  // token, if any, and do not round-trip).
  std::array<bool, 256> byte_round_trips{};
};

inline FuzzedTokenizer MakeFuzzedTokenizer(Vocab vocab) {
  FuzzedTokenizer out;
  out.tokenizer = Tokenizer::FromVocab(std::move(vocab));
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    out.byte_round_trips[b] =
        out.tokenizer->Decode(out.tokenizer->Encode(byte, false, false)) == byte;
  }
  return out;
}

inline const std::vector<FuzzedTokenizer>& Tokenizers() {
  static const std::vector<FuzzedTokenizer> tokenizers = [] {
    std::vector<FuzzedTokenizer> out;
    const Vocab model_vocab = VocabFromGguf(*gguf::File::Open(ModelVocabPath()));
    for (const char* pre : {"", "llama-bpe", "qwen2", "gpt2"}) {
      Vocab vocab = model_vocab;
      if (*pre != '\0') vocab.pre = pre;  // "": the model's own
      out.push_back(MakeFuzzedTokenizer(std::move(vocab)));
    }
    out.push_back(MakeFuzzedTokenizer(SmallSpmVocab(/*add_space_prefix=*/true)));
    out.push_back(MakeFuzzedTokenizer(SmallSpmVocab(/*add_space_prefix=*/false)));
    return out;
  }();
  return tokenizers;
}

// Valid UTF-8 made only of bytes that round-trip on their own.
inline bool ShouldRoundTrip(const FuzzedTokenizer& fuzzed, std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const unicode::DecodedChar c = unicode::DecodeUtf8(text, pos);
    if (c.cp == 0xFFFD && c.length == 1) return false;
    for (size_t i = pos; i < pos + c.length; ++i) {
      if (!fuzzed.byte_round_trips[static_cast<unsigned char>(text[i])]) return false;
    }
    pos += c.length;
  }
  return true;
}

inline void FuzzEncode(const FuzzedTokenizer& fuzzed, std::string_view text, bool add_bos,
                       bool parse_special, bool render_special) {
  const Tokenizer& tokenizer = *fuzzed.tokenizer;
  const std::vector<TokenId> ids = EncodeChecked(tokenizer, text, add_bos, parse_special);
  const std::string decoded = DecodeChecked(tokenizer, ids, render_special);
  // Byte-level BPE loses nothing of valid UTF-8 text whose bytes all have tokens: decoding gives
  // the text back, as long as special tokens parsed from it are rendered and no BOS was added.
  const bool bos_added = add_bos && tokenizer.add_bos() && tokenizer.bos() >= 0;
  if (tokenizer.model_name() == "gpt2" && (!parse_special || render_special) && !bos_added &&
      ShouldRoundTrip(fuzzed, text)) {
    Require(decoded == text, "byte-level BPE decode(encode(text)) != text");
  }
}

inline void FuzzDecode(const Tokenizer& tokenizer, FuzzInput& in, bool wide, bool render_special) {
  std::vector<TokenId> ids;
  bool all_in_vocab = true;
  while (!in.empty()) {
    const TokenId id = wide ? static_cast<TokenId>(static_cast<uint32_t>(in.Uint(4)))
                            : static_cast<TokenId>(in.Uint(2));
    ids.push_back(id);
    tokenizer.IsEndOfGeneration(id);
    const bool in_vocab = id >= 0 && id < tokenizer.vocab_size();
    all_in_vocab = all_in_vocab && in_vocab;
    std::string piece;
    try {
      piece = tokenizer.TokenToPiece(id, render_special);
    } catch (const Error& e) {
      Require(!in_vocab,
              std::string("TokenToPiece threw for an id of the vocabulary: ") + e.what());
      continue;
    }
    Require(in_vocab || piece.empty(),
            "TokenToPiece returned text for an id outside the "
            "vocabulary: " +
                std::to_string(id));
  }
  if (all_in_vocab) {
    DecodeChecked(tokenizer, ids, render_special);
    return;
  }
  try {
    tokenizer.Decode(ids, render_special);
  } catch (const Error&) {
  }
}

}  // namespace tokenizer_target

inline int FuzzTokenizerBytes(const uint8_t* data, size_t size) {
  const auto& tokenizers = tokenizer_target::Tokenizers();
  FuzzInput in(data, size);
  const uint8_t flags = in.Byte();
  const tokenizer_target::FuzzedTokenizer& fuzzed = tokenizers[(flags & 7) % tokenizers.size()];
  const bool parse_special = flags & 8;
  const bool add_bos = flags & 16;
  const bool render_special = flags & 32;
  if (flags & 64) {
    tokenizer_target::FuzzDecode(*fuzzed.tokenizer, in, /*wide=*/flags & 128, render_special);
  } else {
    tokenizer_target::FuzzEncode(fuzzed, in.Rest(), add_bos, parse_special, render_special);
  }
  return 0;
}

inline const bool kTokenizerTargetRegistered = RegisterFuzzTarget("tokenizer", &FuzzTokenizerBytes);

}  // namespace qevict::fuzz
