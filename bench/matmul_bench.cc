// Micro benchmarks of MatMul: decode-shaped (1 token) and prefill-shaped (64 tokens) products
// for the SmolLM2-135M shapes, at every SIMD level the CPU supports, on 1 and 2 threads.
//
// Counters: weight_GB/s = weight bytes read per second (one pass over the matrix per call),
// GFLOP/s = 2 * rows * cols * tokens per second. "cold" variants rotate through enough copies
// of the matrix to exceed the last-level cache, so weights come from DRAM as in a real decode
// step over a model larger than the cache; BM_ReadBandwidth is the plain streaming-read rate
// of the machine for comparison.
//
// Run: matmul_bench --benchmark_counters_tabular=true [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/matmul.h"
#include "bench/bench_weights.h"
#include "quant/activations.h"
#include "quant/quantize.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace qevict {
namespace {

constexpr size_t kColdBytes = size_t{1} << 30;  // well above the last-level cache

using bench::AlignedBytes;
using bench::Weights;

ThreadPool& Pool(int threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return *p;
}

void BM_MatMul(benchmark::State& state, GgmlType type, int64_t rows, int64_t cols) {
  const auto level = static_cast<SimdLevel>(state.range(0));
  const int64_t n_tokens = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const bool cold = state.range(3) != 0;
  if (level > DetectedSimdLevel()) {
    state.SkipWithError("SIMD level not supported by this CPU");
    return;
  }
  SetSimdLevel(level);
  const AlignedBytes& hot = Weights(type, rows, cols);
  const size_t matrix_bytes = hot.size;
  // Cold: copies of the matrix filling kColdBytes, visited in turn (one set kept at a time).
  static std::unique_ptr<AlignedBytes> copies;
  static const uint8_t* copies_of = nullptr;
  int64_t n_copies = 1;
  if (cold) {
    n_copies = static_cast<int64_t>(kColdBytes / matrix_bytes) + 1;
    if (copies_of != hot.data) {
      copies.reset();
      copies = std::make_unique<AlignedBytes>(matrix_bytes * n_copies);
      for (int64_t i = 0; i < n_copies; ++i) std::memcpy(copies->data + i * matrix_bytes, hot.data, matrix_bytes);
      copies_of = hot.data;
    }
  }
  std::vector<float> x(n_tokens * cols), y(n_tokens * rows);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  ThreadPool& pool = Pool(threads);
  WeightView w{type, rows, cols, hot.data, RowBytes(type, cols)};
  int64_t next = 0;
  for (auto _ : state) {
    if (cold) {
      w.data = copies->data + next * matrix_bytes;
      next = (next + 1) % n_copies;
    }
    MatMul(w, x.data(), n_tokens, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(matrix_bytes) * 1e-9,
                                                      benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * static_cast<double>(rows * cols * n_tokens),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(GetTypeTraits(type).name) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                 " " + SimdLevelName(level) + (cold ? " cold" : ""));
}

// Streaming read of kColdBytes split over the threads: the machine's DRAM read bandwidth.
void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  static AlignedBytes buffer(kColdBytes);
  static bool filled = false;
  if (!filled) {
    std::memset(buffer.data, 1, buffer.size);
    filled = true;
  }
  ThreadPool& pool = Pool(threads);
  const int64_t words = static_cast<int64_t>(buffer.size / sizeof(uint64_t));
  const auto* data = reinterpret_cast<const uint64_t*>(buffer.data);
  for (auto _ : state) {
    std::vector<uint64_t> sums(threads, 0);
    pool.ParallelFor(threads, 1, [&](int64_t first, int64_t last) {
      for (int64_t index = first; index < last; ++index) {
        const int64_t begin = words * index / threads, end = words * (index + 1) / threads;
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int64_t i = begin; i + 4 <= end; i += 4) {
          s0 += data[i];
          s1 += data[i + 1];
          s2 += data[i + 2];
          s3 += data[i + 3];
        }
        sums[index] = s0 + s1 + s2 + s3;
      }
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(buffer.size) * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// Quantization of one activation row (done once per MatMul call and token).
void BM_QuantizeActivationRow(benchmark::State& state) {
  const auto format = static_cast<ActivationFormat>(state.range(0));
  const int64_t n = state.range(1);
  const ActivationLayout layout = MakeActivationLayout(format, n);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  std::vector<uint8_t> out(layout.row_bytes);
  for (auto _ : state) {
    QuantizeActivationRow(layout, x.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["elements/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_QuantizeActivationRow)
    ->Args({static_cast<int>(ActivationFormat::kQ8Block32), 1536})
    ->Args({static_cast<int>(ActivationFormat::kQ8Block32Interleaved), 1536})
    ->Args({static_cast<int>(ActivationFormat::kQ8Block256), 1536});

// Args: {SIMD level, tokens, threads, cold}.
void MatMulArgs(benchmark::internal::Benchmark* b, bool large) {
  for (int level = 0; level <= 2; ++level) {
    for (int tokens : {1, 64}) {
      for (int threads : {1, 2}) {
        b->Args({level, tokens, threads, 0});
        if (large && tokens == 1) b->Args({level, tokens, threads, 1});
      }
    }
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

#define QEVICT_MATMUL_BENCH(name, type, rows, cols, large)                         \
  BENCHMARK_CAPTURE(BM_MatMul, name, type, rows, cols)->Apply([](auto* b) {        \
    MatMulArgs(b, large);                                                         \
  })

// SmolLM2-135M: q/o 576x576, ffn up/gate 1536x576, output 49152x576 (Q4_1 and Q8_0 files).
QEVICT_MATMUL_BENCH(Q4_1_576x576, GgmlType::kQ4_1, 576, 576, false);
QEVICT_MATMUL_BENCH(Q4_1_1536x576, GgmlType::kQ4_1, 1536, 576, false);
QEVICT_MATMUL_BENCH(Q4_1_576x1536, GgmlType::kQ4_1, 576, 1536, false);
QEVICT_MATMUL_BENCH(Q4_1_49152x576, GgmlType::kQ4_1, 49152, 576, true);
QEVICT_MATMUL_BENCH(Q4_0_49152x576, GgmlType::kQ4_0, 49152, 576, true);
QEVICT_MATMUL_BENCH(Q8_0_576x576, GgmlType::kQ8_0, 576, 576, false);
QEVICT_MATMUL_BENCH(Q8_0_1536x576, GgmlType::kQ8_0, 1536, 576, false);
QEVICT_MATMUL_BENCH(Q8_0_49152x576, GgmlType::kQ8_0, 49152, 576, true);
// Gemma 3 270M (Q4_K_M files keep most layer matrices in Q5_0): q 1024x640, ffn up/gate
// 2048x640, down 640x2048.
QEVICT_MATMUL_BENCH(Q5_0_1024x640, GgmlType::kQ5_0, 1024, 640, false);
QEVICT_MATMUL_BENCH(Q5_0_2048x640, GgmlType::kQ5_0, 2048, 640, false);
QEVICT_MATMUL_BENCH(Q5_0_640x2048, GgmlType::kQ5_0, 640, 2048, false);
// Gemma 3 270M's output projection (the tied token embedding, Q8_0): 262144x640, read for
// every decoded token.
QEVICT_MATMUL_BENCH(Q8_0_262144x640, GgmlType::kQ8_0, 262144, 640, true);
// K-quants need rows that are multiples of 256 columns: 768 stands in for 576.
QEVICT_MATMUL_BENCH(Q4_K_768x768, GgmlType::kQ4_K, 768, 768, false);
QEVICT_MATMUL_BENCH(Q4_K_1536x768, GgmlType::kQ4_K, 1536, 768, false);
QEVICT_MATMUL_BENCH(Q4_K_768x1536, GgmlType::kQ4_K, 768, 1536, false);
QEVICT_MATMUL_BENCH(Q4_K_49152x768, GgmlType::kQ4_K, 49152, 768, true);
QEVICT_MATMUL_BENCH(Q5_K_49152x768, GgmlType::kQ5_K, 49152, 768, true);
QEVICT_MATMUL_BENCH(Q6_K_768x768, GgmlType::kQ6_K, 768, 768, false);
QEVICT_MATMUL_BENCH(Q6_K_1536x768, GgmlType::kQ6_K, 1536, 768, false);
QEVICT_MATMUL_BENCH(Q6_K_49152x768, GgmlType::kQ6_K, 49152, 768, true);
QEVICT_MATMUL_BENCH(F16_1536x576, GgmlType::kF16, 1536, 576, false);
QEVICT_MATMUL_BENCH(F16_49152x576, GgmlType::kF16, 49152, 576, true);

}  // namespace
}  // namespace qevict

BENCHMARK_MAIN();
