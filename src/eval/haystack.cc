// Haystack loading (data/haystack/*.txt), sentence splitting, and deterministic filler runs of a
// requested token length. Token counts are taken once per sentence, never of a growing string.
#include "source_dir.h"
#include "eval/haystack.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "eval/task_util.h"
#include "util/error.h"

namespace qevict {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Appends the paragraphs of one file's text.
void ParseParagraphs(const std::string& text, std::vector<std::string>& out) {
  std::string current;
  auto flush = [&] {
    if (!current.empty()) out.push_back(std::move(current));
    current.clear();
  };
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::string_view trimmed = Trim(line);
    if (trimmed.empty()) {
      flush();
      continue;
    }
    if (!current.empty()) current += ' ';
    current += trimmed;
  }
  flush();
}

}  // namespace

std::string HaystackDir() {
  const char* env = std::getenv("QEVICT_HAYSTACK_DIR");
  if (env != nullptr && *env != '\0') return env;
  return QEVICT_SOURCE_DIR "/data/haystack";
}

std::vector<std::string> LoadHaystackParagraphs(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".txt" && it->is_regular_file(ec)) files.push_back(it->path());
  }
  if (ec) throw Error("cannot read the haystack directory " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  std::vector<std::string> paragraphs;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw Error("cannot open haystack file " + file.string());
    std::ostringstream text;
    text << in.rdbuf();
    ParseParagraphs(text.str(), paragraphs);
  }
  if (paragraphs.empty()) {
    throw Error("no haystack text (*.txt) in " + dir +
                " (set QEVICT_HAYSTACK_DIR to a directory of prose files)");
  }
  return paragraphs;
}

std::vector<std::string> SplitSentences(std::string_view paragraph) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < paragraph.size(); ++i) {
    char c = paragraph[i];
    if (c != '.' && c != '?' && c != '!') continue;
    size_t end = i + 1;
    while (end < paragraph.size() &&
           (paragraph[end] == '"' || paragraph[end] == '\'' || paragraph[end] == ')')) {
      ++end;
    }
    if (end < paragraph.size() && !IsSpace(paragraph[end])) continue;
    std::string_view sentence = Trim(paragraph.substr(start, end - start));
    if (!sentence.empty()) out.emplace_back(sentence);
    start = end;
    i = end - 1;
  }
  std::string_view rest = Trim(paragraph.substr(std::min(start, paragraph.size())));
  if (!rest.empty()) out.emplace_back(rest);
  return out;
}

const std::vector<std::string>& PasskeyFillerSentences() {
  static const std::vector<std::string> sentences = {"The grass is green.", "The sky is blue.",
                                                     "The sun is yellow.", "Here we go.",
                                                     "There and back again."};
  return sentences;
}

std::string JoinPieces(const std::vector<TextPiece>& pieces, size_t begin, size_t end) {
  end = std::min(end, pieces.size());
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    out += pieces[i].text;
    if (i + 1 < end) out += pieces[i].paragraph_end ? "\n\n" : " ";
  }
  return out;
}

int64_t PieceTokens(const std::vector<TextPiece>& pieces, int64_t break_tokens) {
  int64_t total = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    total += pieces[i].tokens;
    if (i + 1 < pieces.size() && pieces[i].paragraph_end) total += break_tokens;
  }
  return total;
}

Haystack Haystack::FromParagraphs(const std::vector<std::string>& paragraphs,
                                  const TokenCounter& count_tokens) {
  Haystack h;
  h.break_tokens_ = count_tokens("\n\n");
  for (const std::string& paragraph : paragraphs) {
    std::vector<TextPiece> pieces;
    for (std::string& sentence : SplitSentences(paragraph)) {
      TextPiece piece;
      piece.tokens = count_tokens(sentence);
      piece.text = std::move(sentence);
      h.total_tokens_ += piece.tokens;
      pieces.push_back(std::move(piece));
    }
    if (pieces.empty()) continue;
    pieces.back().paragraph_end = true;
    h.total_tokens_ += h.break_tokens_;
    h.paragraphs_.push_back(std::move(pieces));
  }
  if (h.total_tokens_ <= 0) throw Error("the haystack text has no tokens");
  return h;
}

Haystack Haystack::LoadProse(const TokenCounter& count_tokens) {
  return FromParagraphs(LoadHaystackParagraphs(HaystackDir()), count_tokens);
}

Haystack Haystack::Passkey(const TokenCounter& count_tokens) {
  Haystack h;
  h.shuffle_ = false;
  h.break_tokens_ = count_tokens("\n\n");
  std::vector<TextPiece> pieces;
  for (const std::string& sentence : PasskeyFillerSentences()) {
    TextPiece piece{sentence, count_tokens(sentence), false};
    h.total_tokens_ += piece.tokens;
    pieces.push_back(std::move(piece));
  }
  h.paragraphs_.push_back(std::move(pieces));
  QEVICT_CHECK(h.total_tokens_ > 0);
  return h;
}

std::vector<TextPiece> Haystack::Fill(int64_t target_tokens, uint64_t seed) const {
  std::vector<TextPiece> out;
  if (target_tokens <= 0 || paragraphs_.empty()) return out;
  eval_internal::Rng rng(seed);
  std::vector<size_t> order(paragraphs_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (shuffle_) rng.Shuffle(order);
  size_t next = 0;
  size_t last_used = order.size();
  int64_t total = 0;
  while (true) {
    if (next == order.size()) {  // all used: take them again, in a new order
      if (shuffle_) {
        rng.Shuffle(order);
        if (order.size() > 1 && order[0] == last_used) std::swap(order[0], order[1]);
      }
      next = 0;
    }
    last_used = order[next++];
    for (const TextPiece& sentence : paragraphs_[last_used]) {
      int64_t add = sentence.tokens;
      if (!out.empty() && out.back().paragraph_end) add += break_tokens_;
      if (total + add >= target_tokens) {
        // Stop at whichever sentence boundary is closer to the target.
        if (out.empty() || total + add - target_tokens <= target_tokens - total) {
          out.push_back(sentence);
        }
        out.back().paragraph_end = true;
        return out;
      }
      out.push_back(sentence);
      total += add;
    }
  }
}

}  // namespace qevict
