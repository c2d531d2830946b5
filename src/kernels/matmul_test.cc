// MatMul against MatMulReference (dequantized weights, fp32 activations, double sums).
//
// MatMul quantizes the activations (8 bits per value, one scale per 32 or 256 values), which
// MatMulReference does not, so the comparison allows the provable bound of that rounding:
// each activation moves by at most half a step d_b / 2 (d_b = max|x| / 127 of its block), so
//   |MatMul - Reference| <= sum_i |w_i| * d_block(i) / 2  (+ 2e-5 * sum_i |w_i x_i| for float
// rounding). Float weight types use fp32 activations, where only the float term applies.
// A second test checks the exact part: MatMul equals the reference evaluated on the quantized
// activations to 2e-5 relative.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "quant/activations.h"
#include "quant/quantize.h"
#include "quant/test_support.h"
#include "quant/vec_dot.h"
#include "util/cpu_features.h"

// Counts allocations through the global operator new, to check MatMul's steady state.
namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace qevict {
namespace {

constexpr double kFloatTolerance = 2e-5;

struct Matrix {
  GgmlType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // dequantized, rows x cols
  WeightView view() const {
    return {type, rows, cols, bytes.data(), RowBytes(type, cols)};
  }
};

Matrix MakeMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m{type, rows, cols, std::vector<uint8_t>(RowBytes(type, cols) * rows), std::vector<float>(rows * cols)};
  const std::vector<float> x = testing::RandomFloats(seed, rows * cols, 0.3f);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = m.bytes.data() + r * RowBytes(type, cols);
    QuantizeRow(type, x.data() + r * cols, row, cols);
    DequantizeRow(type, row, m.values.data() + r * cols, cols);
  }
  return m;
}

// Scale of each activation element's quantization block (0 for fp32 activations).
std::vector<float> ActivationSteps(GgmlType type, const float* x, int64_t cols) {
  std::vector<float> steps(cols, 0.0f);
  const ActivationFormat f = SelectDotKernel(type).activation;
  if (f == ActivationFormat::kF32) return steps;
  const int64_t block = f == ActivationFormat::kQ8Block256 ? 256 : 32;
  for (int64_t b = 0; b < cols; b += block) {
    float amax = 0.0f;
    for (int64_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(x[i]));
    for (int64_t i = b; i < b + block; ++i) steps[i] = amax / 127.0f;
  }
  return steps;
}

std::vector<SimdLevel> SupportedLevels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel l : {SimdLevel::kPortable, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (l <= DetectedSimdLevel()) levels.push_back(l);
  }
  return levels;
}

class SimdLevelRestorer {
 public:
  SimdLevelRestorer() : saved_(ActiveSimdLevel()) {}
  ~SimdLevelRestorer() { SetSimdLevel(saved_); }

 private:
  SimdLevel saved_;
};

void CheckAgainstReference(const Matrix& m, int64_t n_tokens, ThreadPool& pool, const std::string& what) {
  std::vector<float> x = testing::RandomFloats(static_cast<uint32_t>(n_tokens * 977 + m.rows), n_tokens * m.cols, 1.5f);
  if (n_tokens > 2) x[2 * m.cols + 5] = 30.0f;  // an outlier in one block
  std::vector<float> got(n_tokens * m.rows, -1.0f), want(n_tokens * m.rows);
  MatMul(m.view(), x.data(), n_tokens, got.data(), pool);
  MatMulReference(m.view(), x.data(), n_tokens, want.data());
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x.data() + t * m.cols;
    const std::vector<float> steps = ActivationSteps(m.type, xt, m.cols);
    for (int64_t r = 0; r < m.rows; ++r) {
      double quant_bound = 0.0, mag = 0.0;
      for (int64_t c = 0; c < m.cols; ++c) {
        const double w = m.values[r * m.cols + c];
        quant_bound += std::fabs(w) * steps[c] * 0.5;
        mag += std::fabs(w * xt[c]);
      }
      ASSERT_NEAR(got[t * m.rows + r], want[t * m.rows + r], quant_bound * 1.0001 + kFloatTolerance * mag + 1e-30)
          << what << " token " << t << " row " << r;
    }
  }
}

struct Shape {
  GgmlType type;
  int64_t rows, cols;
};

constexpr Shape kShapes[] = {
    {GgmlType::kQ4_1, 37, 576}, {GgmlType::kQ4_0, 33, 96},   {GgmlType::kQ5_0, 19, 64},
    {GgmlType::kQ5_1, 21, 64},  {GgmlType::kQ8_0, 41, 576},  {GgmlType::kQ4_K, 29, 512},
    {GgmlType::kQ5_K, 17, 256}, {GgmlType::kQ6_K, 31, 768},  {GgmlType::kQ2_K, 9, 256},
    {GgmlType::kQ3_K, 11, 256}, {GgmlType::kF16, 23, 100},   {GgmlType::kBF16, 13, 64},
    {GgmlType::kF32, 15, 33},
};

TEST(MatMulTest, MatchesReferenceAcrossShapesThreadsAndLevels) {
  SimdLevelRestorer restore;
  ThreadPool one(1), two(2);
  for (const Shape& s : kShapes) {
    const Matrix m = MakeMatrix(s.type, s.rows, s.cols, static_cast<uint32_t>(s.rows));
    for (SimdLevel level : SupportedLevels()) {
      SetSimdLevel(level);
      for (int64_t n_tokens : {1, 3, 17, 64}) {
        for (ThreadPool* pool : {&one, &two}) {
          const std::string what = std::string(GetTypeTraits(s.type).name) + " " + std::to_string(s.rows) + "x" +
                                   std::to_string(s.cols) + " " + SimdLevelName(level) + " tokens " +
                                   std::to_string(n_tokens) + " threads " + std::to_string(pool->size());
          CheckAgainstReference(m, n_tokens, *pool, what);
        }
      }
    }
  }
}

TEST(MatMulTest, LargeRowCountsSplitAcrossThreads) {
  SimdLevelRestorer restore;
  ThreadPool pool(2);
  const Matrix m = MakeMatrix(GgmlType::kQ4_1, 1001, 576, 3);
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevel(level);
    CheckAgainstReference(m, 1, pool, std::string("decode ") + SimdLevelName(level));
    CheckAgainstReference(m, 5, pool, std::string("prefill ") + SimdLevelName(level));
  }
}

TEST(MatMulTest, EqualsReferenceOnQuantizedActivations) {
  // With activations that are exactly representable in the partner format, MatMul and the
  // reference see the same numbers; only float rounding differs.
  SimdLevelRestorer restore;
  ThreadPool pool(2);
  for (GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const int64_t cols = 512, rows = 45, n_tokens = 6;
    const Matrix m = MakeMatrix(type, rows, cols, 11);
    const ActivationLayout layout = MakeActivationLayout(SelectDotKernel(type).activation, cols);
    std::vector<float> x = testing::RandomFloats(12, n_tokens * cols);
    std::vector<uint8_t> q(layout.row_bytes);
    for (int64_t t = 0; t < n_tokens; ++t) {  // replace x by its own quantized values
      QuantizeActivationRow(layout, x.data() + t * cols, q.data());
      DequantizeActivationRow(layout, q.data(), x.data() + t * cols);
    }
    std::vector<float> want(n_tokens * rows);
    MatMulReference(m.view(), x.data(), n_tokens, want.data());
    for (SimdLevel level : SupportedLevels()) {
      SetSimdLevel(level);
      std::vector<float> got(n_tokens * rows);
      MatMul(m.view(), x.data(), n_tokens, got.data(), pool);
      for (int64_t i = 0; i < n_tokens * rows; ++i) {
        double mag = 0.0;
        const int64_t t = i / rows, r = i % rows;
        for (int64_t c = 0; c < cols; ++c) mag += std::fabs(m.values[r * cols + c] * static_cast<double>(x[t * cols + c]));
        // Requantizing a quantized row reproduces it up to the last bit of the scale.
        ASSERT_NEAR(got[i], want[i], 1e-4 * mag) << GetTypeTraits(type).name << " " << SimdLevelName(level) << " " << i;
      }
    }
  }
}

TEST(MatMulTest, GroupEqualsSeparateProductsBitForBit) {
  // Members with different partner formats (Q4_1: Q8_1-style block32 with sums; Q8_0; Q4_K and
  // Q6_K: block256) and row counts that make the pool's chunks span two members.
  SimdLevelRestorer restore;
  ThreadPool one(1), two(2);
  const int64_t cols = 512;
  const Matrix a = MakeMatrix(GgmlType::kQ4_1, 37, cols, 21);
  const Matrix b = MakeMatrix(GgmlType::kQ8_0, 5, cols, 22);
  const Matrix c = MakeMatrix(GgmlType::kQ4_K, 70, cols, 23);
  const Matrix d = MakeMatrix(GgmlType::kQ6_K, 19, cols, 24);
  const WeightView views[] = {a.view(), b.view(), c.view(), d.view()};
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevel(level);
    for (int64_t n_tokens : {1, 3, 17}) {
      const std::vector<float> x = testing::RandomFloats(31 + static_cast<uint32_t>(n_tokens), n_tokens * cols);
      for (ThreadPool* pool : {&one, &two}) {
        std::vector<std::vector<float>> got(4), want(4);
        MatMulProduct products[4];
        for (int i = 0; i < 4; ++i) {
          want[i].assign(n_tokens * views[i].rows, 0.0f);
          got[i].assign(n_tokens * views[i].rows, -7.0f);
          MatMul(views[i], x.data(), n_tokens, want[i].data(), *pool);
          products[i] = {&views[i], got[i].data()};
        }
        MatMulGroup(products, x.data(), n_tokens, *pool);
        for (int i = 0; i < 4; ++i) {
          EXPECT_EQ(got[i], want[i]) << "member " << i << " " << SimdLevelName(level) << " tokens "
                                     << n_tokens << " threads " << pool->size();
        }
      }
    }
  }
}

TEST(MatMulTest, SteadyStateDoesNotAllocate) {
  // One thread: ThreadPool itself is then out of the picture (it hands work to its workers
  // through std::function).
  ThreadPool pool(1);
  const Matrix m = MakeMatrix(GgmlType::kQ4_1, 64, 576, 9);
  const std::vector<float> x = testing::RandomFloats(3, 64 * 576);
  std::vector<float> y(64 * 64);
  for (int64_t n_tokens : {64, 1}) {
    MatMul(m.view(), x.data(), n_tokens, y.data(), pool);  // grows the scratch
    const int64_t before = g_allocations.load();
    for (int i = 0; i < 5; ++i) MatMul(m.view(), x.data(), n_tokens, y.data(), pool);
    EXPECT_EQ(g_allocations.load(), before) << n_tokens << " tokens";
  }
}

TEST(MatMulTest, RowStrideLargerThanRowAndZeroTokens) {
  const Matrix m = MakeMatrix(GgmlType::kQ8_0, 7, 64, 5);
  // Copy into rows padded to 100 bytes.
  const size_t row_bytes = RowBytes(GgmlType::kQ8_0, 64), stride = 100;
  std::vector<uint8_t> padded(stride * 7, 0xcd);
  for (int r = 0; r < 7; ++r) std::copy_n(m.bytes.data() + r * row_bytes, row_bytes, padded.data() + r * stride);
  WeightView view{GgmlType::kQ8_0, 7, 64, padded.data(), stride};
  ThreadPool pool(2);
  const std::vector<float> x = testing::RandomFloats(1, 2 * 64);
  std::vector<float> got(14), want(14);
  MatMul(view, x.data(), 2, got.data(), pool);
  MatMul(m.view(), x.data(), 2, want.data(), pool);
  EXPECT_EQ(got, want);
  MatMul(view, x.data(), 0, got.data(), pool);  // no-op
}

}  // namespace
}  // namespace qevict
