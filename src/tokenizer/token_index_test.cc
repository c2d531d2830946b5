// Tests of the token text index (token_index.h): every text found at its first id, texts not in
// the vocabulary (prefixes, extensions, the empty text) not found, the filter honoured, and a
// vocabulary large enough to make probes collide.
#include "tokenizer/token_index.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace qevict {
namespace {

TEST(TokenTextsTest, HoldsEachTextWhole) {
  TokenTexts texts = {"", "a", "\xe2\x96\x81the", std::string_view("x\0y", 3)};
  texts.push_back("last");
  ASSERT_EQ(texts.size(), 5u);
  EXPECT_EQ(texts[0], "");
  EXPECT_EQ(texts[1], "a");
  EXPECT_EQ(texts[2], "\xe2\x96\x81the");
  EXPECT_EQ(texts[3], std::string_view("x\0y", 3));  // embedded NUL kept
  EXPECT_EQ(texts[4], "last");
  const std::vector<std::string> copied(texts.begin(), texts.end());
  EXPECT_EQ(copied, (std::vector<std::string>{"", "a", "\xe2\x96\x81the", std::string("x\0y", 3),
                                              "last"}));
  EXPECT_EQ(TokenTexts::From(copied)[4], "last");
  texts.clear();
  EXPECT_TRUE(texts.empty());
}

TEST(TokenIndexTest, FindsEachTextAtItsFirstId) {
  const TokenTexts texts = {"a", "ab", "abc", "", "b", "ab", "\xe2\x96\x81the"};
  const TokenIndex index(texts);
  EXPECT_EQ(index.Find("a"), 0);
  EXPECT_EQ(index.Find("ab"), 1);  // listed twice: the first id
  EXPECT_EQ(index.Find("abc"), 2);
  EXPECT_EQ(index.Find(""), 3);
  EXPECT_EQ(index.Find("b"), 4);
  EXPECT_EQ(index.Find("\xe2\x96\x81the"), 6);
  EXPECT_EQ(index.Find("abcd"), -1);
  EXPECT_EQ(index.Find("c"), -1);
  EXPECT_EQ(index.Find(std::string("a\0", 2)), -1);
  EXPECT_EQ(TokenIndex().Find("a"), -1);  // an empty index finds nothing
}

TEST(TokenIndexTest, IndexesOnlyTheKeptIds) {
  const TokenTexts texts = {"x", "y", "x", "z"};
  const TokenIndex odd(texts, [](TokenId id) { return id % 2 == 1; });
  EXPECT_EQ(odd.Find("x"), -1);
  EXPECT_EQ(odd.Find("y"), 1);
  EXPECT_EQ(odd.Find("z"), 3);
  const TokenIndex skip_first(texts, [](TokenId id) { return id != 0; });
  EXPECT_EQ(skip_first.Find("x"), 2);  // the first kept id of the text
}

TEST(TokenIndexTest, EveryTextOfALargeVocabulary) {
  TokenTexts texts;
  for (int i = 0; i < 100000; ++i) texts.push_back("t" + std::to_string(i * 7919 % 100003));
  const TokenIndex index(texts);
  for (int i = 0; i < 100000; ++i) ASSERT_EQ(index.Find(texts[i]), i) << texts[i];
  EXPECT_EQ(index.Find("t100003"), -1);
  EXPECT_EQ(index.Find("u1"), -1);
  EXPECT_LE(index.bytes(), 4 * sizeof(TokenId) * texts.size());  // at most 4 slots a token
}

}  // namespace
}  // namespace qevict
