// Gemma 3's tokenizer (SentencePiece-style BPE over 262144 pieces, byte fallback, no space
// prefix, <start_of_turn>/<end_of_turn> specials) against llama.cpp's on the same GGUF:
// tests/golden/tokenizer_gemma3.json (scripts/gen_tokenizer_golden.py --model gemma3).
#include <string>
#include <vector>

#include "engine/session.h"
#include "tests/test_support.h"

namespace qevict {
namespace {

TEST(GemmaTokenizerTest, MatchesLlamaCppIds) {
  QEVICT_REQUIRE_GEMMA(m);
  const nlohmann::json golden = testing::ReadJson("tests/golden/tokenizer_gemma3.json");
  const Tokenizer& t = *m->tokenizer;
  const nlohmann::json& vocab = golden["vocab"];
  EXPECT_EQ(t.bos(), vocab["bos"]["id"].get<int>());
  EXPECT_EQ(t.eos(), vocab["eos"]["id"].get<int>());
  EXPECT_EQ(t.add_bos(), vocab["add_bos"].get<bool>());
  for (const nlohmann::json& eog : vocab["eog"]) {
    EXPECT_TRUE(t.IsEndOfGeneration(eog["id"].get<int>())) << eog["text"];
  }
  ASSERT_GE(golden["cases"].size(), 100u);
  int checked = 0;
  for (const nlohmann::json& c : golden["cases"]) {
    const std::string text = c["text"];
    const bool parse_special = c["parse_special"];
    const std::vector<int32_t> ids = t.Encode(text, c["add_bos"].get<bool>(), parse_special);
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>())
        << nlohmann::json(text).dump() << " parse_special=" << parse_special;
    // "\xE2\x96\x81" (SentencePiece's space marker) written in the text decodes to a space.
    if (!c["add_bos"].get<bool>() && text.find("\xE2\x96\x81") == std::string::npos) {
      EXPECT_EQ(t.Decode(ids, /*render_special=*/true), text) << nlohmann::json(text).dump();
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(golden["cases"].size()));
}

}  // namespace
}  // namespace qevict
