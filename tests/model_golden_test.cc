// The forward pass against two independent implementations, on the same token ids:
//  - Hugging Face transformers (fp32, GGUF weights dequantized; tests/golden/logits_smollm2_hf.json)
//    vs qevict's exact path (MatMulExact: no activation quantization). Both compute the same
//    function in floating point, so logits must agree to float rounding (kExactTol) and the
//    greedy continuations must be identical at every step checked (the first kExactMaxGreedy).
//  - llama.cpp (tests/golden/logits_smollm2.json) and transformers vs qevict's fast path. The
//    fast path quantizes activations to 8 bits before the quantized dot products (llama.cpp
//    does too, not identically), which moves the top-k logits by about 0.2 on average and by up
//    to 1.2 at the worst position of this 30-layer model (measured: see the printed figures and
//    the constants below). Tolerances: kFastMeanTol on the mean, kFastTol on the worst logit.
//    Greedy continuations are compared teacher-forced on the reference's tokens: our argmax must
//    equal the reference's at every step except where the reference's top-2 margin is below
//    kFastTie (a margin smaller than the engines' noise can flip legitimately); the first such
//    step is chat_capital's first token, where llama.cpp's margin is 0.04.
// Goldens: scripts/gen_golden_logits.py and scripts/gen_golden_logits_hf.py.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/sampler.h"
#include "engine/session.h"
#include "tests/test_support.h"

namespace qevict {
namespace {

// The KV cache holds fp16 keys and values (transformers keeps fp32), so attention's summation
// order moves the logits by about 0.01: on chat_capital (position 9) the former hand-written
// AVX2 kernels land 0.016 from transformers, the portable reference kernels 0.026, the Highway
// kernels 0.024. The tolerance covers every valid kernel, with a margin.
constexpr double kExactTol = 0.035;
constexpr double kExactTie = 0.02;
// The exact path multiplies in scalar fp64; prompts above this length (the 1754-token case) are
// left to the fast-path comparison to keep the suite quick.
constexpr size_t kExactMaxPrompt = 64;
// ... and its teacher-forced greedy steps are checked for the first 24 tokens of each prompt (a
// decode step through the scalar fp64 output projection costs a Release run ~0.5 s with
// SmolLM2's 49k vocabulary, ~1 s with Gemma's 262k): where the fast path's comparisons check
// every step.
constexpr size_t kExactMaxGreedy = 24;
// The fast path's largest single top-k difference, at every SIMD level (measured: SmolLM2
// against llama.cpp 0.90 with the AVX-512 kernels, 0.88 with AVX2, 0.78 portable; against
// transformers 0.97 / 0.75 / 1.10; AVX2 reached 1.19 against llama.cpp with the kernels before
// the grouped projections). Activation quantization moves a logit by this much at the worst
// position of these 30 layers, so the bound cannot be tighter without failing a valid kernel;
// the mean below is where the fast path is held tight.
constexpr double kFastTol = 1.25;
// Gemma 3 against llama.cpp on the 1219-token prompt: 0.83 (AVX-512; 0.95 before the interleaved
// Q5_0 tiles), 1.34 (AVX2; 1.60 with the
// kernels before the grouped projections), 1.40 (portable); llama.cpp itself moves by up to 1.12
// there between batch sizes.
constexpr double kGemmaFastTol = 1.75;
// The mean top-k difference of the fast path (measured 0.17-0.25 at every level, both models):
// a systematic error in a kernel (a wrong scale, a dropped block) moves every logit.
constexpr double kFastMeanTol = 0.3;
constexpr double kFastTie = 0.5;

struct Agreement {
  double worst_logit_diff = 0.0;
  double sum_logit_diff = 0.0;  // over every compared top-k logit
  int64_t logits_compared = 0;
  double mean_logit_diff() const { return logits_compared > 0 ? sum_logit_diff / logits_compared : 0.0; }
  int greedy_checked = 0;  // teacher-forced greedy steps where both chose the same token
  int greedy_ties = 0;     // steps where they differ at a reference near-tie
};

// Compares one model configuration with one golden file; returns the figures it saw.
Agreement CompareWithGolden(const TransformerModel& model, const std::string& golden_path,
                            double tol, double tie_margin, size_t max_prompt_tokens,
                            size_t max_greedy_steps = SIZE_MAX) {
  const nlohmann::json golden = testing::ReadJson(golden_path);
  ThreadPool pool(2);
  Agreement a;
  for (const auto& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::vector<int32_t> tokens = c["tokens"].get<std::vector<int32_t>>();
    if (tokens.size() > max_prompt_tokens) continue;
    std::vector<int32_t> greedy = c["greedy"].get<std::vector<int32_t>>();
    if (greedy.size() > max_greedy_steps) greedy.resize(max_greedy_steps);
    const std::vector<double> margins = c["greedy_margins"].get<std::vector<double>>();
    SessionOptions so;
    so.n_ctx = static_cast<int64_t>(tokens.size() + greedy.size() + 1);
    Session session(model, pool, so, testing::FullCacheFactory());
    session.BeginRun(static_cast<int64_t>(tokens.size()), static_cast<int64_t>(greedy.size()));
    const std::vector<float> logits = session.PrefillAllLogits(tokens);
    const size_t n_vocab = static_cast<size_t>(model.config().n_vocab);
    for (const auto& top : c["top_logits"]) {
      const size_t p = top["position"].get<size_t>();
      const auto ids = top["ids"].get<std::vector<int>>();
      const auto want = top["logits"].get<std::vector<double>>();
      for (size_t r = 0; r < ids.size(); ++r) {
        const double diff = std::fabs(logits[p * n_vocab + ids[r]] - want[r]);
        a.worst_logit_diff = std::max(a.worst_logit_diff, diff);
        a.sum_logit_diff += diff;
        ++a.logits_compared;
        EXPECT_LE(diff, tol) << "position " << p << " token " << ids[r];
      }
    }
    // Greedy, teacher-forced on the reference's continuation: at every step our argmax must be
    // the reference's token unless the reference's own top-2 margin is a near-tie (then either
    // choice is legitimate); the reference's token is fed back either way, so all steps count.
    std::span<const float> last(logits.data() + (tokens.size() - 1) * n_vocab, n_vocab);
    for (size_t i = 0; i < greedy.size(); ++i) {
      const int32_t ours = Sampler::Argmax(last);
      if (ours == greedy[i]) {
        ++a.greedy_checked;
      } else {
        ++a.greedy_ties;
        std::printf("  %s: step %zu differs at a reference margin of %.3f\n",
                    c["name"].get<std::string>().c_str(), i, margins[i]);
        EXPECT_LT(margins[i], tie_margin) << "greedy step " << i << ": " << ours << " vs "
                                          << greedy[i] << ", reference margin " << margins[i];
      }
      if (i + 1 < greedy.size()) last = session.Decode(greedy[i]);
    }
  }
  return a;
}

void Report(const char* what, const Agreement& a) {
  std::printf("%s: top-k logit difference largest %.4f, mean %.4f over %lld logits; %d of %d "
              "greedy tokens identical (the rest at reference near-ties)\n", what,
              a.worst_logit_diff, a.mean_logit_diff(), static_cast<long long>(a.logits_compared),
              a.greedy_checked, a.greedy_checked + a.greedy_ties);
}

TEST(GoldenLogitsTest, ExactPathMatchesTransformersFp32) {
  if (testing::ReferenceModel() == nullptr) GTEST_SKIP() << "reference model not found";
  std::unique_ptr<TransformerModel> model = TransformerModel::Load(testing::ReferenceModelPath());
  model->set_exact_matmul(true);
  const Agreement a = CompareWithGolden(*model, "tests/golden/logits_smollm2_hf.json",
                                        kExactTol, kExactTie, kExactMaxPrompt, kExactMaxGreedy);
  Report("exact path vs transformers", a);
  EXPECT_EQ(a.greedy_ties, 0);
  // Every step checked of the four prompts up to kExactMaxPrompt: 8 + 3 x kExactMaxGreedy.
  EXPECT_EQ(a.greedy_checked, 8 + 3 * static_cast<int>(kExactMaxGreedy));
}

TEST(GoldenLogitsTest, FastPathMatchesLlamaCpp) {
  QEVICT_REQUIRE_MODEL(m);
  const Agreement a =
      CompareWithGolden(*m->model, "tests/golden/logits_smollm2.json", kFastTol, kFastTie,
                        SIZE_MAX);
  EXPECT_LE(a.mean_logit_diff(), kFastMeanTol);
  Report("fast path vs llama.cpp", a);
  EXPECT_GE(a.greedy_checked, 170);  // of 182; measured 174-177 across levels
}

// The fast path against transformers fp32: what the fast kernels' 8-bit activations cost by
// themselves, without a second engine's own quantization in the difference.
TEST(GoldenLogitsTest, FastPathMatchesTransformersFp32) {
  QEVICT_REQUIRE_MODEL(m);
  const Agreement a = CompareWithGolden(*m->model, "tests/golden/logits_smollm2_hf.json",
                                        kFastTol, kFastTie, SIZE_MAX);
  EXPECT_LE(a.mean_logit_diff(), kFastMeanTol);
  Report("fast path vs transformers", a);
  EXPECT_GE(a.greedy_checked, 170);  // of 182; measured 176-179 across levels
}

// Gemma 3 270M (Q4_K, Q5_0, Q6_K and Q8_0 weights; 15 sliding-window layers of 512 tokens and
// 3 global ones) against llama.cpp built from the same source: the 1219-token prompt crosses
// the window. Greedy continuations must be equal for all 64 tokens of every prompt unless
// llama.cpp's own margin is a near-tie.
TEST(GoldenLogitsTest, GemmaFastPathMatchesLlamaCpp) {
  QEVICT_REQUIRE_GEMMA(m);
  const Agreement a = CompareWithGolden(*m->model, "tests/golden/logits_gemma3_270m.json",
                                        kGemmaFastTol, kFastTie, SIZE_MAX);
  EXPECT_LE(a.mean_logit_diff(), kFastMeanTol);
  Report("gemma3 fast path vs llama.cpp", a);
  EXPECT_EQ(a.greedy_checked + a.greedy_ties, 3 * 64);
  EXPECT_GE(a.greedy_checked, 3 * 64 - 12);  // measured 185-188 (AVX-512, AVX2), 183 (portable)
}

// The exact path against transformers fp32 on the same Gemma 3 GGUF (dequantized weights; HF's
// GGUF loader, scripts/gen_golden_logits_hf.py), on the two short prompts.
TEST(GoldenLogitsTest, GemmaExactPathMatchesTransformersFp32) {
  if (testing::GemmaModel() == nullptr) GTEST_SKIP() << "Gemma 3 270M not found";
  std::unique_ptr<TransformerModel> model = TransformerModel::Load(testing::GemmaModelPath());
  model->set_exact_matmul(true);
  const Agreement a = CompareWithGolden(*model, "tests/golden/logits_gemma3_270m_hf.json",
                                        kExactTol, kExactTie, kExactMaxPrompt, kExactMaxGreedy);
  Report("gemma3 exact path vs transformers", a);
  // Every step checked, no near-tie needed.
  EXPECT_EQ(a.greedy_checked, 2 * static_cast<int>(kExactMaxGreedy));
}

TEST(GoldenLogitsTest, GemmaTokenizerMatchesGoldenPromptIds) {
  QEVICT_REQUIRE_GEMMA(m);
  const nlohmann::json golden = testing::ReadJson("tests/golden/logits_gemma3_270m.json");
  for (const auto& c : golden["cases"]) {
    EXPECT_EQ(m->EncodeRaw(c["text"].get<std::string>()), c["tokens"].get<std::vector<int32_t>>())
        << c["name"];
  }
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


// A prompt's logits, every position, bit for bit the same on 1, 2 and 3 threads: the matrix
// products split rows, and the per-token work between them (norms, biases, RoPE, the FFN's
// activation, residual sums) spreads a prompt batch's rows over the pool, each row computed
// as on one thread. On both reference models (SiLU and GELU, SmolLM2's 30 layers and Gemma 3's
// sliding-window ones), with a prompt of many batch rows.
void ExpectSameLogitsOnEveryThreadCount(const TransformerModel& model,
                                        const std::string& golden_path) {
  const nlohmann::json golden = testing::ReadJson(golden_path);
  std::vector<int32_t> tokens;
  for (const auto& c : golden["cases"]) {
    const auto t = c["tokens"].get<std::vector<int32_t>>();
    if (t.size() > tokens.size()) tokens = t;
  }
  if (tokens.size() > 600) tokens.resize(600);  // crosses Gemma 3's 512-token window
  ASSERT_GE(tokens.size(), 64u);
  std::vector<float> one_thread;
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    ThreadPool pool(threads);
    SessionOptions so;
    so.n_ctx = static_cast<int64_t>(tokens.size()) + 1;
    Session session(model, pool, so, testing::FullCacheFactory());
    session.BeginRun(static_cast<int64_t>(tokens.size()), 1);
    const std::vector<float> logits = session.PrefillAllLogits(tokens);
    if (threads == 1) {
      one_thread = logits;
      continue;
    }
    ASSERT_EQ(logits.size(), one_thread.size());
    EXPECT_EQ(std::memcmp(logits.data(), one_thread.data(), logits.size() * sizeof(float)), 0);
  }
}

TEST(ThreadCountTest, PromptLogitsAreTheSameOnEveryThreadCount) {
  QEVICT_REQUIRE_MODEL(m);
  ExpectSameLogitsOnEveryThreadCount(*m->model, "tests/golden/logits_smollm2.json");
}

TEST(ThreadCountTest, GemmaPromptLogitsAreTheSameOnEveryThreadCount) {
  QEVICT_REQUIRE_GEMMA(m);
  ExpectSameLogitsOnEveryThreadCount(*m->model, "tests/golden/logits_gemma3_270m.json");
}

}  // namespace
}  // namespace qevict
