#include "tokenizer/spm_tokenizer.h"

#include <cstdio>
#include <queue>
#include <utility>

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace qevict {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 '▁'

Vocab CheckHasScores(Vocab vocab) {
  if (vocab.scores.empty()) {
    throw Error("tokenizer: tokenizer.ggml.scores is missing (required by the llama "
                "SentencePiece tokenizer)");
  }
  return vocab;
}

// The byte of a "<0xNN>" token, or -1.
int ParseByteToken(std::string_view text) {
  if (text.size() != 6) return -1;
  const std::string copy(text);  // sscanf needs a terminated string
  unsigned value = 0;
  char tail = 0;
  if (std::sscanf(copy.c_str(), "<0x%2X%c", &value, &tail) != 2 || tail != '>') return -1;
  return static_cast<int>(value);
}

// A symbol is the byte range [begin, begin + length) of the normalized text.
struct Symbol {
  size_t begin;
  size_t length;  // 0 once merged into its left neighbour
  int prev;
  int next;
};

struct MergeCandidate {
  float score;
  int left;
  size_t length;  // combined length; stale if either symbol changed since
  TokenId merged;
  bool operator<(const MergeCandidate& o) const {  // max-heap: highest score, then leftmost
    return score != o.score ? score < o.score : left > o.left;
  }
};

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(Vocab vocab)
    : VocabTokenizer(CheckHasScores(std::move(vocab)), /*default_add_bos=*/true),
      add_space_prefix_(this->vocab().add_space_prefix.value_or(true)),
      pieces_(this->vocab().tokens, [this](TokenId id) {
        const TokenType type = this->vocab().type(id);
        return type == TokenType::kNormal || type == TokenType::kUserDefined ||
               type == TokenType::kUndefined;
      }) {
  byte_tokens_.fill(-1);
  for (TokenId id = 0; id < vocab_size(); ++id) {
    const TokenType type = this->vocab().type(id);
    const std::string_view text = this->vocab().tokens[id];
    if (type == TokenType::kByte) {
      const int b = ParseByteToken(text);
      if (b >= 0 && byte_tokens_[b] < 0) byte_tokens_[b] = id;
    }
  }
}

void SentencePieceTokenizer::EncodeText(std::string_view text, bool starts_segment,
                                        std::vector<TokenId>* out) const {
  std::string normalized;
  normalized.reserve(text.size() + 8);
  if (add_space_prefix_ && starts_segment) normalized += kSpaceMarker;
  for (char c : text) {
    if (c == ' ') {
      normalized += kSpaceMarker;
    } else {
      normalized.push_back(c);
    }
  }

  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < normalized.size();) {
    const size_t length = unicode::DecodeUtf8(normalized, pos).length;
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, length, index - 1, -1});
    if (index > 0) symbols[index - 1].next = index;
    pos += length;
  }

  std::priority_queue<MergeCandidate> queue;
  const auto consider = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    const Symbol& a = symbols[left];
    const size_t length = a.length + symbols[a.next].length;
    const TokenId piece = pieces_.Find(std::string_view(normalized).substr(a.begin, length));
    if (piece < 0) return;
    queue.push({vocab().score(piece), left, length, piece});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i);

  while (!queue.empty()) {
    const MergeCandidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    if (left.length == 0 || left.next < 0 || left.length + symbols[left.next].length != c.length) {
      continue;
    }
    Symbol& right = symbols[left.next];
    left.length = c.length;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    right.length = 0;
    consider(left.prev);
    consider(c.left);
  }

  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    EmitSymbol(std::string_view(normalized).substr(symbols[i].begin, symbols[i].length), out);
  }
}

void SentencePieceTokenizer::EmitSymbol(std::string_view symbol, std::vector<TokenId>* out) const {
  if (const TokenId piece = pieces_.Find(symbol); piece >= 0) {
    out->push_back(piece);
    return;
  }
  bool all_bytes = true;
  for (unsigned char b : symbol) all_bytes = all_bytes && byte_tokens_[b] >= 0;
  if (all_bytes) {
    for (unsigned char b : symbol) out->push_back(byte_tokens_[b]);
  } else if (vocab().unknown >= 0) {
    out->push_back(vocab().unknown);
  }
}

std::string SentencePieceTokenizer::TextPiece(TokenId id) const {
  const std::string_view text = vocab().tokens[id];
  if (vocab().type(id) == TokenType::kByte) {
    const int b = ParseByteToken(text);
    if (b >= 0) return std::string(1, static_cast<char>(b));
  }
  std::string piece;
  piece.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (std::string_view(text).substr(pos).starts_with(kSpaceMarker)) {
      piece.push_back(' ');
      pos += kSpaceMarker.size();
    } else {
      piece.push_back(text[pos++]);
    }
  }
  return piece;
}

}  // namespace qevict
