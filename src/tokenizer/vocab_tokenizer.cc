#include "tokenizer/vocab_tokenizer.h"

#include <utility>

#include "util/error.h"

namespace qevict {
namespace {

// Texts of tokens that end a turn or the text in the chat models we know.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "</s>",
    "<|endoftext|>", "<|end|>", "<end_of_turn>",
};

}  // namespace

VocabTokenizer::VocabTokenizer(Vocab vocab, bool default_add_bos)
    : vocab_(std::move(vocab)),
      add_bos_(vocab_.add_bos.value_or(default_add_bos)),
      token_ids_(vocab_.tokens),
      special_tokens_(vocab_),
      user_defined_tokens_(vocab_, /*user_defined_only=*/true) {

  for (TokenId id : {vocab_.eos, vocab_.eot, vocab_.eom}) {
    if (id >= 0) end_of_generation_.insert(id);
  }
  for (std::string_view text : kEndOfGenerationTexts) {
    const TokenId id = token_ids_.Find(text);
    if (id < 0) continue;
    const TokenType type = vocab_.type(id);
    if (type == TokenType::kControl || type == TokenType::kUserDefined) {
      end_of_generation_.insert(id);
    }
  }
}

std::vector<TokenId> VocabTokenizer::Encode(std::string_view text, bool add_bos,
                                            bool parse_special) const {
  std::vector<TokenId> out;
  if (add_bos && add_bos_ && vocab_.bos >= 0) out.push_back(vocab_.bos);
  // Without parse_special, control tokens written in the text are plain text, but user-defined
  // tokens still stand for themselves (as llama.cpp's tokenizer partitions them).
  if (!parse_special && user_defined_tokens_.empty()) {
    if (!text.empty()) EncodeText(text, /*starts_segment=*/true, &out);
    return out;
  }
  std::vector<TextFragment> fragments;
  (parse_special ? special_tokens_ : user_defined_tokens_).Split(text, &fragments);
  bool starts_segment = true;
  for (const TextFragment& fragment : fragments) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      starts_segment = true;
    } else {
      EncodeText(fragment.text, starts_segment, &out);
      starts_segment = false;
    }
  }
  return out;
}

std::string VocabTokenizer::TokenToPiece(TokenId id, bool render_special) const {
  if (id < 0 || id >= vocab_.size()) {
    throw Error("tokenizer: token id " + std::to_string(id) + " is out of range (vocabulary of " +
                std::to_string(vocab_.size()) + " tokens)");
  }
  switch (vocab_.type(id)) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return render_special ? std::string(vocab_.tokens[id]) : std::string();
    case TokenType::kUserDefined:
      return std::string(vocab_.tokens[id]);
    default:
      return TextPiece(id);
  }
}

}  // namespace qevict
