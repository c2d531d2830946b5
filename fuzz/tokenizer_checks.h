// Invariants of every tokenizer, checked by the fuzz targets that build or use one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace qevict::fuzz {

// Encode never fails on text (any bytes, valid UTF-8 or not) and returns ids of the vocabulary.
inline std::vector<TokenId> EncodeChecked(const Tokenizer& tokenizer, std::string_view text,
                                          bool add_bos, bool parse_special) {
  std::vector<TokenId> ids;
  try {
    ids = tokenizer.Encode(text, add_bos, parse_special);
  } catch (const Error& e) {
    throw InvariantViolation(std::string("Encode threw: ") + e.what());
  }
  for (const TokenId id : ids) {
    Require(id >= 0 && id < tokenizer.vocab_size(), "Encode returned id " + std::to_string(id) +
                                                        " outside a vocabulary of " +
                                                        std::to_string(tokenizer.vocab_size()));
  }
  return ids;
}

// Decoding ids of the vocabulary never fails.
inline std::string DecodeChecked(const Tokenizer& tokenizer, const std::vector<TokenId>& ids,
                                 bool render_special) {
  try {
    return tokenizer.Decode(ids, render_special);
  } catch (const Error& e) {
    throw InvariantViolation(std::string("Decode of in-vocabulary ids threw: ") + e.what());
  }
}

}  // namespace qevict::fuzz
