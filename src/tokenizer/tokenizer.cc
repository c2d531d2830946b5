#include "tokenizer/tokenizer.h"

#include <utility>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"
#include "util/error.h"

namespace qevict {

std::unique_ptr<Tokenizer> Tokenizer::FromVocab(Vocab vocab) {
  if (vocab.model != "gpt2" && vocab.model != "llama") {
    throw Error("tokenizer: tokenizer.ggml.model = \"" + vocab.model +
                "\" is not supported (supported: gpt2, llama)");
  }
  ValidateVocab(vocab);
  if (vocab.model == "gpt2") return std::make_unique<ByteLevelBpeTokenizer>(std::move(vocab));
  return std::make_unique<SentencePieceTokenizer>(std::move(vocab));
}

std::string Tokenizer::Decode(const std::vector<TokenId>& ids, bool render_special) const {
  std::string text;
  bool first_piece = true;
  for (TokenId id : ids) {
    std::string piece = TokenToPiece(id, render_special);
    if (piece.empty()) continue;
    if (first_piece && DecodeStripsLeadingSpace() && piece[0] == ' ') piece.erase(0, 1);
    first_piece = false;
    text += piece;
  }
  return text;
}

}  // namespace qevict
