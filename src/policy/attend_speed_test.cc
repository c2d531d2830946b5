// Decode-step timing of the full cache against tiered caches on the SmolLM2-135M geometry
// (30 layers, 9 query heads, 3 KV heads, head_dim 64) at 4k and 8k tokens of context. A timing
// report, not an assertion: skipped unless QEVICT_KV_BENCH=1. QEVICT_KV_BENCH_THREADS sets the
// thread count (default 1), QEVICT_KV_BENCH_POLICY=name limits the tiered runs to one policy.
// Run:
//   QEVICT_KV_BENCH=1 ./policy_test --gtest_filter='AttendSpeed*'
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_test_util.h"
#include "policy/registry.h"

namespace qevict {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// A table of N(0,1) numbers read at pseudo-random offsets stands in for activations.
class Activations {
 public:
  Activations() : table_(1 << 20) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (float& x : table_) x = normal(rng);
  }
  const float* Slice(int64_t key, size_t n) const {
    return table_.data() + (static_cast<uint64_t>(key) * 2654435761u) % (table_.size() - n);
  }

 private:
  std::vector<float> table_;
};

// A cache filled with `context` prompt tokens (stored without attention, then routed).
std::unique_ptr<KvCache> Filled(const KvConfig& config, const KvGeometry& geo, const Rope& rope,
                                int context, int max_new, const Activations& act,
                                ThreadPool& pool) {
  auto cache = CreateKvCache(config, geo, rope);
  const int kv = geo.n_kv_heads * geo.head_dim;
  cache->BeginRun(context, max_new);
  const int chunk = 512;
  std::vector<int32_t> pos(chunk);
  std::vector<float> k(static_cast<size_t>(chunk) * kv), v(k.size());
  for (int p0 = 0; p0 < context; p0 += chunk) {
    const int n = std::min(chunk, context - p0);
    for (int layer = 0; layer < geo.n_layers; ++layer) {
      for (int i = 0; i < n; ++i) {
        pos[i] = p0 + i;
        std::copy_n(act.Slice(layer * 100003 + pos[i], kv), kv, k.begin() + i * kv);
        std::copy_n(act.Slice(layer * 100019 + pos[i] + 7, kv), kv, v.begin() + i * kv);
      }
      cache->Store(layer, n, pos.data(), k.data(), v.data());
    }
    cache->EndBatch(p0 + n == context ? BatchKind::kPromptEnd : BatchKind::kPromptChunk, pool);
  }
  return cache;
}

struct StepTime {
  Clock::duration attend{};  // Attend over all layers
  Clock::duration step{};    // Store + Attend + EndBatch
};

// One decode step at position p; accumulates its times into t.
void DecodeStep(KvCache& cache, const KvGeometry& geo, int32_t p, const Activations& act,
                ThreadPool& pool, StepTime* t) {
  const int kv = geo.n_kv_heads * geo.head_dim, qn = geo.n_heads * geo.head_dim;
  thread_local std::vector<float> out;
  out.resize(qn);
  const auto start = Clock::now();
  for (int layer = 0; layer < geo.n_layers; ++layer) {
    cache.Store(layer, 1, &p, act.Slice(layer * 7 + p, kv), act.Slice(layer * 11 + p, kv));
    const auto a = Clock::now();
    cache.Attend(layer, 1, &p, act.Slice(layer * 13 + p, qn), out.data(), pool);
    t->attend += Clock::now() - a;
  }
  cache.EndBatch(BatchKind::kGenerated, pool);
  t->step += Clock::now() - start;
}

TEST(AttendSpeed, FullVersusTieredOnSmolLm2Geometry) {
  if (std::getenv("QEVICT_KV_BENCH") == nullptr) GTEST_SKIP() << "set QEVICT_KV_BENCH=1";
  const char* threads_env = std::getenv("QEVICT_KV_BENCH_THREADS");
  const char* only = std::getenv("QEVICT_KV_BENCH_POLICY");
  ThreadPool pool(threads_env != nullptr ? std::atoi(threads_env) : 1);
  const int steps = 64, warmup = 4;
  const Activations act;
  std::printf("threads %d; %d decode steps after the context, full and tiered alternating step by "
              "step; means per step over 30 layers\n", pool.size(), steps);
  std::printf("%-7s %-9s %6s %10s %10s %8s %8s %8s %9s  %s\n", "context", "policy", "budget",
              "full_att", "tier_att", "speedup", "full_stp", "tier_stp", "resid_MiB",
              "fp16/quant windows, routings, promotions, demotions");
  for (int context : {4096, 8192}) {
    const int64_t max_tokens = context + 16 * (steps + warmup);
    const KvGeometry geo = testing::SmallGeometry(30, 9, 3, 64, max_tokens);
    const Rope rope(testing::TestRopeConfig(64), max_tokens);
    KvConfig full_config;
    full_config.policy = "full";
    auto full = Filled(full_config, geo, rope, context, steps, act, pool);
    int32_t full_pos = context;
    for (const char* policy : {"qevict", "h2o", "kivi"}) {
      if (only != nullptr && std::string(only) != policy) continue;
      for (double budget : {0.05, 0.1, 0.2, 1.0}) {
        if (std::string(policy) != "qevict" && budget != 0.1) continue;
        KvConfig config;
        config.policy = policy;
        config.budget = std::string(policy) == "kivi" ? 0.3 : budget;
        auto tiered = Filled(config, geo, rope, context, steps, act, pool);
        StepTime tf, tt;
        for (int s = 0; s < steps + warmup; ++s) {
          StepTime f, t;
          DecodeStep(*full, geo, full_pos++, act, pool, &f);
          DecodeStep(*tiered, geo, context + s, act, pool, &t);
          if (s >= warmup) {
            tf.attend += f.attend;
            tf.step += f.step;
            tt.attend += t.attend;
            tt.step += t.step;
          }
        }
        const KvStats st = tiered->Stats();
        std::printf("%-7d %-9s %6.2f %10.3f %10.3f %7.2fx %8.3f %8.3f %9.2f  %lld/%lld, %lld, %lld, %lld%s\n",
                    context, policy, config.budget, Ms(tf.attend) / steps, Ms(tt.attend) / steps,
                    Ms(tf.attend) / Ms(tt.attend), Ms(tf.step) / steps, Ms(tt.step) / steps,
                    st.resident_bytes() / 1048576.0, static_cast<long long>(st.fp16_windows),
                    static_cast<long long>(st.quant_windows),
                    static_cast<long long>(st.routing_steps),
                    static_cast<long long>(st.promotions), static_cast<long long>(st.demotions),
                    st.infeasible ? " (infeasible)" : "");
      }
    }
  }
}

}  // namespace
}  // namespace qevict
