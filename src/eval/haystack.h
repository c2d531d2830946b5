// Filler text for the generated evaluation tasks (eval/task_generators.h): the prose shipped in
// data/haystack/ (written for the project, CC0) and the classic repetitive passkey filler.
// A Haystack holds its text split into sentences with each sentence's token count, counted once
// with the evaluated model's TokenCounter, and hands out deterministic runs of sentences of a
// requested token length. Needles go between those sentences (eval/task_util.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "eval/task.h"

namespace qevict {

// One sentence (or a needle, or a task's instruction) of a generated context.
struct TextPiece {
  std::string text;
  int64_t tokens = 0;          // TokenCounter of `text` alone
  bool paragraph_end = false;  // followed by a blank line rather than a space
};

// The prose directory: $QEVICT_HAYSTACK_DIR when set and non-empty, else
// QEVICT_SOURCE_DIR "/data/haystack".
std::string HaystackDir();

// The paragraphs of every *.txt file in `dir`, files in name order. Paragraphs are separated by
// blank lines; line breaks inside one become spaces. Throws qevict::Error when the directory
// cannot be read or holds no text.
std::vector<std::string> LoadHaystackParagraphs(const std::string& dir);

// A paragraph split after '.', '?' or '!' followed by whitespace; pieces are trimmed.
std::vector<std::string> SplitSentences(std::string_view paragraph);

// The classic passkey filler sentences, repeated in this order.
const std::vector<std::string>& PasskeyFillerSentences();

// Concatenates pieces: a space between them, a blank line after a paragraph_end piece.
std::string JoinPieces(const std::vector<TextPiece>& pieces, size_t begin = 0,
                       size_t end = static_cast<size_t>(-1));

class Haystack {
 public:
  // Prose: paragraphs (shuffled per seed by Fill) of sentences.
  static Haystack FromParagraphs(const std::vector<std::string>& paragraphs,
                                 const TokenCounter& count_tokens);
  // LoadHaystackParagraphs(HaystackDir()).
  static Haystack LoadProse(const TokenCounter& count_tokens);
  // The passkey filler: one continuous run of its sentences, never shuffled.
  static Haystack Passkey(const TokenCounter& count_tokens);

  // Whole sentences, starting at a paragraph's start, whose tokens (plus paragraph breaks) come
  // closest to `target_tokens`. Prose paragraphs are taken in an order shuffled with `seed`; when
  // all are used, they are reshuffled and taken again. The last piece has paragraph_end = true.
  std::vector<TextPiece> Fill(int64_t target_tokens, uint64_t seed) const;

  // Tokens a blank line between paragraphs adds (the separator counted alone).
  int64_t paragraph_break_tokens() const { return break_tokens_; }
  int64_t total_tokens() const { return total_tokens_; }
  size_t paragraph_count() const { return paragraphs_.size(); }
  const std::vector<TextPiece>& paragraph(size_t i) const { return paragraphs_[i]; }

 private:
  std::vector<std::vector<TextPiece>> paragraphs_;
  bool shuffle_ = true;
  int64_t break_tokens_ = 0;
  int64_t total_tokens_ = 0;
};

// Tokens of `pieces` as JoinPieces renders them, from the cached counts: the pieces' tokens plus
// `break_tokens` per blank line between two pieces.
int64_t PieceTokens(const std::vector<TextPiece>& pieces, int64_t break_tokens);

}  // namespace qevict
