// Micro benchmarks of the attention building blocks (kernels/attention.h) at the shapes decode
// and prefill give them over a 4096-token context: SmolLM2-135M (head_dim 64, GQA group 3: n_q 3
// per decode step, 24 per prefill block of 8 tokens) and Gemma 3 270M (head_dim 256, group 4:
// n_q 4 / 32), at every SIMD level the CPU supports.
//
// BM_Softmax: MaxOf and ExpShiftSum over a row of 4096 scores.
//
// BM_ScoreQuantKeys / BM_AccumulateQuantValues: the same 4096 tokens held as quantized windows
// (kv/quant_attention.h) of 8 tokens (KvConfig's default window), one call per window as
// TieredCache makes them, 2 or 4 bits; head_dim 64 with adjacent-pair RoPE (SmolLM2), 256 with
// NEOX RoPE (Gemma 3).
//
// BM_PrefillAttention: the whole causal attention of one 256-token prompt chunk at the end of a
// `context`-token prompt (kv/grouped_attention.h, as FullCache runs it: fp16 rows, one thread),
// with and without the window-mass observer the tiered cache adds when it scores windows.
// Gemma 3 270M's global layers (4 heads, 1 KV head, head_dim 256) and SmolLM2 (9 / 3 / 64).
//
// Counter: GFLOP/s = 2 * n_q * keys * head_dim per second (prefill: 4 * heads * keys seen *
// head_dim, scores and values). The label names the SIMD level and
// the Highway target that ran.
//
// Run: attention_bench --benchmark_counters_tabular=true [--benchmark_filter=...]; on a busy
// machine compare levels with --benchmark_repetitions=N --benchmark_enable_random_interleaving
// and read the medians.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/attention.h"
#include "kernels/attention_impl.h"
#include "kernels/rope.h"
#include "kv/kv_quantizer.h"
#include "kv/quant_attention.h"
#include "kv/grouped_attention.h"
#include "kv/window_mass.h"
#include "util/thread_pool.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

namespace qevict {
namespace {

constexpr int64_t kKeys = 4096;

struct Data {
  std::vector<float> q, p, scores, out;
  std::vector<uint16_t> k, v;
};

Data MakeData(int n_q, int head_dim) {
  Data data;
  uint32_t s = 12345;
  auto next = [&s] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / 16777216.0f - 0.5f;
  };
  data.q.resize(static_cast<size_t>(n_q) * head_dim);
  for (auto& x : data.q) x = next();
  data.k.resize(kKeys * head_dim);
  data.v.resize(kKeys * head_dim);
  for (auto& x : data.k) x = Fp32ToFp16(next());
  for (auto& x : data.v) x = Fp32ToFp16(next());
  data.p.resize(n_q * kKeys);
  for (auto& x : data.p) x = (next() + 0.5f) / kKeys;
  data.scores.resize(n_q * kKeys);
  data.out.assign(static_cast<size_t>(n_q) * head_dim, 0.0f);
  return data;
}

bool SetLevel(benchmark::State& state) {
  const auto level = static_cast<SimdLevel>(state.range(0));
  if (level > DetectedSimdLevel()) {
    state.SkipWithError("SIMD level not supported by this CPU");
    return false;
  }
  SetSimdLevel(level);
  const int64_t target = attention_impl::highway::ActiveTarget();
  state.SetLabel(std::string(SimdLevelName(level)) + " " +
                 (target != 0 ? hwy::TargetName(target) : "portable"));
  return true;
}

void SetFlops(benchmark::State& state, int n_q, int head_dim) {
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * static_cast<double>(n_q) * kKeys * head_dim,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// Args: SIMD level, n_q, head_dim.
void BM_ScoreFp16Keys(benchmark::State& state) {
  if (!SetLevel(state)) return;
  const int n_q = static_cast<int>(state.range(1)), hd = static_cast<int>(state.range(2));
  Data data = MakeData(n_q, hd);
  for (auto _ : state) {
    ScoreFp16Keys(data.q.data(), n_q, data.k.data(), hd, kKeys, hd, 0.125f, data.scores.data(),
                  kKeys);
    benchmark::DoNotOptimize(data.scores.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, n_q, hd);
}

void BM_AccumulateFp16Values(benchmark::State& state) {
  if (!SetLevel(state)) return;
  const int n_q = static_cast<int>(state.range(1)), hd = static_cast<int>(state.range(2));
  Data data = MakeData(n_q, hd);
  for (auto _ : state) {
    AccumulateFp16Values(data.p.data(), n_q, kKeys, data.v.data(), hd, kKeys, hd, data.out.data());
    benchmark::DoNotOptimize(data.out.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, n_q, hd);
}

// MaxOf then ExpShiftSum over one row of 4096 scores (the softmax of one query). Arg: level.
void BM_Softmax(benchmark::State& state) {
  if (!SetLevel(state)) return;
  const Data data = MakeData(1, 64);
  std::vector<float> scores(kKeys), row(kKeys);
  for (int64_t j = 0; j < kKeys; ++j) scores[j] = data.q[j % 64] * 8.0f + data.p[j];
  for (auto _ : state) {
    row = scores;
    benchmark::DoNotOptimize(ExpShiftSum(row.data(), kKeys, MaxOf(row.data(), kKeys)));
  }
  state.SetItemsProcessed(state.iterations() * kKeys);
}

// ---- Quantized windows.

constexpr int kWindow = 8;
constexpr int64_t kWindows = kKeys / kWindow;

struct QuantData {
  QuantLayout layout;
  std::vector<uint8_t> blocks;  // kWindows blocks of layout.bytes
  std::vector<int32_t> positions;
  std::unique_ptr<Rope> rope;
  Data dense;  // q, p, scores, out
};

QuantData MakeQuantData(int n_q, int head_dim, int bits) {
  QuantData data;
  data.dense = MakeData(n_q, head_dim);
  data.layout = QuantLayout::Make(1, kWindow, head_dim, bits, 32);
  data.blocks.resize(kWindows * data.layout.bytes);
  const int64_t window_floats = int64_t{kWindow} * head_dim;
  std::vector<float> keys(window_floats), values(window_floats);
  for (int64_t w = 0; w < kWindows; ++w) {
    for (int64_t i = 0; i < window_floats; ++i) {
      keys[i] = Fp16ToFp32(data.dense.k[w * window_floats + i]);
      values[i] = Fp16ToFp32(data.dense.v[w * window_floats + i]);
    }
    QuantizeWindow(data.layout, keys.data(), values.data(),
                   data.blocks.data() + w * data.layout.bytes);
  }
  data.positions.resize(kKeys);
  for (int64_t t = 0; t < kKeys; ++t) data.positions[t] = static_cast<int32_t>(t);
  RopeConfig rc;
  rc.rot_dims = head_dim;
  rc.neox = head_dim >= 256;
  data.rope = std::make_unique<Rope>(rc, kKeys);
  return data;
}

// Args: SIMD level, n_q, head_dim, bits.
void BM_ScoreQuantKeys(benchmark::State& state) {
  if (!SetLevel(state)) return;
  const int n_q = static_cast<int>(state.range(1)), hd = static_cast<int>(state.range(2));
  QuantData data = MakeQuantData(n_q, hd, static_cast<int>(state.range(3)));
  const QuantLayout& l = data.layout;
  for (auto _ : state) {
    for (int64_t w = 0; w < kWindows; ++w) {
      const uint8_t* block = data.blocks.data() + w * l.bytes;
      const int32_t* pos = data.positions.data() + w * kWindow;
      float* scores = data.dense.scores.data() + w * kWindow;
      ScoreQuantKeys(l, block, 0, 0, kWindow, pos, *data.rope, data.dense.q.data(), n_q, 0.125f,
                     scores, kKeys);
    }
    benchmark::DoNotOptimize(data.dense.scores.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, n_q, hd);
}

void BM_AccumulateQuantValues(benchmark::State& state) {
  if (!SetLevel(state)) return;
  const int n_q = static_cast<int>(state.range(1)), hd = static_cast<int>(state.range(2));
  QuantData data = MakeQuantData(n_q, hd, static_cast<int>(state.range(3)));
  const QuantLayout& l = data.layout;
  for (auto _ : state) {
    for (int64_t w = 0; w < kWindows; ++w) {
      const uint8_t* block = data.blocks.data() + w * l.bytes;
      const float* p = data.dense.p.data() + w * kWindow;
      AccumulateQuantValues(l, block, 0, 0, kWindow, p, n_q, kKeys, data.dense.out.data());
    }
    benchmark::DoNotOptimize(data.dense.out.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, n_q, hd);
}

void QuantShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"level", "n_q", "head_dim", "bits"});
  for (const auto& [n_q, hd] : {std::pair{3, 64}, {24, 64}, {4, 256}, {32, 256}}) {
    for (const int bits : {2, 4}) {
      for (int level = 0; level <= static_cast<int>(SimdLevel::kAvx512); ++level) {
        b->Args({level, n_q, hd, bits});
      }
    }
  }
}

void Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"level", "n_q", "head_dim"});
  for (const auto& [n_q, hd] : {std::pair{3, 64}, {24, 64}, {4, 256}, {32, 256}}) {
    for (int level = 0; level <= static_cast<int>(SimdLevel::kAvx512); ++level) {
      b->Args({level, n_q, hd});
    }
  }
}

// ---- Prefill attention of one chunk (the grouped driver, softmax and all).

// Args: context, heads, KV heads, head_dim, observer (0/1).
void BM_PrefillAttention(benchmark::State& state) {
  const int64_t context = state.range(0);
  KvGeometry geo;
  geo.n_layers = 1;
  geo.n_heads = static_cast<int>(state.range(1));
  geo.n_kv_heads = static_cast<int>(state.range(2));
  geo.head_dim = static_cast<int>(state.range(3));
  geo.max_tokens = context;
  const bool observe = state.range(4) != 0;
  constexpr int kChunk = 256;
  const int hd = geo.head_dim;
  uint32_t s = 777;
  auto next = [&s] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / 16777216.0f - 0.5f;
  };
  std::vector<uint16_t> k(context * geo.n_kv_heads * hd), v(k.size());  // [kv head][token][hd]
  for (auto& x : k) x = Fp32ToFp16(2.0f * next());
  for (auto& x : v) x = Fp32ToFp16(next());
  std::vector<float> q(static_cast<size_t>(kChunk) * geo.n_heads * hd), out(q.size());
  for (auto& x : q) x = 2.0f * next();
  std::vector<int64_t> visible(kChunk);
  double keys_seen = 0;
  for (int i = 0; i < kChunk; ++i) {
    visible[i] = context - kChunk + i + 1;
    keys_seen += static_cast<double>(visible[i]);
  }
  ThreadPool pool(1);
  const auto row = [&](int h, int64_t t) { return k.data() + (h * context + t) * hd; };
  auto score = [&](int h, int64_t b, int64_t e, const float* qg, int n_q, float* sc, int64_t ld,
                   float scale) { ScoreFp16Keys(qg, n_q, row(h, b), hd, e - b, hd, scale, sc, ld); };
  auto accumulate = [&](int h, int64_t b, int64_t e, const float* p, int n_q, int64_t ld,
                        float* acc) {
    AccumulateFp16Values(p, n_q, ld, v.data() + (row(h, b) - k.data()), hd, e - b, hd, acc);
  };
  WindowMassObserver mass;
  mass.Configure(geo.n_heads, geo.n_kv_heads, 8, 2 + context / 8);
  NoAttentionObserver none;
  for (auto _ : state) {
    if (observe) {
      mass.Begin(5, 1 + (context - 5 + 7) / 8);
      GroupedAttentionOverPrefix(geo, kChunk, visible.data(), q.data(), out.data(), pool, score,
                                 accumulate, mass);
      mass.Finish();
    } else {
      GroupedAttentionOverPrefix(geo, kChunk, visible.data(), q.data(), out.data(), pool, score,
                                 accumulate, none);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(4e-9 * geo.n_heads * keys_seen * hd,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_PrefillAttention)
    ->ArgNames({"context", "heads", "kv_heads", "head_dim", "observer"})
    ->Args({4096, 4, 1, 256, 0})
    ->Args({16384, 4, 1, 256, 0})
    ->Args({16384, 4, 1, 256, 1})
    ->Args({4096, 9, 3, 64, 0})
    ->Args({4096, 9, 3, 64, 1})
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_ScoreFp16Keys)->Apply(Shapes);
BENCHMARK(BM_AccumulateFp16Values)->Apply(Shapes);
BENCHMARK(BM_ScoreQuantKeys)->Apply(QuantShapes);
BENCHMARK(BM_AccumulateQuantValues)->Apply(QuantShapes);
BENCHMARK(BM_Softmax)->ArgName("level")->DenseRange(0, static_cast<int>(SimdLevel::kAvx512));

}  // namespace
}  // namespace qevict

BENCHMARK_MAIN();
