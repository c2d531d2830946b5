// Tests of answer matching (answer_match.h): normalization (ASCII case, whitespace runs, trim),
// substring matching, empty answers, and any-of / all-of turns; the SQuAD-style exact and f1
// scorers (squad_match.h) against hand-computed values.
#include "eval/answer_match.h"

#include <gtest/gtest.h>

#include <string>

#include "eval/squad_match.h"

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
  // A substring test, as the protocol specifies, with numbers whole: a digit of the output right
  // before a leading digit of the answer, or right after a trailing one, makes it another number.
  EXPECT_FALSE(AnswerAppears("12345", "234"));
  EXPECT_FALSE(AnswerAppears("The value is 22000.", "2200"));
  EXPECT_FALSE(AnswerAppears(" 33643197.", "3364319"));   // one digit too many
  EXPECT_FALSE(AnswerAppears(" 13382751.", "3382751"));   // one digit in front
  EXPECT_FALSE(AnswerAppears("platform 381", "38"));
  EXPECT_TRUE(AnswerAppears("platform 38.", "38"));
  EXPECT_TRUE(AnswerAppears("38", "38"));
  EXPECT_TRUE(AnswerAppears("(38)", "38"));
  EXPECT_TRUE(AnswerAppears("4,821", "821"));             // a separator ends a digit run
  EXPECT_TRUE(AnswerAppears("3.5 kg", "3.5"));
  EXPECT_FALSE(AnswerAppears("13.5 kg", "3.5"));
  EXPECT_FALSE(AnswerAppears("3.55 kg", "3.5"));
  // A later occurrence can be whole where an earlier one is not.
  EXPECT_TRUE(AnswerAppears("22000, no: 2200", "2200"));
  EXPECT_TRUE(AnswerAppears("room 1214 or room 214", "room 214"));
  // Letters around an answer, or around a number inside it, do not cut it.
  EXPECT_TRUE(AnswerAppears("melons", "melon"));
  EXPECT_TRUE(AnswerAppears("x12y", "12"));
  EXPECT_FALSE(AnswerAppears("room 2145", "room 214"));
  EXPECT_TRUE(AnswerAppears("a9 b", "9 b"));
  EXPECT_FALSE(AnswerAppears("99 b", "9 b"));
  EXPECT_FALSE(AnswerAppears("X17", "X1"));  // ends with a digit: X17 is not X1
  EXPECT_TRUE(AnswerAppears("X1,", "X1"));
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

TEST(AnswerMatchTest, SquadNormalizeDropsCasePunctuationArticlesAndSpaces) {
  EXPECT_EQ(SquadNormalize("The Cat sat on a mat."), "cat sat on mat");
  EXPECT_EQ(SquadNormalize("  An  apple,\tthe pear!\n"), "apple pear");
  // Punctuation is removed, not replaced by a space.
  EXPECT_EQ(SquadNormalize("4,821"), "4821");
  EXPECT_EQ(SquadNormalize("o'clock"), "oclock");
  EXPECT_EQ(SquadNormalize("the-end"), "theend");
  EXPECT_EQ(SquadNormalize("A.B."), "ab");
  // Articles are whole words, after the punctuation is gone.
  EXPECT_EQ(SquadNormalize("(a) the, AN"), "");
  EXPECT_EQ(SquadNormalize("theatre and anthem"), "theatre and anthem");
  EXPECT_EQ(SquadNormalize("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"), "");
  // Bytes beyond ASCII are kept as they are.
  EXPECT_EQ(SquadNormalize("Caf\xc3\xa9 \xc3\x89T\xc3\x89"), "caf\xc3\xa9 \xc3\x89t\xc3\x89");
  EXPECT_EQ(SquadWords("The red, red rose"), (std::vector<std::string>{"red", "red", "rose"}));
  const std::string once = SquadNormalize("  The Blue-Green   DRAWER. ");
  EXPECT_EQ(once, "bluegreen drawer");
  EXPECT_EQ(SquadNormalize(once), once);
}

TEST(AnswerMatchTest, FirstNonBlankLine) {
  EXPECT_EQ(FirstNonBlankLine("\n  \n Oslo.\nBergen"), " Oslo.");
  EXPECT_EQ(FirstNonBlankLine("one"), "one");
  EXPECT_EQ(FirstNonBlankLine("a\r\nb"), "a\r");
  EXPECT_EQ(FirstNonBlankLine(""), "");
  EXPECT_EQ(FirstNonBlankLine(" \r\n\t\n"), "");
}

TEST(AnswerMatchTest, ExactScorerComparesTheFirstLineNormalized) {
  const AnswerScorer exact = AnswerScorer::kExact;
  EXPECT_EQ(AnswerScore("The Mango.\nAnna likes it.", "mango", exact), 1.0);
  EXPECT_EQ(AnswerScore("\n  platform 12\n", "Platform 12", exact), 1.0);
  EXPECT_EQ(AnswerScore(" 4,821.", "4821", exact), 1.0);
  EXPECT_EQ(AnswerScore("It is the mango.", "mango", exact), 0.0);  // "it is mango"
  EXPECT_EQ(AnswerScore("I think\nmango", "mango", exact), 0.0);    // not the first line
  EXPECT_EQ(AnswerScore("mangoes", "mango", exact), 0.0);
  // An answer that normalizes to nothing never matches, even an equal output.
  EXPECT_EQ(AnswerScore("the", "The", exact), 0.0);
  EXPECT_EQ(AnswerScore("", "", exact), 0.0);
  // The substring scorer finds the answer anywhere.
  EXPECT_EQ(AnswerScore("It is the mango.", "mango", AnswerScorer::kSubstring), 1.0);
  EXPECT_EQ(AnswerScore("I think\nmango", "mango", AnswerScorer::kSubstring), 1.0);
}

// F1 = 2c / (|output words| + |answer words|), c the words shared as multisets.
TEST(AnswerMatchTest, F1ScorerHandComputed) {
  const AnswerScorer f1 = AnswerScorer::kF1;
  EXPECT_EQ(AnswerScore("copper", "Copper.", f1), 1.0);
  EXPECT_EQ(AnswerScore("iron", "copper", f1), 0.0);
  // [blue drawer in kitchen] vs [blue drawer]: c = 2, P = 2/4, R = 2/2, F1 = 2/3.
  EXPECT_NEAR(AnswerScore("The blue drawer in the kitchen", "blue drawer", f1), 2.0 / 3.0, 1e-12);
  // [platform 12] vs [12]: c = 1, P = 1/2, R = 1, F1 = 2/3.
  EXPECT_NEAR(AnswerScore("Platform 12.", "12", f1), 2.0 / 3.0, 1e-12);
  // [red red blue] vs [red blue blue]: c = min(2,1) + min(1,2) = 2, F1 = 4/6.
  EXPECT_NEAR(AnswerScore("red red blue", "red blue blue", f1), 2.0 / 3.0, 1e-12);
  // [the cello lessons are in room 214] vs [room 214]: c = 2, 6 + 2 words, F1 = 4/8.
  EXPECT_EQ(AnswerScore("The cello lessons are in room 214.", "room 214", f1), 0.5);
  // Only the first non-blank line counts: [copper] vs [copper].
  EXPECT_EQ(AnswerScore("\ncopper\ncopper and tin", "copper", f1), 1.0);
  EXPECT_EQ(AnswerScore("", "copper", f1), 0.0);
  EXPECT_EQ(AnswerScore("the", "the", f1), 0.0);  // nothing left to compare
}

// any: the best answer's score; all: the worst; share: the mean.
TEST(AnswerMatchTest, TurnScoringCombinesScorerValues) {
  EvalTurn turn;
  turn.question = "Where are the keys?";
  turn.answers = {"blue drawer", "kitchen drawer"};
  // [blue drawer]: 1 against the first answer, 2 * 1 / (2 + 2) = 0.5 against the second.
  const std::string output = "The blue drawer.\nOr the kitchen drawer.";
  EXPECT_EQ(TurnScore(output, turn, AnswerScorer::kF1), 1.0);
  EXPECT_TRUE(TurnCorrect(output, turn, AnswerScorer::kF1));
  turn.scoring = TurnScoring::kAll;
  EXPECT_EQ(TurnScore(output, turn, AnswerScorer::kF1), 0.5);
  EXPECT_FALSE(TurnCorrect(output, turn, AnswerScorer::kF1));
  EXPECT_EQ(TurnScore(output, turn, AnswerScorer::kSubstring), 1.0);  // both appear
  EXPECT_EQ(TurnScore(output, turn, AnswerScorer::kExact), 0.0);
  turn.scoring = TurnScoring::kShare;
  EXPECT_EQ(TurnScore(output, turn, AnswerScorer::kF1), 0.75);
  EXPECT_EQ(TurnScore(output, turn, AnswerScorer::kExact), 0.5);
  turn.scoring = TurnScoring::kAny;
  EXPECT_EQ(TurnScore("Oslo", turn, AnswerScorer::kF1), 0.0);
  turn.answers.clear();
  EXPECT_EQ(TurnScore("anything", turn, AnswerScorer::kF1), 0.0);
  // The default scorer is substring: "drawer" alone matches neither answer.
  turn.answers = {"blue drawer"};
  EXPECT_EQ(TurnScore("the BLUE drawer!", turn), 1.0);
  EXPECT_EQ(TurnScore("drawer", turn), 0.0);
}

TEST(AnswerMatchTest, AnswerScorerNames) {
  EXPECT_EQ(AnswerScorerName(AnswerScorer::kSubstring), "substring");
  EXPECT_EQ(AnswerScorerName(AnswerScorer::kExact), "exact");
  EXPECT_EQ(AnswerScorerName(AnswerScorer::kF1), "f1");
  EXPECT_EQ(ParseAnswerScorer("substring"), AnswerScorer::kSubstring);
  EXPECT_EQ(ParseAnswerScorer("exact"), AnswerScorer::kExact);
  EXPECT_EQ(ParseAnswerScorer("f1"), AnswerScorer::kF1);
  for (const char* bad : {"", "F1", "exact ", "em", "contains", "any"}) {
    EXPECT_EQ(ParseAnswerScorer(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(EvalTask{}.scorer, std::nullopt);  // tasks take the run's --scorer
}

}  // namespace
}  // namespace qevict
