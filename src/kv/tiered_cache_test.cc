// Storage of the tiered cache: what demotion and promotion put in each tier (paper and exact
// recovery), byte accounting against the allocator, and memory returned on eviction.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kv/disk_cold_store.h"
#include "kv/kv_test_util.h"
#include "kv/tiered_cache.h"
#include "util/fp16.h"

namespace qevict {
namespace {

using testing::RunBatch;
using testing::SyntheticModel;

// Routing step r sets every band window to script(r, layer, index).
class StepScriptPolicy : public Policy {
 public:
  explicit StepScriptPolicy(std::function<Tier(int64_t, int, int64_t)> script)
      : script_(std::move(script)) {}
  void Route(const RoutingContext& context, Plan* plan) override {
    for (size_t l = 0; l < context.layers.size(); ++l) {
      const auto& band = context.layers[l].windows;
      for (size_t j = 0; j < band.size(); ++j) {
        plan->targets[l][j] = script_(context.routing_step, static_cast<int>(l), band[j].index);
      }
    }
  }

 private:
  std::function<Tier(int64_t, int, int64_t)> script_;
};

class TieredCacheTest : public ::testing::Test {
 protected:
  TieredCacheTest()
      : geo_(testing::SmallGeometry(2, 6, 2, 64, 1024)),
        rope_(testing::TestRopeConfig(64), 4096),
        model_(geo_, 3),
        pool_(2) {}

  std::unique_ptr<TieredCache> Make(std::function<Tier(int64_t, int, int64_t)> script, int bits,
                                    RecoveryFidelity recovery) {
    KvConfig config;
    config.bits = bits;
    config.recovery = recovery;
    config.budget_bytes = int64_t{1} << 40;
    config.route_every = 4;
    return std::make_unique<TieredCache>(config, geo_, rope_,
                                         std::make_unique<StepScriptPolicy>(std::move(script)));
  }

  // fp16(rope(k)) and fp16(v) of (layer, pos): what an fp16 window holds.
  void Original(int layer, int32_t pos, std::vector<float>* k, std::vector<float>* v) {
    std::vector<float> q(geo_.n_heads * geo_.head_dim);
    k->resize(geo_.n_kv_heads * geo_.head_dim);
    v->resize(k->size());
    model_.Activations(layer, pos, q.data(), k->data(), v->data());
    rope_.Apply(k->data(), geo_.n_kv_heads, geo_.head_dim, pos);
    for (float& x : *k) x = Fp16ToFp32(Fp32ToFp16(x));
    for (float& x : *v) x = Fp16ToFp32(Fp32ToFp16(x));
  }

  // Max |dense - original| over the tokens of band windows in tier `tier`.
  double MaxError(TieredCache& cache, int layer, Tier tier, int64_t* tokens_checked) {
    std::vector<float> keys, values, ok, ov;
    std::vector<int32_t> positions;
    cache.DenseLayer(layer, &keys, &values, &positions);
    const WindowView view = cache.View(layer);
    const int row = geo_.n_kv_heads * geo_.head_dim;
    double worst = 0.0;
    int64_t r = view.sink_tokens;
    for (const WindowInfo& w : view.windows) {
      if (w.tier == Tier::kEvicted) continue;
      for (int t = 0; t < w.n_tokens; ++t, ++r) {
        if (w.tier != tier || !w.in_band) continue;
        Original(layer, positions[r], &ok, &ov);
        for (int e = 0; e < row; ++e) {
          worst = std::max(worst, static_cast<double>(std::fabs(keys[r * row + e] - ok[e])));
          worst = std::max(worst, static_cast<double>(std::fabs(values[r * row + e] - ov[e])));
        }
        ++*tokens_checked;
      }
    }
    return worst;
  }

  KvGeometry geo_;
  Rope rope_;
  SyntheticModel model_;
  ThreadPool pool_;
};

TEST_F(TieredCacheTest, QuantizedWindowsHoldTheInputsWithinTheStepBound) {
  // N(0,1) data, 8 tokens per key group: a range of ~6 sigma at most -> half a step of 3/(2^b-1)
  // plus the RoPE mixing of two channels (sqrt 2) and fp16 rounding. Both RoPE conventions
  // (demotion un-rotates the stored keys, attention rotates them back).
  for (int config = 0; config < 6; ++config) {
    const int bits = 2 << (config % 3);
    rope_ = Rope(testing::TestRopeConfig(64, /*neox=*/config >= 3), 4096);
    auto cache = Make([](int64_t, int, int64_t) { return Tier::kQuant; }, bits,
                      RecoveryFidelity::kPaper);
    cache->BeginRun(300, 0);
    RunBatch(*cache, model_, 0, 300, BatchKind::kPromptEnd, pool_);
    for (int layer = 0; layer < geo_.n_layers; ++layer) {
      int64_t tokens = 0;
      const double err = MaxError(*cache, layer, Tier::kQuant, &tokens);
      EXPECT_GT(tokens, 200);
      EXPECT_LT(err, 1.5 * 8.0 / ((1 << bits) - 1) / 2.0 + 0.02) << bits << " bits " << config;
      EXPECT_GT(err, 0.0);
    }
  }
}

TEST_F(TieredCacheTest, ExactRecoveryRestoresTheFp16OriginalsPaperDoesNot) {
  // Routing 0 demotes every band window, routing 1 promotes them all back.
  auto script = [](int64_t step, int, int64_t) { return step == 0 ? Tier::kQuant : Tier::kFp16; };
  for (RecoveryFidelity recovery : {RecoveryFidelity::kExact, RecoveryFidelity::kPaper}) {
    auto cache = Make(script, 2, recovery);
    cache->BeginRun(200, 8);
    RunBatch(*cache, model_, 0, 200, BatchKind::kPromptEnd, pool_);
    const KvStats demoted = cache->Stats();
    EXPECT_GT(demoted.quant_windows, 0);
    if (recovery == RecoveryFidelity::kExact) {
      // Each window's fp16 block and its checksum on disk.
      EXPECT_EQ(demoted.cold_bytes,
                demoted.quant_windows * (2 * 2 * 8 * 64 * 2 + DiskColdStore::kChecksumBytes));
      EXPECT_EQ(demoted.cold_written_bytes, demoted.cold_bytes);
    } else {
      EXPECT_EQ(demoted.cold_bytes, 0);
    }
    for (int i = 0; i < 4; ++i) RunBatch(*cache, model_, 200 + i, 1, BatchKind::kGenerated, pool_);
    const KvStats promoted = cache->Stats();
    EXPECT_EQ(promoted.routing_steps, 2);
    EXPECT_EQ(promoted.quant_windows, 0);
    EXPECT_EQ(promoted.promotions, demoted.demotions);
    for (int layer = 0; layer < geo_.n_layers; ++layer) {
      int64_t tokens = 0;
      const double err = MaxError(*cache, layer, Tier::kFp16, &tokens);
      EXPECT_GT(tokens, 100);
      if (recovery == RecoveryFidelity::kExact) {
        EXPECT_EQ(err, 0.0);  // bit-exact fp16 originals
      } else {
        EXPECT_GT(err, 0.05);  // the quantization error stays
      }
    }
  }
}

// Exact recovery keeps its originals in the disk cold store (pwrite / pread, nothing mapped): a
// full disk at a demotion and a file truncated under the cache before a promotion are errors
// naming the file, not a SIGBUS.
TEST_F(TieredCacheTest, ExactRecoveryFaultsAreErrorsNamingTheFile) {
  auto script = [](int64_t step, int, int64_t) { return step == 0 ? Tier::kQuant : Tier::kFp16; };
  {
    auto cache = Make(script, 2, RecoveryFidelity::kExact);
    DiskColdStore* store = cache->cold_store_for_testing();
    ASSERT_NE(store, nullptr);
    int writes = 0;
    store->set_write_call_for_testing([&](int fd, const void* buf, size_t n, off_t off) -> ssize_t {
      if (++writes <= 2) return pwrite(fd, buf, n, off);
      errno = ENOSPC;
      return -1;
    });
    cache->BeginRun(200, 8);
    try {
      RunBatch(*cache, model_, 0, 200, BatchKind::kPromptEnd, pool_);
      ADD_FAILURE() << "a full disk at a demotion went unnoticed";
    } catch (const ColdStoreError& e) {
      EXPECT_EQ(e.kind(), ColdStoreError::Kind::kNoRoom);
      EXPECT_NE(std::string(e.what()).find(store->path() + " (unlinked)"), std::string::npos)
          << e.what();
    }
  }
  auto cache = Make(script, 2, RecoveryFidelity::kExact);
  cache->BeginRun(200, 8);
  RunBatch(*cache, model_, 0, 200, BatchKind::kPromptEnd, pool_);
  ASSERT_GT(cache->Stats().cold_bytes, 0);
  ASSERT_EQ(ftruncate(cache->cold_fd_for_testing(), 0), 0);  // as another process could
  try {
    for (int i = 0; i < 4; ++i) RunBatch(*cache, model_, 200 + i, 1, BatchKind::kGenerated, pool_);
    ADD_FAILURE() << "promotions from a truncated file went unnoticed";
  } catch (const ColdStoreError& e) {
    EXPECT_EQ(e.kind(), ColdStoreError::Kind::kDamaged);
    EXPECT_NE(std::string(e.what()).find("truncated from outside qevict"), std::string::npos)
        << e.what();
  }
}

TEST_F(TieredCacheTest, RoutingTimeIsCountedOnlyWhileRouting) {
  // KvStats::routing_seconds: nothing before the first routing step, something after it, and it
  // grows only at routing steps (every route_every generated tokens), not at the tokens between.
  auto script = [](int64_t, int, int64_t) { return Tier::kQuant; };
  auto cache = Make(script, 2, RecoveryFidelity::kExact);
  cache->BeginRun(120, 16);
  EXPECT_EQ(cache->Stats().routing_seconds, 0.0);
  RunBatch(*cache, model_, 0, 120, BatchKind::kPromptEnd, pool_);
  const KvStats after_prompt = cache->Stats();
  ASSERT_EQ(after_prompt.routing_steps, 1);
  EXPECT_GT(after_prompt.routing_seconds, 0.0);
  double seconds = after_prompt.routing_seconds;
  int64_t steps = after_prompt.routing_steps;
  for (int i = 0; i < 8; ++i) {
    RunBatch(*cache, model_, 120 + i, 1, BatchKind::kGenerated, pool_);
    const KvStats s = cache->Stats();
    if (s.routing_steps > steps) {
      EXPECT_GT(s.routing_seconds, seconds) << "token " << i;
    } else {
      EXPECT_EQ(s.routing_seconds, seconds) << "token " << i;
    }
    seconds = s.routing_seconds;
    steps = s.routing_steps;
  }
  EXPECT_GT(steps, after_prompt.routing_steps);
}

TEST_F(TieredCacheTest, ReDemotionReproducesTheFirstCodes) {
  // Q -> fp16 -> Q: the second quantization gives back the first one's contents exactly in exact
  // mode (same originals) and, in paper mode, up to fp16 rounding of the promoted copy.
  auto script = [](int64_t step, int, int64_t) { return step == 1 ? Tier::kFp16 : Tier::kQuant; };
  for (RecoveryFidelity recovery : {RecoveryFidelity::kExact, RecoveryFidelity::kPaper}) {
    auto cache = Make(script, 2, recovery);
    cache->BeginRun(120, 16);
    RunBatch(*cache, model_, 0, 120, BatchKind::kPromptEnd, pool_);
    std::vector<float> k1, v1, k2, v2;
    std::vector<int32_t> p1, p2;
    cache->DenseLayer(1, &k1, &v1, &p1);
    for (int i = 0; i < 8; ++i) RunBatch(*cache, model_, 120 + i, 1, BatchKind::kGenerated, pool_);
    EXPECT_EQ(cache->Stats().routing_steps, 3);
    cache->DenseLayer(1, &k2, &v2, &p2);
    const size_t n = std::min(k1.size(), k2.size());  // same band prefix
    const size_t band_floats = (5 + 8 * 10) * 2 * 64;
    ASSERT_GT(n, band_floats);
    double worst = 0.0;
    for (size_t e = 0; e < band_floats; ++e) {
      worst = std::max(worst, static_cast<double>(std::fabs(k1[e] - k2[e])));
      worst = std::max(worst, static_cast<double>(std::fabs(v1[e] - v2[e])));
    }
    if (recovery == RecoveryFidelity::kExact) {
      EXPECT_EQ(worst, 0.0);
    } else {
      EXPECT_LT(worst, 0.02);
    }
  }
}

TEST_F(TieredCacheTest, BytesMatchTheAllocatorAndEvictionReturnsMemory) {
  auto script = [](int64_t step, int layer, int64_t index) {
    if (step == 0) return (index + layer) % 3 == 0 ? Tier::kQuant : Tier::kFp16;
    return index % 2 == 0 ? Tier::kEvicted : Tier::kQuant;
  };
  auto cache = Make(script, 4, RecoveryFidelity::kExact);
  cache->BeginRun(400, 4);
  RunBatch(*cache, model_, 0, 400, BatchKind::kPromptEnd, pool_);
  KvStats s = cache->Stats();
  EXPECT_EQ(s.resident_bytes(), cache->AllocatorResidentBytes());
  EXPECT_EQ(s.resident_bytes(), cache->resident_bytes());
  EXPECT_GT(s.quant_bytes, 0);
  EXPECT_GT(s.cold_bytes, 0);
  const int64_t before = s.resident_bytes();
  for (int i = 0; i < 4; ++i) RunBatch(*cache, model_, 400 + i, 1, BatchKind::kGenerated, pool_);
  s = cache->Stats();
  EXPECT_EQ(s.resident_bytes(), cache->AllocatorResidentBytes());
  EXPECT_GT(s.evictions, 0);
  EXPECT_LT(s.resident_bytes(), before / 2);
  EXPECT_LE(s.fp16_bytes + s.quant_bytes, s.pool_reserved_bytes);
  EXPECT_EQ(s.peak_bytes, std::max(before, s.peak_bytes));
  EXPECT_GE(s.prefill_peak_bytes, 400 * geo_.fp16_bytes_per_token());
  // Sinks and recent windows stayed fp16; evicted windows report no bytes.
  for (int layer = 0; layer < geo_.n_layers; ++layer) {
    for (const WindowInfo& w : cache->View(layer).windows) {
      if (!w.in_band) {
        EXPECT_EQ(w.tier, Tier::kFp16);
      } else if (w.index % 2 == 0) {
        EXPECT_EQ(w.tier, Tier::kEvicted);
      }
    }
  }
}

}  // namespace
}  // namespace qevict
