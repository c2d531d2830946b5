#include "tokenizer/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer_test_util.h"

namespace qevict {
namespace {

// A byte-level vocabulary with every byte plus the given merges (and their results).
Vocab ByteVocab(const std::vector<std::string>& merges) {
  Vocab v;
  v.model = "gpt2";
  v.pre = "gpt2";
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_level::Encode(std::string(1, char(b))));
  for (const std::string& m : merges) {
    std::string left, right;
    EXPECT_TRUE(SplitMerge(m, &left, &right));
    v.tokens.push_back(left + right);
    v.merges.push_back(m);
  }
  v.tokens.push_back("<|end|>");
  v.token_types.assign(v.tokens.size(), TokenType::kNormal);
  v.token_types.back() = TokenType::kControl;
  v.eos = v.size() - 1;
  return v;
}

TokenId Id(const Tokenizer& t, const std::string& mapped_text) {
  const auto& vocab = static_cast<const VocabTokenizer&>(t).vocab();
  for (TokenId id = 0; id < vocab.size(); ++id) {
    if (vocab.tokens[id] == mapped_text) return id;
  }
  ADD_FAILURE() << "no token " << mapped_text;
  return -1;
}

TEST(ByteLevelBpeTest, AppliesLowestRankFirstAndLeftmostOnTies) {
  // "ab" could form from "a b" (rank 1) or... "bc" has rank 0, so "abc" -> a + bc.
  const auto t = Tokenizer::FromVocab(ByteVocab({"b c", "a b", "a bc"}));
  EXPECT_EQ(t->Encode("abc", false, false), (std::vector<TokenId>{Id(*t, "abc")}));
  EXPECT_EQ(t->Encode("ab", false, false), (std::vector<TokenId>{Id(*t, "ab")}));
  // "aaa" with "a a": the leftmost pair merges first.
  const auto u = Tokenizer::FromVocab(ByteVocab({"a a"}));
  EXPECT_EQ(u->Encode("aaa", false, false), (std::vector<TokenId>{Id(*u, "aa"), Id(*u, "a")}));
}

TEST(ByteLevelBpeTest, WordsDoNotMergeAcrossPreTokenizerBoundaries) {
  const auto t = Tokenizer::FromVocab(ByteVocab({"a \xC4\xA0"}));  // "a" + "Ġ"
  // GPT-2 splits "a b" into "a", " b": the merge "a Ġ" never applies.
  const std::vector<TokenId> ids = t->Encode("a b", false, false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(t->Decode(ids), "a b");
}

TEST(ByteLevelBpeTest, SpecialTokensOnlyWhenParsingSpecial) {
  const auto t = Tokenizer::FromVocab(ByteVocab({"a b"}));
  const TokenId end = t->eos();
  EXPECT_EQ(t->Encode("x<|end|>", false, true), (std::vector<TokenId>{Id(*t, "x"), end}));
  EXPECT_EQ(t->Encode("x<|end|>", false, false).size(), 8u);
  EXPECT_TRUE(t->IsEndOfGeneration(end));
  EXPECT_EQ(t->TokenToPiece(end), "");
  EXPECT_EQ(t->TokenToPiece(end, /*render_special=*/true), "<|end|>");
  EXPECT_FALSE(t->add_bos());
  EXPECT_EQ(t->bos(), -1);
}

TEST(ByteLevelBpeTest, InvalidUtf8RoundTripsAsBytes) {
  const auto t = Tokenizer::FromVocab(ByteVocab({"a b"}));
  const std::string text = "\xFF\xC3 ok \x80";
  EXPECT_EQ(t->Decode(t->Encode(text, false, true)), text);
}

// --- SmolLM2 (real model) ---------------------------------------------------------------

TEST(SmolLm2TokenizerTest, Properties) {
  QEVICT_REQUIRE_SMOLLM2(t);
  EXPECT_EQ(t->model_name(), "gpt2");
  EXPECT_EQ(t->pre_name(), "smollm");
  EXPECT_EQ(t->vocab_size(), 49152);
  EXPECT_EQ(t->bos(), 1);
  EXPECT_EQ(t->eos(), 2);
  EXPECT_FALSE(t->add_bos());
  EXPECT_EQ(t->Encode("Hi", /*add_bos=*/true, true), t->Encode("Hi", false, true));
  EXPECT_TRUE(t->IsEndOfGeneration(2));  // <|im_end|>
  EXPECT_TRUE(t->IsEndOfGeneration(0));  // <|endoftext|>
  EXPECT_FALSE(t->IsEndOfGeneration(1));
  EXPECT_FALSE(t->IsEndOfGeneration(t->Encode("Hello", false, false)[0]));
  EXPECT_EQ(t->TokenToPiece(1), "");
  EXPECT_EQ(t->TokenToPiece(1, true), "<|im_start|>");
  EXPECT_EQ(t->TokenToPiece(t->Encode(" world", false, false)[0]), " world");
}

TEST(SmolLm2TokenizerTest, MatchesHuggingFaceIds) {
  const nlohmann::json golden = testing::LoadGolden("tokenizer_smollm2.json");
  QEVICT_REQUIRE_SMOLLM2(t);
  ASSERT_GE(golden["cases"].size(), 40u);
  for (const nlohmann::json& c : golden["cases"]) {
    const std::string text = c["text"];
    const bool parse_special = c["parse_special"];
    const std::vector<TokenId> expected = c["ids"];
    const std::vector<TokenId> ids = t->Encode(text, false, parse_special);
    EXPECT_EQ(ids, expected) << nlohmann::json(text).dump() << " parse_special=" << parse_special;
    EXPECT_EQ(t->Decode(ids, /*render_special=*/true), text) << nlohmann::json(text).dump();
  }
}

TEST(SmolLm2TokenizerTest, ChatPromptsMatchTemplateAndIds) {
  const nlohmann::json golden = testing::LoadGolden("tokenizer_smollm2.json");
  QEVICT_REQUIRE_SMOLLM2(t);
  const std::optional<ChatTemplate> tmpl = ParseChatTemplate(golden["chat_template"].get<std::string>());
  ASSERT_TRUE(tmpl.has_value());
  ASSERT_GE(golden["chats"].size(), 5u);
  for (const nlohmann::json& chat : golden["chats"]) {
    std::vector<ChatMessage> messages;
    for (const nlohmann::json& m : chat["messages"]) messages.push_back({m["role"], m["content"]});
    const std::string rendered = RenderChat(*tmpl, messages, chat["add_generation_prompt"]);
    EXPECT_EQ(rendered, chat["rendered"].get<std::string>());
    const std::vector<TokenId> expected = chat["ids"];
    EXPECT_EQ(t->Encode(rendered, t->add_bos(), true), expected);
  }
}

double SecondsToEncode(const Tokenizer& t, const std::string& text, const char* what) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<TokenId> ids = t.Encode(text, false, true);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: encoded %zu bytes into %zu tokens in %.1f ms\n", what, text.size(), ids.size(),
              seconds * 1e3);
  EXPECT_EQ(t.Decode(ids, true), text) << what;
  return seconds;
}

TEST(SmolLm2TokenizerTest, EncodesHundredKilobytesQuickly) {
  const nlohmann::json golden = testing::LoadGolden("tokenizer_smollm2.json");
  QEVICT_REQUIRE_SMOLLM2(t);
  std::string mixed;
  while (mixed.size() < 100 * 1024) {
    for (const nlohmann::json& c : golden["cases"]) mixed += c["text"].get<std::string>() + " ";
  }
  EXPECT_LT(SecondsToEncode(*t, mixed, "golden texts repeated"), 1.0);

  // Few repeated words: random lowercase words, numbers and punctuation.
  std::string varied;
  uint32_t state = 12345;
  const auto next = [&state](uint32_t n) {
    state = state * 1664525u + 1013904223u;
    return (state >> 8) % n;
  };
  while (varied.size() < 100 * 1024) {
    const uint32_t length = 1 + next(12);
    for (uint32_t i = 0; i < length; ++i) varied.push_back(static_cast<char>('a' + next(26)));
    varied += " .,\n0123456789"[next(15)];
    varied.push_back(' ');
  }
  EXPECT_LT(SecondsToEncode(*t, varied, "random words"), 1.0);

  // One 100 KB word: BPE over a single long symbol list.
  std::string one_word;
  while (one_word.size() < 100 * 1024) one_word.push_back(static_cast<char>('a' + next(26)));
  EXPECT_LT(SecondsToEncode(*t, one_word, "one 100 KB word"), 1.0);
}

}  // namespace
}  // namespace qevict
