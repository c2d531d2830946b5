// Every supported architecture against Hugging Face transformers (fp32, eager attention) on tiny
// randomly initialised checkpoints converted with llama.cpp's own converter
// (tests/golden/arch/README.md; scripts/gen_arch_golden.py). The checkpoints switch on each
// family's options (QKV bias, Q/K norms, fused QKV and gate-up, Gemma's interleaved sliding and
// global layers with their own RoPE bases, post-norms, GeGLU, embedding scale and logit
// soft-capping) and the 64-token prompts are 8 times the sliding window, so a mistake in any of
// them moves the logits by 0.5 to 18 (the JSONs' sensitivity_max_abs_diff).
//
// The exact path (fp32 activations, fp64 dot products) differs from HF only by the fp16 storage
// of keys and values: kTol bounds that. Each prompt is fed in batches of 64 (one batch), 5 (ring
// and batch straddling) and 1 (decode), through the full cache and through the tiered cache
// without a budget (bit-identical to full while every window is fp16).
#include <cmath>
#include <cstdint>
#include <string>

#include "engine/session.h"
#include "kv/interleaved_cache.h"
#include "policy/registry.h"
#include "tests/test_support.h"

namespace qevict {
namespace {

constexpr double kTol = 0.03;

struct Case {
  std::string name;        // of the GGUF
  std::string family;      // of the JSON
  std::string logits_key;  // "logits", or the no-window variant llama.cpp computes
  int sliding_layers;      // the engine must see these
};

class ArchGoldenTest : public ::testing::TestWithParam<Case> {};

double MaxDiff(const std::vector<float>& got, const nlohmann::json& want, size_t n_vocab) {
  double worst = 0.0;
  for (size_t p = 0; p < want.size(); ++p) {
    const auto row = want[p].get<std::vector<double>>();
    EXPECT_EQ(row.size(), n_vocab);
    for (size_t v = 0; v < row.size(); ++v) {
      worst = std::max(worst, std::fabs(got[p * n_vocab + v] - row[v]));
    }
  }
  return worst;
}

TEST_P(ArchGoldenTest, LogitsMatchTransformers) {
  const Case& c = GetParam();
  const nlohmann::json golden = testing::ReadJson("tests/golden/arch/" + c.family + ".json");
  const auto model =
      TransformerModel::Load(testing::SourcePath("tests/golden/arch/" + c.name + ".gguf"));
  model->set_exact_matmul(true);
  EXPECT_EQ(model->config().arch, golden["arch"].get<std::string>());
  EXPECT_EQ(model->config().n_sliding_layers(), c.sliding_layers);
  const std::vector<int32_t> tokens = golden["tokens"].get<std::vector<int32_t>>();
  const nlohmann::json& want = golden[c.logits_key];
  ASSERT_EQ(want.size(), tokens.size());
  const size_t n_vocab = static_cast<size_t>(model->config().n_vocab);
  ThreadPool pool(2);
  for (const std::string policy : {"full", "qevict"}) {
    for (int chunk : {64, 5, 1}) {
      SCOPED_TRACE(policy + ", batches of " + std::to_string(chunk));
      SessionOptions so;
      so.n_ctx = static_cast<int64_t>(tokens.size());
      so.prefill_chunk = chunk;
      KvConfig config;
      config.policy = policy;
      Session session(*model, pool, so, [&](const KvGeometry& g, const Rope& r) {
        return CreateKvCache(config, g, r);
      });
      session.BeginRun(static_cast<int64_t>(tokens.size()), 0);
      const std::vector<float> logits = session.PrefillAllLogits(tokens);
      const double worst = MaxDiff(logits, want, n_vocab);
      EXPECT_LT(worst, kTol);
      std::printf("%s %s batch %d: max |qevict - HF| = %.2e\n", c.name.c_str(),
                  policy.c_str(), chunk, worst);
      // The rings hold exactly the window: a ring per sliding layer, reported apart.
      const KvStats stats = session.cache().Stats();
      EXPECT_EQ(stats.sliding_layers, c.sliding_layers);
      if (c.sliding_layers > 0) {
        const int64_t window = model->config().sliding_window;
        const int64_t per_token = int64_t{2} * model->config().n_kv_heads *
                                  model->config().head_dim * 2;
        EXPECT_EQ(stats.sliding_bytes, c.sliding_layers * window * per_token);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ArchGoldenTest,
                         ::testing::Values(
                             Case{"llama", "llama", "logits", 0},
                             // llama.cpp's converter drops Mistral's window, so its GGUF is full
                             // attention; mistral_swa.gguf adds llama.attention.sliding_window.
                             Case{"mistral", "mistral", "logits_full_attention", 0},
                             Case{"mistral_swa", "mistral", "logits", 2},
                             Case{"qwen2", "qwen2", "logits", 0},
                             Case{"qwen3", "qwen3", "logits", 0},
                             Case{"gemma3", "gemma3", "logits", 6},
                             Case{"phi3", "phi3", "logits", 0}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace qevict
