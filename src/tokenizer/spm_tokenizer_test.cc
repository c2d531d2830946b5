#include "tokenizer/spm_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tokenizer/tokenizer_test_util.h"
#include "util/error.h"

namespace qevict {
namespace {

const char* const kSpace = "\xE2\x96\x81";  // ▁

// A hand-made SentencePiece vocabulary: <unk> <s> </s>, 256 byte pieces, then pieces with scores.
Vocab SmallSpmVocab() {
  Vocab v;
  v.model = "llama";
  const auto add = [&v](const std::string& text, float score, TokenType type) {
    v.tokens.push_back(text);
    v.scores.push_back(score);
    v.token_types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    add(name, 0, TokenType::kByte);
  }
  // id 259 onwards. Merged pieces' scores decide the merge order.
  const std::string s = kSpace;
  for (const char* c : {"h", "e", "l", "o", "w", "r", "d"}) add(c, -100, TokenType::kNormal);
  add(s, -100, TokenType::kNormal);        // 266
  add("ll", -1, TokenType::kNormal);       // 267
  add("he", -2, TokenType::kNormal);       // 268
  add("hell", -3, TokenType::kNormal);     // 269
  add("hello", -4, TokenType::kNormal);    // 270
  add(s + "hello", -5, TokenType::kNormal);  // 271
  add("lo", -0.5, TokenType::kNormal);     // 272: beats "ll" in "llo"
  add("or", -6, TokenType::kNormal);       // 273
  add(s + "w", -7, TokenType::kNormal);    // 274
  add(s + "wor", -8, TokenType::kNormal);  // 275
  v.unknown = 0;
  v.bos = 1;
  v.eos = 2;
  return v;
}

TEST(SentencePieceTest, MergesByHighestScoreHandChecked) {
  const auto t = Tokenizer::FromVocab(SmallSpmVocab());
  EXPECT_EQ(t->model_name(), "llama");
  EXPECT_TRUE(t->add_bos());
  // "▁hello": pairs ▁h he el ll lo. Best: lo (-0.5) -> ▁ h e l lo; then he (-2) -> ▁ he l lo;
  // no "hel"/"llo"/"▁he" pieces, so it stops: ▁ he l lo.
  EXPECT_EQ(t->Encode("hello", false, false), (std::vector<TokenId>{266, 268, 261, 272}));
  // "▁world": or (-6) -> ▁ w or l d; ▁w (-7) -> ▁w or l d; ▁wor (-8) -> ▁wor l d.
  EXPECT_EQ(t->Encode("world", false, false), (std::vector<TokenId>{275, 261, 265}));
  // BOS, and a second segment after a special token gets its own space prefix.
  EXPECT_EQ(t->Encode("world</s>world", true, true),
            (std::vector<TokenId>{1, 275, 261, 265, 2, 275, 261, 265}));
}

TEST(SentencePieceTest, FallsBackToBytesForUnknownCharacters) {
  const auto t = Tokenizer::FromVocab(SmallSpmVocab());
  // "▁é": '▁' is a piece, 'é' (C3 A9) is not: bytes <0xC3> <0xA9> (ids 3 + byte).
  EXPECT_EQ(t->Encode("\xC3\xA9", false, false), (std::vector<TokenId>{266, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t->Decode(t->Encode("\xC3\xA9 hello", true, false)), "\xC3\xA9 hello");
  EXPECT_EQ(t->TokenToPiece(3 + 'A'), "A");
}

TEST(SentencePieceTest, UnknownTokenWithoutByteFallback) {
  Vocab v = SmallSpmVocab();
  v.token_types[3 + 0xA9] = TokenType::kNormal;  // no byte piece for 0xA9 any more
  std::vector<std::string> texts(v.tokens.begin(), v.tokens.end());
  texts[3 + 0xA9] = "unused-piece";
  v.tokens = TokenTexts::From(texts);
  const auto t = Tokenizer::FromVocab(std::move(v));
  EXPECT_EQ(t->Encode("\xC3\xA9", false, false), (std::vector<TokenId>{266, 0}));
}

TEST(SentencePieceTest, DecodeDropsThePrefixSpaceOnce) {
  const auto t = Tokenizer::FromVocab(SmallSpmVocab());
  EXPECT_EQ(t->Decode({1, 271}), "hello");
  EXPECT_EQ(t->Decode({1, 271}, /*render_special=*/true), "<s> hello");
  EXPECT_EQ(t->Decode({271, 271}), "hello hello");
  EXPECT_EQ(t->TokenToPiece(271), " hello");
}

TEST(SentencePieceTest, NoSpacePrefixWhenDisabled) {
  Vocab v = SmallSpmVocab();
  v.add_space_prefix = false;
  v.add_bos = false;
  const auto t = Tokenizer::FromVocab(std::move(v));
  EXPECT_FALSE(t->add_bos());
  // h e l l o: lo, then he; "hell" would need "ll", which "lo" took.
  EXPECT_EQ(t->Encode("hello", true, false), (std::vector<TokenId>{268, 261, 272}));
  EXPECT_EQ(t->Decode({266, 270}), " hello");
}

TEST(SentencePieceTest, RequiresScores) {
  Vocab v = SmallSpmVocab();
  v.scores.clear();
  EXPECT_THROW(Tokenizer::FromVocab(std::move(v)), Error);
}

// A small BPE model trained with the sentencepiece library (scripts/gen_tokenizer_golden.py):
// ids must equal sentencepiece's.
TEST(SentencePieceTest, MatchesSentencePieceLibrary) {
  const nlohmann::json golden = testing::LoadGolden("tokenizer_spm.json");
  ASSERT_TRUE(golden.contains("tokens"));
  Vocab v;
  v.model = "llama";
  v.tokens = TokenTexts::From(golden["tokens"].get<std::vector<std::string>>());
  v.scores = golden["scores"].get<std::vector<float>>();
  for (int type : golden["token_types"]) v.token_types.push_back(static_cast<TokenType>(type));
  v.unknown = golden["unknown"];
  v.bos = golden["bos"];
  v.eos = golden["eos"];
  v.add_space_prefix = golden["add_space_prefix"].get<bool>();
  const auto t = Tokenizer::FromVocab(std::move(v));
  ASSERT_GE(golden["cases"].size(), 40u);
  for (const nlohmann::json& c : golden["cases"]) {
    const std::string text = c["text"];
    const std::vector<TokenId> expected = c["ids"];
    const std::vector<TokenId> ids = t->Encode(text, false, false);
    EXPECT_EQ(ids, expected) << nlohmann::json(text).dump();
    EXPECT_EQ(t->Decode(ids), text) << nlohmann::json(text).dump();
  }
}

}  // namespace
}  // namespace qevict
