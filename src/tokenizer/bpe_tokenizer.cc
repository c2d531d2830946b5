#include "tokenizer/bpe_tokenizer.h"

#include <queue>
#include <utility>

#include "tokenizer/byte_level.h"
#include "util/error.h"

namespace qevict {
namespace {

PreTokenizer PreTokenizerOrThrow(const std::string& name) {
  const std::string effective = name.empty() ? "default" : name;
  if (std::optional<PreTokenizer> pre = PreTokenizerFromName(effective)) return *pre;
  throw Error("tokenizer: tokenizer.ggml.pre = \"" + effective +
              "\" is not supported (supported: default, gpt2, llama-bpe, qwen2, smollm)");
}

// A symbol of the word being merged, in a doubly linked list over a vector.
struct Symbol {
  TokenId id;  // -1: a byte with no token (never merges); kDead once merged into its left
  int prev;
  int next;
};
constexpr TokenId kDead = -2;

// A possible merge of symbols[left] with its right neighbour, valid while both still hold the
// ids it was made for (a symbol's text only grows, so equal ids mean unchanged symbols).
struct MergeCandidate {
  int32_t rank;
  int left;
  TokenId left_id;
  TokenId right_id;
  TokenId merged;
  bool operator>(const MergeCandidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

}  // namespace

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(Vocab vocab)
    : VocabTokenizer(std::move(vocab), /*default_add_bos=*/false),
      pre_(PreTokenizerOrThrow(this->vocab().pre)),
      ignore_merges_(this->vocab().ignore_merges.value_or(pre_ == PreTokenizer::kLlama3)) {
  for (int b = 0; b < 256; ++b) {
    byte_tokens_[b] = token_ids().Find(byte_level::Encode(std::string(1, static_cast<char>(b))));
  }
  const std::vector<std::string>& merges = this->vocab().merges;
  merges_.reserve(merges.size());
  std::string left, right;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    SplitMerge(merges[rank], &left, &right);  // validated: both sides and the result exist
    const TokenId left_id = token_ids().Find(left);
    const TokenId right_id = token_ids().Find(right);
    const TokenId merged = token_ids().Find(left + right);
    // A repeated rule keeps its first (lowest) rank.
    merges_.try_emplace(PairKey(left_id, right_id), Merge{static_cast<int32_t>(rank), merged});
  }
}

void ByteLevelBpeTokenizer::EncodeWord(std::string_view word, std::vector<TokenId>* out) const {
  if (ignore_merges_) {
    if (const TokenId id = token_ids().Find(byte_level::Encode(word)); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    symbols[i] = {byte_tokens_[static_cast<unsigned char>(word[i])], static_cast<int>(i) - 1,
                  i + 1 < word.size() ? static_cast<int>(i) + 1 : -1};
  }
  std::priority_queue<MergeCandidate, std::vector<MergeCandidate>, std::greater<>> queue;
  const auto consider = [&](int left) {
    if (left < 0) return;
    const int right = symbols[left].next;
    if (right < 0 || symbols[left].id < 0 || symbols[right].id < 0) return;
    const auto it = merges_.find(PairKey(symbols[left].id, symbols[right].id));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, symbols[left].id, symbols[right].id, it->second.merged});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i);

  while (!queue.empty()) {
    const MergeCandidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    if (left.id != c.left_id || left.next < 0 || symbols[left.next].id != c.right_id) continue;
    Symbol& right = symbols[left.next];
    left.id = c.merged;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    right.id = kDead;
    consider(left.prev);
    consider(c.left);
  }

  for (int i = 0; i >= 0 && i < static_cast<int>(symbols.size()); i = symbols[i].next) {
    if (symbols[i].id >= 0) {
      out->push_back(symbols[i].id);
    } else if (vocab().unknown >= 0) {
      out->push_back(vocab().unknown);
    }
  }
}

void ByteLevelBpeTokenizer::EncodeText(std::string_view text, bool /*starts_segment*/,
                                       std::vector<TokenId>* out) const {
  std::vector<std::string_view> words;
  SplitWords(pre_, text, &words);
  // Words repeat a lot in real text: remember each distinct word's ids (offset, count in out).
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> seen;
  for (std::string_view word : words) {
    const auto [it, inserted] = seen.try_emplace(word);
    if (!inserted) {
      const auto [offset, count] = it->second;
      for (size_t k = 0; k < count; ++k) {
        const TokenId id = (*out)[offset + k];
        out->push_back(id);
      }
      continue;
    }
    const size_t offset = out->size();
    EncodeWord(word, out);
    it->second = {offset, out->size() - offset};
  }
}

std::string ByteLevelBpeTokenizer::TextPiece(TokenId id) const {
  return byte_level::Decode(vocab().tokens[id]);
}

}  // namespace qevict
