#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_test_writer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace qevict {
namespace {

// A small valid byte-level vocabulary: 256 bytes, "ab", control token <|x|>.
Vocab ValidVocab() {
  Vocab v;
  v.model = "gpt2";
  v.pre = "smollm";
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_level::Encode(std::string(1, char(b))));
  v.tokens.push_back("ab");
  v.tokens.push_back("<|x|>");
  v.token_types.assign(v.tokens.size(), TokenType::kNormal);
  v.token_types.back() = TokenType::kControl;
  v.scores.assign(v.tokens.size(), 0.0f);
  v.merges = {"a b"};
  v.bos = 257;
  v.eos = 257;
  return v;
}

// Runs FromVocab and returns the Error message ("" when it did not throw).
std::string ErrorOf(Vocab v) {
  try {
    Tokenizer::FromVocab(std::move(v));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(text, part)                                             \
  EXPECT_NE(std::string(text).find(part), std::string::npos)                    \
      << "\"" << (text) << "\" does not contain \"" << (part) << "\""

TEST(VocabValidationTest, AcceptsValidVocabulary) {
  EXPECT_EQ(ErrorOf(ValidVocab()), "");
  const auto t = Tokenizer::FromVocab(ValidVocab());
  EXPECT_EQ(t->Encode("ab<|x|>", false, true), (std::vector<TokenId>{256, 257}));
}

TEST(VocabValidationTest, RejectsInconsistentVocabularies) {
  struct Case {
    const char* what;
    void (*breaks)(Vocab&);
    const char* message_part;
  };
  const Case cases[] = {
      {"no tokens", [](Vocab& v) { v.tokens.clear(), v.token_types.clear(), v.scores.clear(); },
       "tokenizer.ggml.tokens"},
      {"scores length", [](Vocab& v) { v.scores.pop_back(); }, "tokenizer.ggml.scores"},
      {"token_type length", [](Vocab& v) { v.token_types.push_back(TokenType::kNormal); },
       "tokenizer.ggml.token_type"},
      {"token_type value", [](Vocab& v) { v.token_types[5] = static_cast<TokenType>(9); },
       "tokenizer.ggml.token_type[5]"},
      {"bos out of range", [](Vocab& v) { v.bos = 258; }, "tokenizer.ggml.bos_token_id"},
      {"eos negative", [](Vocab& v) { v.eos = -7; }, "tokenizer.ggml.eos_token_id"},
      {"unknown out of range", [](Vocab& v) { v.unknown = 100000; },
       "tokenizer.ggml.unknown_token_id"},
      {"padding out of range", [](Vocab& v) { v.padding = 258; },
       "tokenizer.ggml.padding_token_id"},
      {"eot out of range", [](Vocab& v) { v.eot = 999; }, "tokenizer.ggml.eot_token_id"},
      {"merge naming unknown token", [](Vocab& v) { v.merges.push_back("a zz"); },
       "names \"zz\""},
      {"merge result missing", [](Vocab& v) { v.merges.push_back("b c"); }, "\"bc\""},
      {"merge without separator", [](Vocab& v) { v.merges.push_back("ab"); },
       "tokenizer.ggml.merges[1]"},
      {"gpt2 without merges", [](Vocab& v) { v.merges.clear(); }, "tokenizer.ggml.merges"},
      {"unknown model", [](Vocab& v) { v.model = "wordpiece"; }, "tokenizer.ggml.model"},
      {"unknown pre-tokenizer", [](Vocab& v) { v.pre = "falcon"; }, "tokenizer.ggml.pre"},
  };
  for (const Case& c : cases) {
    Vocab v = ValidVocab();
    c.breaks(v);
    EXPECT_CONTAINS(ErrorOf(std::move(v)), c.message_part) << c.what;
  }
}

TEST(VocabValidationTest, SplitMergeKeepsALeadingSpaceOnTheLeft) {
  std::string left, right;
  ASSERT_TRUE(SplitMerge("  a", &left, &right));
  EXPECT_EQ(left, " ");
  EXPECT_EQ(right, "a");
  EXPECT_FALSE(SplitMerge("ab", &left, &right));
  EXPECT_FALSE(SplitMerge("a ", &left, &right));
}

// FromGguf reads the keys and reports problems by key.
std::vector<uint8_t> TokenizerGguf(const Vocab& v, uint32_t bos_id) {
  gguf::testing::GgufWriter w;
  w.Add("general.architecture", gguf::testing::val::Str("llama"));
  w.Add("tokenizer.ggml.model", gguf::testing::val::Str(v.model));
  w.Add("tokenizer.ggml.pre", gguf::testing::val::Str(v.pre));
  w.Add("tokenizer.ggml.tokens",
        gguf::testing::val::StrArray(std::vector<std::string>(v.tokens.begin(), v.tokens.end())));
  std::vector<int32_t> types;
  for (TokenType t : v.token_types) types.push_back(static_cast<int32_t>(t));
  w.Add("tokenizer.ggml.token_type", gguf::testing::val::I32Array(types));
  w.Add("tokenizer.ggml.merges", gguf::testing::val::StrArray(v.merges));
  w.Add("tokenizer.ggml.bos_token_id", gguf::testing::val::U32(bos_id));
  w.Add("tokenizer.ggml.eos_token_id", gguf::testing::val::U32(257));
  w.Add("tokenizer.ggml.add_bos_token", gguf::testing::val::Bool(true));
  return w.Build();
}

TEST(GgufVocabTest, BuildsTokenizerFromGgufMetadata) {
  const std::vector<uint8_t> bytes = TokenizerGguf(ValidVocab(), 257);
  const auto file = gguf::File::Parse(bytes);
  const auto t = Tokenizer::FromGguf(*file);
  EXPECT_EQ(t->pre_name(), "smollm");
  EXPECT_EQ(t->bos(), 257);
  EXPECT_TRUE(t->add_bos());
  EXPECT_EQ(t->Encode("ab", true, false), (std::vector<TokenId>{257, 256}));
}

TEST(GgufVocabTest, ReportsOutOfRangeIdByKey) {
  const std::vector<uint8_t> bytes = TokenizerGguf(ValidVocab(), 4000);
  const auto file = gguf::File::Parse(bytes);
  try {
    Tokenizer::FromGguf(*file);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_CONTAINS(std::string(e.what()), "tokenizer.ggml.bos_token_id");
  }
}

TEST(GgufVocabTest, MissingTokenizerIsAnError) {
  gguf::testing::GgufWriter w;
  w.Add("general.architecture", gguf::testing::val::Str("llama"));
  const std::vector<uint8_t> bytes = w.Build();
  EXPECT_THROW(Tokenizer::FromGguf(*gguf::File::Parse(bytes)), Error);
  w.Add("tokenizer.ggml.model", gguf::testing::val::Str("gpt2"));
  const std::vector<uint8_t> bytes2 = w.Build();
  try {
    Tokenizer::FromGguf(*gguf::File::Parse(bytes2));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_CONTAINS(std::string(e.what()), "tokenizer.ggml.tokens");
  }
}

}  // namespace
}  // namespace qevict
