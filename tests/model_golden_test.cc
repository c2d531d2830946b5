// The forward pass against an independent implementation: llama.cpp's logits and greedy
// continuations for the same token ids (tests/golden/logits_smollm2.json, made by
// scripts/gen_golden_logits.py).
//
// Tolerance: |ours - llama.cpp| <= kAbsTol + kRelTol * |llama.cpp| per top-k logit. Both engines
// quantize activations to 8 bits before the Q4_1 products but round and accumulate in different
// orders, so logits differ slightly; the same argmax is required wherever llama.cpp's top-2
// margin exceeds kTieMargin (below that the order is a near-tie and may legitimately flip).
#include <cmath>

#include "engine/sampler.h"
#include "engine/session.h"
#include "tests/test_support.h"

namespace qevict {
namespace {

constexpr double kAbsTol = 0.15;
constexpr double kRelTol = 0.02;
constexpr double kTieMargin = 0.1;


TEST(GoldenLogitsTest, TopLogitsAndGreedyContinuationMatchLlamaCpp) {
  QEVICT_REQUIRE_MODEL(m);
  const nlohmann::json golden = testing::ReadJson("tests/golden/logits_smollm2.json");
  ThreadPool pool(2);
  double worst = 0.0;
  for (const auto& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::vector<int32_t> tokens = c["tokens"].get<std::vector<int32_t>>();
    const std::vector<int32_t> greedy = c["greedy"].get<std::vector<int32_t>>();
    const std::vector<double> margins = c["greedy_margins"].get<std::vector<double>>();
    SessionOptions so;
    so.n_ctx = static_cast<int64_t>(tokens.size() + greedy.size() + 1);
    Session session(*m->model, pool, so, testing::FullCacheFactory());
    session.BeginRun(static_cast<int64_t>(tokens.size()), static_cast<int64_t>(greedy.size()));
    const std::vector<float> logits = session.PrefillAllLogits(tokens);
    const size_t n_vocab = static_cast<size_t>(m->model->config().n_vocab);
    for (const auto& top : c["top_logits"]) {
      const size_t p = top["position"].get<size_t>();
      const auto ids = top["ids"].get<std::vector<int>>();
      const auto want = top["logits"].get<std::vector<double>>();
      for (size_t r = 0; r < ids.size(); ++r) {
        const double got = logits[p * n_vocab + ids[r]];
        const double diff = std::fabs(got - want[r]);
        worst = std::max(worst, diff);
        EXPECT_LE(diff, kAbsTol + kRelTol * std::fabs(want[r]))
            << "position " << p << " token " << ids[r];
      }
    }
    // Greedy continuation: feed our own choices, require llama.cpp's token at each step until
    // the first near-tie (after which the two sequences may legitimately diverge).
    std::span<const float> last(logits.data() + (tokens.size() - 1) * n_vocab, n_vocab);
    for (size_t i = 0; i < greedy.size(); ++i) {
      const int32_t ours = Sampler::Argmax(last);
      if (margins[i] < kTieMargin) break;
      ASSERT_EQ(ours, greedy[i]) << "greedy step " << i;
      if (i + 1 < greedy.size()) last = session.Decode(ours);
    }
  }
  std::printf("largest top-k logit difference vs llama.cpp: %.4f\n", worst);
}

TEST(GoldenLogitsTest, TokenizerMatchesGoldenPromptIds) {
  QEVICT_REQUIRE_MODEL(m);
  const nlohmann::json golden = testing::ReadJson("tests/golden/logits_smollm2.json");
  for (const auto& c : golden["cases"]) {
    EXPECT_EQ(m->tokenizer->Encode(c["text"].get<std::string>(), false, true),
              c["tokens"].get<std::vector<int32_t>>())
        << c["name"];
  }
}

}  // namespace
}  // namespace qevict
