#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_test_util.h"
#include "tokenizer/unicode.h"

namespace qevict {
namespace {

using unicode::CharClass;

std::vector<std::string> SplitToByteLevel(PreTokenizer pre, std::string_view text) {
  std::vector<std::string_view> words;
  SplitWords(pre, text, &words);
  std::vector<std::string> out;
  for (std::string_view w : words) out.push_back(byte_level::Encode(w));
  return out;
}

TEST(UnicodeTest, ClassesOfSampleCharacters) {
  EXPECT_EQ(unicode::ClassOf('a'), CharClass::kLetter);
  EXPECT_EQ(unicode::ClassOf('Z'), CharClass::kLetter);
  EXPECT_EQ(unicode::ClassOf('7'), CharClass::kNumber);
  EXPECT_EQ(unicode::ClassOf(' '), CharClass::kWhitespace);
  EXPECT_EQ(unicode::ClassOf('\n'), CharClass::kWhitespace);
  EXPECT_EQ(unicode::ClassOf('!'), CharClass::kOther);
  EXPECT_EQ(unicode::ClassOf(0x1C), CharClass::kOther);        // not White_Space
  EXPECT_EQ(unicode::ClassOf(0x85), CharClass::kWhitespace);   // NEXT LINE
  EXPECT_EQ(unicode::ClassOf(0xA0), CharClass::kWhitespace);   // NO-BREAK SPACE
  EXPECT_EQ(unicode::ClassOf(0x3000), CharClass::kWhitespace);
  EXPECT_EQ(unicode::ClassOf(0x200B), CharClass::kOther);      // ZERO WIDTH SPACE (Cf)
  EXPECT_EQ(unicode::ClassOf(0xE9), CharClass::kLetter);       // é
  EXPECT_EQ(unicode::ClassOf(0x4E2D), CharClass::kLetter);     // 中
  EXPECT_EQ(unicode::ClassOf(0xB2), CharClass::kNumber);       // ²
  EXPECT_EQ(unicode::ClassOf(0x216B), CharClass::kNumber);     // Ⅻ (Nl)
  EXPECT_EQ(unicode::ClassOf(0x0663), CharClass::kNumber);     // ٣
  EXPECT_EQ(unicode::ClassOf(0x0301), CharClass::kOther);      // combining acute (Mn)
  EXPECT_EQ(unicode::ClassOf(0x1F600), CharClass::kOther);     // 😀
  EXPECT_EQ(unicode::ClassOf(0x20000), CharClass::kLetter);    // CJK extension B
  EXPECT_EQ(unicode::ClassOf(0x10FFFF), CharClass::kOther);
}

TEST(UnicodeTest, DecodesUtf8AndRejectsInvalidSequences) {
  EXPECT_EQ(unicode::DecodeUtf8("\xC3\xA9", 0).cp, 0xE9u);
  EXPECT_EQ(unicode::DecodeUtf8("\xF0\x9F\x98\x80", 0).length, 4);
  for (std::string_view bad : {"\xC3", "\x80", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                               "\xFF"}) {
    const unicode::DecodedChar c = unicode::DecodeUtf8(bad, 0);
    EXPECT_EQ(c.cp, 0xFFFDu) << bad;
    EXPECT_EQ(c.length, 1) << bad;
  }
  std::string out;
  for (char32_t cp : {0x41u, 0xE9u, 0x4E2Du, 0x1F600u}) unicode::AppendUtf8(cp, &out);
  EXPECT_EQ(out, "A\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80");
}

TEST(ByteLevelTest, MapsEveryByteToADistinctCharacterAndBack) {
  EXPECT_EQ(byte_level::Encode(" "), "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_level::Encode("\n"), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_level::Encode("a!~"), "a!~");
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    const std::string mapped = byte_level::Encode(byte);
    EXPECT_TRUE(seen.insert(mapped).second) << b;
    EXPECT_EQ(byte_level::Decode(mapped), byte) << b;
  }
  // Text outside the mapping decodes to itself.
  EXPECT_EQ(byte_level::Decode("<|im_start|>\xE4\xB8\xAD"), "<|im_start|>\xE4\xB8\xAD");
}

TEST(PreTokenizerTest, NamesMapToPreTokenizers) {
  EXPECT_EQ(PreTokenizerFromName("default"), PreTokenizer::kGpt2);
  EXPECT_EQ(PreTokenizerFromName("gpt2"), PreTokenizer::kGpt2);
  EXPECT_EQ(PreTokenizerFromName("llama-bpe"), PreTokenizer::kLlama3);
  EXPECT_EQ(PreTokenizerFromName("qwen2"), PreTokenizer::kQwen2);
  EXPECT_EQ(PreTokenizerFromName("smollm"), PreTokenizer::kSmolLm);
  EXPECT_EQ(PreTokenizerFromName("deepseek-coder"), std::nullopt);
}

// Every case of tests/golden/tokenizer_pretok.json, for every pre-tokenizer, must split exactly
// as Hugging Face tokenizers does.
TEST(PreTokenizerTest, MatchesHuggingFaceSplits) {
  const nlohmann::json golden = testing::LoadGolden("tokenizer_pretok.json");
  ASSERT_TRUE(golden.contains("cases"));
  ASSERT_GE(golden["cases"].size(), 100u);
  int checked = 0;
  for (const nlohmann::json& c : golden["cases"]) {
    const std::string text = c["text"];
    for (const char* name : {"gpt2", "llama-bpe", "qwen2", "smollm"}) {
      const std::vector<std::string> expected = c[name];
      EXPECT_EQ(SplitToByteLevel(*PreTokenizerFromName(name), text), expected)
          << name << " on " << nlohmann::json(text).dump();
      ++checked;
    }
  }
  EXPECT_GE(checked, 400);
}

TEST(PreTokenizerTest, WordsCoverInvalidUtf8Exactly) {
  const std::string text = "ab\xFF\xC3 12\x80\n\n x";
  for (PreTokenizer pre : {PreTokenizer::kGpt2, PreTokenizer::kLlama3, PreTokenizer::kQwen2,
                           PreTokenizer::kSmolLm}) {
    std::vector<std::string_view> words;
    SplitWords(pre, text, &words);
    std::string joined;
    for (std::string_view w : words) {
      EXPECT_FALSE(w.empty());
      joined += w;
    }
    EXPECT_EQ(joined, text) << PreTokenizerName(pre);
  }
}

TEST(PreTokenizerTest, EmptyTextHasNoWords) {
  std::vector<std::string_view> words;
  SplitWords(PreTokenizer::kSmolLm, "", &words);
  EXPECT_TRUE(words.empty());
}

}  // namespace
}  // namespace qevict
