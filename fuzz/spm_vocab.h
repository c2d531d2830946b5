// A small SentencePiece ("llama") vocabulary for the tokenizer fuzz target, which otherwise only
// has the byte-level BPE vocabulary of the model: control and unknown tokens, the 256 byte
// fallback tokens, pieces with the U+2581 space marker, multi-byte UTF-8 pieces, a user-defined
// token and a normal token that only looks like a byte token.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "tokenizer/vocab.h"

namespace qevict::fuzz {

inline Vocab SmallSpmVocab(bool add_space_prefix) {
  Vocab vocab;
  vocab.model = "llama";
  const auto add = [&](const std::string& text, TokenType type, float score) {
    vocab.tokens.push_back(text);
    vocab.token_types.push_back(type);
    vocab.scores.push_back(score);
  };
  add("<unk>", TokenType::kUnknown, 0.0f);
  add("<s>", TokenType::kControl, 0.0f);
  add("</s>", TokenType::kControl, 0.0f);
  for (int b = 0; b < 256; ++b) {
    char text[8];
    std::snprintf(text, sizeof text, "<0x%02X>", b);
    add(text, TokenType::kByte, 0.0f);
  }
  // Space-separated; '_' stands for the space marker U+2581.
  const std::string_view kPieces =
      "_ _t h e l o w r d t a n he _the _a in er _w ll llo _he _hello _wor ld _world \xc3\xa9 "
      "_\xc3\xa9 \xe4\xb8\xad \xe6\x96\x87 \xe4\xb8\xad\xe6\x96\x87 __ ____ <0xZZ>";
  float score = -1.0f;
  std::string text;
  for (size_t i = 0; i <= kPieces.size(); ++i) {
    if (i < kPieces.size() && kPieces[i] != ' ') {
      text += kPieces[i] == '_' ? std::string_view("\xe2\x96\x81") : kPieces.substr(i, 1);
      continue;
    }
    add(text, TokenType::kNormal, score);
    score -= 0.25f;
    text.clear();
  }
  add("<|user|>", TokenType::kUserDefined, 0.0f);
  add("<unused0>", TokenType::kUnused, 0.0f);
  vocab.unknown = 0;
  vocab.bos = 1;
  vocab.eos = 2;
  vocab.add_space_prefix = add_space_prefix;
  return vocab;
}

}  // namespace qevict::fuzz
