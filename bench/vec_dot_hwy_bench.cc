// Hand-written AVX2 / AVX-512 dot-product tiles (src/quant/vec_dot_*_avx2.cc / *_avx512.cc)
// against the Highway 1.0.3 prototype of bench/vec_dot_hwy.cc, single thread, decode shapes
// (one token): SmolLM2-135M (576 columns; rows 576 q/o, 192 k/v, 1536 ffn up/gate, 49152
// output) and Gemma 3 270M (640 columns; Q8_0 at 256 rows (attn_v) and 262144 (output); Q4_1
// at 1024 / 2048 rows stands in for its Q5_0 q and ffn matrices). Each iteration is one
// matrix-vector product as MatMul runs it on one thread: kernel calls of max(16, rows / 4)
// rows. The activation row is quantized beforehand in the format each kernel reads
// (hand-written AVX-512 Q4_1: kQ8Block32Interleaved; all others kQ8Block32), so only the
// kernel is timed (CPU time: the machine may be shared).
//
// Run:
//   vec_dot_hwy_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//                     --benchmark_report_aggregates_only=true
//
// Results, 2026-12-02 (Xeon with AVX-512 VNNI, 2 cores shared, load average 3.8 -> 2.8; GCC
// 12.2, Highway 1.0.3): median CPU time of 5, Highway / hand-written, one token:
//
//   weights   rows x cols   AVX2: hand  Highway  ratio   AVX-512: hand  Highway  ratio
//   Q4_1       576 x 576       17.9 us  19.8 us  1.11          11.2 us  18.1 us  1.61
//   Q4_1       192 x 576        6.0      6.7     1.12           3.8      6.1     1.63
//   Q4_1      1536 x 576       48.5     51.8     1.07          30.0     47.8     1.60
//   Q4_1     49152 x 576     1573     1712       1.09        1099     1569       1.43
//   Q4_1      1024 x 640       34.1     36.2     1.06          22.1     36.3     1.64
//   Q4_1      2048 x 640       68.0     71.9     1.06          44.4     73.4     1.65
//   Q8_0       576 x 576       19.1     19.1     1.00          13.2     18.1     1.37
//   Q8_0       192 x 576        6.4      6.3     0.99           4.4      6.1     1.39
//   Q8_0      1536 x 576       51.4     50.6     0.98          34.9     47.6     1.36
//   Q8_0     49152 x 576     1887     1826       0.97        1335     1819       1.36
//   Q8_0       256 x 640        9.2      9.2     1.00           6.5      9.0     1.39
//   Q8_0    262144 x 640    20290    21373       1.05       20401    20480       1.00
//
// With the missing 8-bit multiply-add supplied by one intrinsic (Variant::kNativeShim):
// AVX2 + vpmaddubsw 0.95-0.99 (Q4_1), 0.85-0.88 (Q8_0; 1.00 at 262144 rows) of the
// hand-written time; AVX3_DL + vpdpbusd 1.33-1.48 (Q4_1: the hand-written AVX-512 kernel also
// transposes 16 blocks into lanes with two-table permutes), 1.20-1.25 (Q8_0; 1.00 at 262144).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include "bench/vec_dot_hwy.h"
#include "bench/bench_weights.h"
#include "quant/activations.h"
#include "quant/quantize.h"
#include "quant/vec_dot.h"
#include "util/cpu_features.h"

// Highway's target bits (hwy/detect_targets.h), without including Highway here.
constexpr int64_t kHwyAvx2 = 1LL << 9;
constexpr int64_t kHwyAvx3 = 1LL << 8;

namespace qevict {
namespace {

using bench::AlignedBytes;
using bench::Weights;

struct Impl {
  const char* name;
  SimdLevel hand_level;  // hand-written kernel of this level, or
  int64_t hwy_target;    // the Highway prototype for this target (bits of hwy/detect_targets.h)
  vec_dot_hwy::Variant variant;
};
constexpr int64_t kHwyAvx3Dl = 1LL << 7;
using vec_dot_hwy::Variant;
const Impl kImpls[] = {
    {"hand_avx2", SimdLevel::kAvx2, 0, Variant::kStaged},
    {"hand_avx512", SimdLevel::kAvx512, 0, Variant::kStaged},
    {"hwy_avx2", SimdLevel::kPortable, kHwyAvx2, Variant::kStaged},
    {"hwy_avx512", SimdLevel::kPortable, kHwyAvx3, Variant::kStaged},
    // Extra evidence: activations widened at every use; Highway's AVX3_DL target (VNNI CPUs)
    // running the same ops; and the missing 8-bit multiply-add supplied by one intrinsic.
    {"hwy_avx2_direct", SimdLevel::kPortable, kHwyAvx2, Variant::kDirect},
    {"hwy_avx512_direct", SimdLevel::kPortable, kHwyAvx3, Variant::kDirect},
    {"hwy_avx3dl", SimdLevel::kPortable, kHwyAvx3Dl, Variant::kStaged},
    {"hwy_avx2+maddubs", SimdLevel::kPortable, kHwyAvx2, Variant::kNativeShim},
    {"hwy_avx3dl+dpbusd", SimdLevel::kPortable, kHwyAvx3Dl, Variant::kNativeShim},
};

void BM_Tile(benchmark::State& state, GgmlType type, int64_t rows, int64_t cols, const Impl* impl) {
  DotTileFn tile = nullptr;
  ActivationFormat format = ActivationFormat::kQ8Block32;
  if (impl->hwy_target == 0) {
    if (impl->hand_level > DetectedSimdLevel()) {
      state.SkipWithError("SIMD level not supported by this CPU");
      return;
    }
    const DotKernel kernel = SelectDotKernel(type, impl->hand_level);
    tile = kernel.tile;
    format = kernel.activation;
  } else {
    tile = vec_dot_hwy::Tile(type, impl->variant, impl->hwy_target);
  }
  if (tile == nullptr) {
    state.SkipWithError("Highway target not compiled or not supported");
    return;
  }
  const AlignedBytes& w = Weights(type, rows, cols);
  const size_t row_bytes = RowBytes(type, cols);
  const ActivationLayout layout = MakeActivationLayout(format, cols);
  AlignedBytes act(layout.row_bytes);
  std::vector<float> x(cols);
  for (int64_t i = 0; i < cols; ++i) x[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  QuantizeActivationRow(layout, x.data(), act.data);
  std::vector<float> y(rows);
  const int64_t chunk = std::max<int64_t>(16, (rows + 3) / 4);  // ThreadPool::ParallelFor, 1 thread
  for (auto _ : state) {
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int n = static_cast<int>(std::min(chunk, rows - r0));
      tile(cols, w.data + r0 * row_bytes, row_bytes, n, act.data, layout.row_bytes, 1, y.data() + r0, rows);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["weight_GB/s"] =
      benchmark::Counter(static_cast<double>(w.size) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void RegisterAll() {
  struct Shape {
    GgmlType type;
    int64_t rows, cols;
  };
  const Shape shapes[] = {
      {GgmlType::kQ4_1, 576, 576},   {GgmlType::kQ4_1, 192, 576},    {GgmlType::kQ4_1, 1536, 576},
      {GgmlType::kQ4_1, 49152, 576}, {GgmlType::kQ8_0, 576, 576},    {GgmlType::kQ8_0, 192, 576},
      {GgmlType::kQ8_0, 1536, 576},  {GgmlType::kQ8_0, 49152, 576},  {GgmlType::kQ8_0, 256, 640},
      {GgmlType::kQ8_0, 262144, 640}, {GgmlType::kQ4_1, 1024, 640},  {GgmlType::kQ4_1, 2048, 640},
  };
  for (const Shape& s : shapes) {
    for (const Impl& impl : kImpls) {
      const std::string name = std::string("BM_Tile/") + GetTypeTraits(s.type).name + "_" + std::to_string(s.rows) +
                               "x" + std::to_string(s.cols) + "/" + impl.name;
      benchmark::RegisterBenchmark(name.c_str(), BM_Tile, s.type, s.rows, s.cols, &impl)
          ->Unit(benchmark::kMicrosecond)
;
    }
  }
}

}  // namespace
}  // namespace qevict

int main(int argc, char** argv) {
  qevict::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
