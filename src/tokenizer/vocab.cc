#include "tokenizer/vocab.h"

#include <string_view>
#include <unordered_set>

#include "util/error.h"

namespace qevict {
namespace {

void CheckSpecialId(const Vocab& vocab, TokenId id, const char* key) {
  if (id == -1) return;
  if (id < 0 || id >= vocab.size()) {
    throw Error("tokenizer: " + std::string(key) + " = " + std::to_string(id) +
                " is out of range (the vocabulary has " + std::to_string(vocab.size()) +
                " tokens)");
  }
}

void CheckMerges(const Vocab& vocab) {
  std::unordered_set<std::string_view> tokens(vocab.tokens.begin(), vocab.tokens.end());
  std::string left, right;
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& merge = vocab.merges[rank];
    const std::string where = "tokenizer.ggml.merges[" + std::to_string(rank) + "] \"" + merge + "\"";
    if (!SplitMerge(merge, &left, &right)) {
      throw Error("tokenizer: " + where + " is not of the form \"left right\"");
    }
    for (const std::string* side : {&left, &right}) {
      if (!tokens.contains(*side)) {
        throw Error("tokenizer: " + where + " names \"" + *side + "\", which is not a token");
      }
    }
    if (!tokens.contains(left + right)) {
      throw Error("tokenizer: " + where + " merges into \"" + left + right +
                  "\", which is not a token");
    }
  }
}

}  // namespace

bool SplitMerge(const std::string& merge, std::string* left, std::string* right) {
  const size_t space = merge.find(' ', 1);
  if (space == std::string::npos || space + 1 >= merge.size()) return false;
  left->assign(merge, 0, space);
  right->assign(merge, space + 1);
  return true;
}

void ValidateVocab(const Vocab& vocab) {
  if (vocab.tokens.empty()) {
    throw Error("tokenizer: tokenizer.ggml.tokens is missing or empty");
  }
  const std::string n_tokens = std::to_string(vocab.tokens.size());
  if (!vocab.scores.empty() && vocab.scores.size() != vocab.tokens.size()) {
    throw Error("tokenizer: tokenizer.ggml.scores has " + std::to_string(vocab.scores.size()) +
                " entries but tokenizer.ggml.tokens has " + n_tokens);
  }
  if (!vocab.token_types.empty() && vocab.token_types.size() != vocab.tokens.size()) {
    throw Error("tokenizer: tokenizer.ggml.token_type has " +
                std::to_string(vocab.token_types.size()) +
                " entries but tokenizer.ggml.tokens has " + n_tokens);
  }
  for (size_t id = 0; id < vocab.token_types.size(); ++id) {
    const auto type = static_cast<int32_t>(vocab.token_types[id]);
    if (type < 0 || type > static_cast<int32_t>(TokenType::kByte)) {
      throw Error("tokenizer: tokenizer.ggml.token_type[" + std::to_string(id) + "] = " +
                  std::to_string(type) + " is not a known token type (0..6)");
    }
  }
  CheckSpecialId(vocab, vocab.bos, "tokenizer.ggml.bos_token_id");
  CheckSpecialId(vocab, vocab.eos, "tokenizer.ggml.eos_token_id");
  CheckSpecialId(vocab, vocab.eot, "tokenizer.ggml.eot_token_id");
  CheckSpecialId(vocab, vocab.eom, "tokenizer.ggml.eom_token_id");
  CheckSpecialId(vocab, vocab.unknown, "tokenizer.ggml.unknown_token_id");
  CheckSpecialId(vocab, vocab.padding, "tokenizer.ggml.padding_token_id");
  if (vocab.model == "gpt2") {
    if (vocab.merges.empty()) {
      throw Error("tokenizer: tokenizer.ggml.merges is missing or empty (required by the gpt2 "
                  "byte-level BPE tokenizer)");
    }
    CheckMerges(vocab);
  }
}

}  // namespace qevict
