// recall_rank=scan (docs/kv-cache.md, "Cold tier and recall"): a prompt ranks every cold window
// by its exact attention, read back from the cold file in chunks. The case a digest cannot see:
// one key in a window stands far above everything else for the question, while the window's
// other keys cancel its mean, and decoy windows whose every key leans a little towards the
// question have the larger mean. The scan recalls the needle; a digest shortlist of the same
// cache picks the decoys and leaves it cold.
#include <gtest/gtest.h>

#include "kv/kv_test_util.h"
#include "kv/tiered_cache.h"
#include "policy/registry.h"

namespace qevict {
namespace {

constexpr int kPrompt = 800;    // the document: about 100 windows, more than one chunk of 64
constexpr int kQuestion = 16;   // a later prompt
constexpr int kNeedle = 30;     // the needle's window
constexpr float kKey = 8.0f;    // the needle's one large key component

struct Outcome {
  int layers_recalled = 0;  // layers where the needle's window is fp16 after the question
  int layers = 0;
  int64_t score_read_bytes = 0;
  int64_t cold_bytes_before = 0;  // the cold windows' blocks when the question came, all layers
};

Outcome AskForTheNeedle(bool scan) {
  const KvGeometry geo = testing::SmallGeometry(2, 4, 2, 32, 4096);
  const Rope rope(testing::TestRopeConfig(32), 8192);
  KvConfig config;
  config.policy = "qevict-recall";
  config.budget = 0.15;
  config.prefill_chunk = 0;
  config.recall_shared = 0;
  config.recall_scan = scan;
  config.recall_candidates = 4;
  // The fixed fp16 share: the test is about which window ranks first. (The least-loss split
  // would give these decoys, which hold most of the question's attention between them, the
  // whole budget in 2 bits and no window fp16.)
  config.set_option("recall_split_error", 0.0);
  const int hd = geo.head_dim;
  // The channel pair of RoPE's slowest frequency (hd - 2, hd - 1): a key there keeps its
  // direction at every position, so the question's query below meets it wherever it sits.
  const int c = hd - 2;
  const int first = config.sinks + kNeedle * config.window;
  testing::SyntheticModel model(geo, 11, 1.0f);
  model.key_override = [&](int, int32_t pos, float* k) {
    for (int g = 0; g < geo.n_kv_heads; ++g) {
      float* kg = k + g * hd;
      kg[c + 1] = 0.0f;
      if (pos >= first && pos < first + config.window) {
        // One key far above, the others cancelling it: the window's mean is 0 on c.
        kg[c] = pos == first ? kKey : -kKey / static_cast<float>(config.window - 1);
      } else if (pos >= config.sinks && pos < kPrompt - 64 &&
                 ((pos - config.sinks) / config.window) % 2 == 0) {
        kg[c] = kKey / 3.0f;  // decoys: every key a third of the needle's, so a larger mean
      } else {
        kg[c] = 0.0f;
      }
    }
  };
  // The document's queries never look along c (what goes cold is decided by the rest); the
  // question's look only along it.
  model.query_override = [&](int, int32_t pos, float* q) {
    for (int h = 0; h < geo.n_heads; ++h) {
      float* qh = q + h * hd;
      if (pos < kPrompt) {
        qh[c] = 0.0f;
        continue;
      }
      for (int i = 0; i < hd; ++i) qh[i] = 0.0f;
      qh[c] = 3.0f;
    }
  };
  std::unique_ptr<KvCache> owned = CreateKvCache(config, geo, rope);
  TieredCache& cache = static_cast<TieredCache&>(*owned);
  ThreadPool pool(2);
  cache.BeginRun(kPrompt, 4);
  testing::RunBatch(cache, model, 0, kPrompt, BatchKind::kPromptEnd, pool);
  Outcome out;
  const int64_t block_bytes = int64_t{2} * geo.n_kv_heads * config.window * hd * 2;
  for (int layer = 0; layer < geo.n_layers; ++layer) {
    EXPECT_EQ(cache.View(layer).windows[kNeedle].tier, Tier::kCold)
        << "layer " << layer << ": the needle must be cold before the question for this test";
    for (const auto& w : cache.View(layer).windows) {
      out.cold_bytes_before += w.tier == Tier::kCold ? block_bytes : 0;
    }
  }
  const int64_t read_before = cache.Stats().cold_score_read_bytes;
  cache.ContinueRun(kQuestion, 4);
  testing::RunBatch(cache, model, kPrompt, kQuestion, BatchKind::kPromptEnd, pool);
  EXPECT_NO_THROW(cache.CheckInvariants());
  EXPECT_LE(cache.Stats().resident_bytes(), *cache.budget());
  for (int layer = 0; layer < geo.n_layers; ++layer) {
    out.layers_recalled += cache.View(layer).windows[kNeedle].tier == Tier::kFp16;
    ++out.layers;
  }
  out.score_read_bytes = cache.Stats().cold_score_read_bytes - read_before;
  return out;
}

TEST(RecallScan, AScanRecallsTheKeyAWindowMeanHides) {
  const Outcome scan = AskForTheNeedle(/*scan=*/true);
  EXPECT_EQ(scan.layers_recalled, scan.layers);
  const Outcome digest = AskForTheNeedle(/*scan=*/false);
  EXPECT_EQ(digest.layers_recalled, 0) << "the digest shortlist found the needle: the test no "
                                          "longer shows what the scan adds";
  // The scan read every cold window (more than one chunk), the shortlist a few.
  EXPECT_GT(scan.score_read_bytes, 8 * digest.score_read_bytes);
}

// The question's end ranks by the same queries its scan before attending ranked, against the
// same windows (a few moved from cold to fp16 since): those scores stand, and the cold file is
// read once per question, not twice.
TEST(RecallScan, AQuestionReadsTheColdFileOnce) {
  const Outcome scan = AskForTheNeedle(/*scan=*/true);
  ASSERT_GT(scan.cold_bytes_before, 0);
  EXPECT_EQ(scan.score_read_bytes, scan.cold_bytes_before);
  EXPECT_EQ(scan.layers_recalled, scan.layers);
}

}  // namespace
}  // namespace qevict
