// Tests of answer matching (answer_match.h): normalization (ASCII case, whitespace runs, trim),
// substring matching, empty answers, and any-of / all-of turns.
#include "eval/answer_match.h"

#include <gtest/gtest.h>

#include <string>

namespace qevict {
namespace {

TEST(AnswerMatchTest, NormalizeLowercasesAsciiAndCollapsesWhitespace) {
  EXPECT_EQ(NormalizeForMatch(""), "");
  EXPECT_EQ(NormalizeForMatch(" \t\n\r\f\v "), "");
  EXPECT_EQ(NormalizeForMatch("Hello World"), "hello world");
  EXPECT_EQ(NormalizeForMatch("  The  Blue\t\tDrawer\r\n"), "the blue drawer");
  EXPECT_EQ(NormalizeForMatch("a\n\n\nb\fc\vd"), "a b c d");
  EXPECT_EQ(NormalizeForMatch("ABCXYZ abcxyz 0123 @[`{"), "abcxyz abcxyz 0123 @[`{");
  // Only ASCII is lowercased; other bytes (UTF-8 included) are kept as they are.
  EXPECT_EQ(NormalizeForMatch("\xc3\x89t\xc3\xa9 CAF\xc3\x89"), "\xc3\x89t\xc3\xa9 caf\xc3\x89");
  EXPECT_EQ(NormalizeForMatch("a\xc2\xa0" "b"), "a\xc2\xa0" "b");  // NBSP is not ASCII space
  EXPECT_EQ(NormalizeForMatch(std::string("a\0b", 3)), std::string("a\0b", 3));
  // Idempotent.
  const std::string once = NormalizeForMatch("  Mixed \t CASE\n text ");
  EXPECT_EQ(NormalizeForMatch(once), once);
}

TEST(AnswerMatchTest, AnswerAppearsIgnoringCaseAndWhitespace) {
  EXPECT_TRUE(AnswerAppears("The capital is Brenvale.", "Brenvale"));
  EXPECT_TRUE(AnswerAppears("THE CAPITAL IS BRENVALE", "brenvale"));
  EXPECT_TRUE(AnswerAppears("in the blue\n   drawer, I think", "Blue Drawer"));
  EXPECT_TRUE(AnswerAppears("in the blue drawer", "  blue\tdrawer  "));
  EXPECT_TRUE(AnswerAppears("4821", "4821"));
  EXPECT_FALSE(AnswerAppears("48 21", "4821"));
  EXPECT_FALSE(AnswerAppears("The capital is Brenval.", "Brenvale"));
  EXPECT_FALSE(AnswerAppears("", "x"));
  // A plain substring test, as the protocol specifies.
  EXPECT_TRUE(AnswerAppears("12345", "234"));
  EXPECT_TRUE(AnswerAppears("caf\xc3\xa9", "CAF\xc3\xa9"));
  EXPECT_FALSE(AnswerAppears("caf\xc3\xa9", "CAF\xc3\x89"));  // non-ASCII case is not folded
}

TEST(AnswerMatchTest, EmptyAnswerNeverMatches) {
  EXPECT_FALSE(AnswerAppears("anything", ""));
  EXPECT_FALSE(AnswerAppears("anything", " \t\n "));
  EXPECT_FALSE(AnswerAppears("", ""));
  EXPECT_FALSE(AnswerAppears(" ", " "));
}

TEST(AnswerMatchTest, TurnCorrectWithAnyAnswer) {
  EvalTurn turn;
  turn.question = "Where are the keys?";
  turn.answers = {"blue drawer", "the drawer"};
  EXPECT_TRUE(TurnCorrect("They are in the Blue  Drawer.", turn));
  EXPECT_TRUE(TurnCorrect("the\ndrawer", turn));
  EXPECT_FALSE(TurnCorrect("on the table", turn));
  turn.answers = {"", "   "};
  EXPECT_FALSE(TurnCorrect("anything", turn));
  turn.answers = {"", "table"};
  EXPECT_TRUE(TurnCorrect("on the table", turn));
  turn.answers.clear();
  EXPECT_FALSE(TurnCorrect("anything", turn));
}

TEST(AnswerMatchTest, TurnScoringAll) {
  EvalTurn turn;
  turn.question = "Which variables equal 12345?";
  turn.answers = {"X1", "X3", "X7"};
  turn.scoring = TurnScoring::kAll;
  EXPECT_TRUE(TurnCorrect("x7, x1 and X3", turn));
  EXPECT_EQ(TurnScore("x7, x1 and X3", turn), 1.0);
  EXPECT_FALSE(TurnCorrect("X1 and X3", turn));
  EXPECT_EQ(TurnScore("X1 and X3", turn), 0.0);
  EXPECT_FALSE(TurnCorrect("", turn));
  turn.answers = {"X1", ""};  // an empty answer never appears, so the turn cannot be correct
  EXPECT_FALSE(TurnCorrect("X1", turn));
  turn.answers.clear();
  EXPECT_FALSE(TurnCorrect("anything", turn));
  EXPECT_EQ(TurnScore("anything", turn), 0.0);
}

// RULER's string_match_all: the share of the answers found.
TEST(AnswerMatchTest, TurnScoringShare) {
  EvalTurn turn;
  turn.question = "What are all the numbers for amber-falcon?";
  turn.answers = {"1111111", "2222222", "3333333", "4444444"};
  turn.scoring = TurnScoring::kShare;
  EXPECT_EQ(TurnScore("2222222 and 4444444.", turn), 0.5);
  EXPECT_FALSE(TurnCorrect("2222222 and 4444444.", turn));
  EXPECT_EQ(TurnScore("3333333", turn), 0.25);
  EXPECT_EQ(TurnScore("4444444, 3333333, 2222222, 1111111", turn), 1.0);
  EXPECT_TRUE(TurnCorrect("4444444, 3333333, 2222222, 1111111", turn));
  EXPECT_EQ(TurnScore("nothing", turn), 0.0);
  EXPECT_EQ(TurnScore("1111111 1111111 1111111", turn), 0.25);  // repeats count once
  turn.answers = {"Apple", "pear", "plum"};
  EXPECT_NEAR(TurnScore("an APPLE and a\tplum", turn), 2.0 / 3.0, 1e-12);
  turn.answers.clear();
  EXPECT_EQ(TurnScore("anything", turn), 0.0);
  // The same answers under the three modes.
  turn.answers = {"red", "blue", "green", "white"};
  const std::string two = "red and green";
  turn.scoring = TurnScoring::kAny;
  EXPECT_EQ(TurnScore(two, turn), 1.0);
  turn.scoring = TurnScoring::kAll;
  EXPECT_EQ(TurnScore(two, turn), 0.0);
  turn.scoring = TurnScoring::kShare;
  EXPECT_EQ(TurnScore(two, turn), 0.5);
}

TEST(AnswerMatchTest, TurnScoringNames) {
  EXPECT_EQ(TurnScoringName(TurnScoring::kAny), "any");
  EXPECT_EQ(TurnScoringName(TurnScoring::kAll), "all");
  EXPECT_EQ(TurnScoringName(TurnScoring::kShare), "share");
  EXPECT_EQ(ParseTurnScoring("any"), TurnScoring::kAny);
  EXPECT_EQ(ParseTurnScoring("all"), TurnScoring::kAll);
  EXPECT_EQ(ParseTurnScoring("share"), TurnScoring::kShare);
  for (const char* bad : {"", "ANY", "Share", "share ", "some", "most", "0.5"}) {
    EXPECT_EQ(ParseTurnScoring(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(EvalTurn{}.scoring, TurnScoring::kAny);  // the default
}

}  // namespace
}  // namespace qevict
