// Answer comparison in the style of SQuAD's evaluation (Rajpurkar et al., 2016), for the `exact`
// and `f1` scorers (answer_match.h): both texts are normalized (ASCII lowercased, ASCII
// punctuation removed, the articles a / an / the dropped, whitespace collapsed), then compared
// whole (exact match) or as bags of words (token F1). Only the output's first line is compared:
// the answer, before whatever a model adds after it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qevict {

// ASCII letters lowercased; ASCII punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~) removed, not
// replaced ("4,821" -> "4821", "o'clock" -> "oclock"); the whitespace-separated words "a", "an"
// and "the" (after both) dropped; words joined by one space. Other bytes (UTF-8 included) are
// kept as they are.
std::string SquadNormalize(std::string_view text);

// The words of SquadNormalize(text).
std::vector<std::string> SquadWords(std::string_view text);

// The first line of text that holds something other than whitespace (lines end at '\n'; a '\r'
// before it is whitespace), or "" when there is none.
std::string_view FirstNonBlankLine(std::string_view text);

// Whether SquadNormalize(output) equals SquadNormalize(answer) and is not empty: an answer
// that normalizes to nothing ("", "the", "...") never matches.
bool SquadExactMatch(std::string_view output, std::string_view answer);

// SQuAD's token F1 of output against answer, in [0, 1]: with c the number of words the two
// share (as multisets), precision c / |output words|, recall c / |answer words|, and F1 their
// harmonic mean, 2c / (|output words| + |answer words|). 0 when they share no word or either
// normalizes to nothing.
double SquadTokenF1(std::string_view output, std::string_view answer);

}  // namespace qevict
