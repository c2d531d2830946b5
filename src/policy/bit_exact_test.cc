// At budget 1.0, every policy that only evicts or tiers holds every token in fp16 and its
// attention is bit-identical to the full cache's: same random inputs, memcmp-equal outputs of
// every layer at every step (prompt chunks, generation, a second turn).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kv/full_cache.h"
#include "kv/kv_test_util.h"
#include "policy/registry.h"

namespace qevict {
namespace {

using testing::RunBatch;
using testing::SyntheticModel;

struct Case {
  const char* policy;
  int threads;
  bool scoring;  // a huge byte budget instead of 1.0: scores are accumulated, nothing evicted
  int prefill_chunk;
};

// The test's name says the case (policy, threads, scoring, chunk), so that CTest names stay
// the same from run to run (the default printed the bytes of the `policy` pointer).
std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.policy;
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  name += "_t" + std::to_string(info.param.threads);
  if (info.param.scoring) name += "_scoring";
  if (info.param.prefill_chunk > 0) name += "_chunk" + std::to_string(info.param.prefill_chunk);
  return name;
}

class BitExactAtFullBudget : public ::testing::TestWithParam<Case> {};

TEST_P(BitExactAtFullBudget, OutputsEqualFullCacheBitForBit) {
  const Case c = GetParam();
  const KvGeometry geo = testing::SmallGeometry(3, 9, 3, 64, 2048);
  const Rope rope(testing::TestRopeConfig(64), 4096);
  KvConfig config;
  config.policy = c.policy;
  if (c.scoring) config.budget_bytes = int64_t{1} << 40;
  config.prefill_chunk = c.prefill_chunk;
  auto tiered = CreateKvCache(config, geo, rope);
  FullCache full(geo, rope);
  ThreadPool pool(c.threads);
  SyntheticModel model(geo, 77, 2.0f);
  const int prompt = 700, gen = 90, turn2 = 60;
  tiered->BeginRun(prompt, gen);
  full.BeginRun(prompt, gen);
  std::vector<float> out_full, out_tiered;
  int64_t compared = 0;
  auto step = [&](int32_t first, int n, BatchKind kind) {
    RunBatch(full, model, first, n, kind, pool, &out_full);
    RunBatch(*tiered, model, first, n, kind, pool, &out_tiered);
    ASSERT_EQ(out_full.size(), out_tiered.size());
    ASSERT_EQ(std::memcmp(out_full.data(), out_tiered.data(), out_full.size() * sizeof(float)), 0)
        << c.policy << " differs at positions " << first << ".." << first + n - 1;
    ++compared;
  };
  int32_t p = 0;
  for (int n : {256, 256, 188}) {
    step(p, n, p + n == prompt ? BatchKind::kPromptEnd : BatchKind::kPromptChunk);
    p += n;
  }
  for (int i = 0; i < gen; ++i) step(p++, 1, BatchKind::kGenerated);
  step(p, turn2 - 1, BatchKind::kPromptChunk);  // a second user turn
  p += turn2 - 1;
  step(p++, 1, BatchKind::kPromptEnd);
  for (int i = 0; i < 30; ++i) step(p++, 1, BatchKind::kGenerated);
  const KvStats s = tiered->Stats();
  EXPECT_EQ(s.evictions, 0);
  EXPECT_EQ(s.quant_windows, 0);
  EXPECT_EQ(s.tokens_resident, p);
  EXPECT_EQ(compared, 3 + gen + 2 + 30);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, BitExactAtFullBudget,
    ::testing::Values(Case{"streaming", 2, false, 0}, Case{"h2o", 2, false, 0},
                      Case{"tova", 2, false, 0}, Case{"snapkv", 2, false, 0},
                      Case{"mikv", 2, false, 0}, Case{"qevict", 2, false, 0},
                      Case{"qevict", 1, false, 0}, Case{"qevict", 3, true, 0},
                      Case{"h2o", 3, true, 256}, Case{"snapkv", 2, true, 256},
                      Case{"mikv", 1, true, 0}, Case{"tova", 3, true, 0},
                      Case{"qevict-qa", 2, false, 0}, Case{"qevict-qa", 3, true, 0},
                      Case{"qevict-zip", 2, false, 0}, Case{"qevict-zip", 3, true, 0},
                      Case{"kvzip", 2, false, 0}),
    CaseName);

}  // namespace
}  // namespace qevict
