// Every dot kernel at every SIMD level this machine supports, against the dot product of the
// dequantized weight row and the dequantized activation row computed in double. The two sides
// see exactly the same quantized values, so the only differences are float rounding inside the
// kernels: |kernel - reference| <= 2e-5 * sum_i |w_i * a_i| (+1e-30). (The error of
// quantizing the activations themselves is covered by the MatMul tests.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "quant/activations.h"
#include "quant/quantize.h"
#include "quant/test_support.h"
#include "quant/vec_dot.h"
#include "util/cpu_features.h"

namespace qevict {
namespace {

constexpr double kRelativeTolerance = 2e-5;

constexpr GgmlType kWeightTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0, GgmlType::kQ4_1,
    GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ2_K, GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

std::vector<SimdLevel> SupportedLevels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel l : {SimdLevel::kPortable, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (l <= DetectedSimdLevel()) levels.push_back(l);
  }
  return levels;
}

struct Case {
  GgmlType type;
  int64_t n;
  int n_rows;
  int n_tok;
  uint32_t seed;
  bool random_blocks;  // raw random bytes (every code pattern) instead of quantized data
};

void CheckCase(const Case& c, SimdLevel level, DotShape shape = DotShape::kTiles) {
  const DotKernel kernel = SelectDotKernel(c.type, level, shape);
  const std::string what = std::string(GetTypeTraits(c.type).name) + " at " + SimdLevelName(level) +
                           (shape == DotShape::kSingleRow ? " single-row" : "") +
                           " (kernel " + SimdLevelName(kernel.level) + ") n=" + std::to_string(c.n) +
                           " rows=" + std::to_string(c.n_rows) + " tokens=" + std::to_string(c.n_tok);
  const TypeTraits& traits = GetTypeTraits(c.type);
  const size_t row_bytes = RowBytes(c.type, c.n) + 7;  // odd stride: rows need not be aligned
  std::vector<uint8_t> w(row_bytes * c.n_rows);
  std::vector<std::vector<float>> w_values(c.n_rows, std::vector<float>(c.n));
  for (int r = 0; r < c.n_rows; ++r) {
    uint8_t* row = w.data() + r * row_bytes;
    if (c.random_blocks && traits.block_size > 1) {
      const auto blocks = testing::RandomBlocks(c.type, static_cast<int>(c.n / traits.block_size), c.seed + r);
      std::copy(blocks.begin(), blocks.end(), row);
    } else {
      const auto x = testing::RandomFloats(c.seed * 31 + r, c.n, 0.5f);
      QuantizeRow(c.type, x.data(), row, c.n);
    }
    DequantizeRow(c.type, row, w_values[r].data(), c.n);
  }

  const ActivationLayout layout = MakeActivationLayout(kernel.activation, c.n);
  const size_t act_stride = layout.row_bytes + 64;
  std::vector<uint8_t> act(act_stride * c.n_tok + 64);
  uint8_t* act0 = act.data() + (64 - reinterpret_cast<uintptr_t>(act.data()) % 64) % 64;
  std::vector<std::vector<float>> a_values(c.n_tok, std::vector<float>(c.n));
  for (int t = 0; t < c.n_tok; ++t) {
    std::vector<float> x = testing::RandomFloats(c.seed * 7 + 1000 + t, c.n, 2.0f);
    if (t == 1) x[c.n / 2] = 40.0f;  // an outlier
    QuantizeActivationRow(layout, x.data(), act0 + t * act_stride);
    DequantizeActivationRow(layout, act0 + t * act_stride, a_values[t].data());
  }

  const int64_t out_stride = c.n_rows + 3;
  std::vector<float> out(out_stride * c.n_tok, -12345.0f);
  kernel.tile(c.n, w.data(), row_bytes, c.n_rows, act0, act_stride, c.n_tok, out.data(), out_stride);
  for (int t = 0; t < c.n_tok; ++t) {
    for (int r = 0; r < c.n_rows; ++r) {
      double ref = 0.0, mag = 0.0;
      for (int64_t i = 0; i < c.n; ++i) {
        ref += static_cast<double>(w_values[r][i]) * a_values[t][i];
        mag += std::fabs(static_cast<double>(w_values[r][i]) * a_values[t][i]);
      }
      ASSERT_NEAR(out[t * out_stride + r], ref, kRelativeTolerance * mag + 1e-30)
          << what << " row " << r << " token " << t;
    }
    for (int64_t r = c.n_rows; r < out_stride; ++r) ASSERT_EQ(out[t * out_stride + r], -12345.0f) << what;
  }
}

TEST(VecDotTest, EveryKernelAtEverySupportedLevel) {
  for (SimdLevel level : SupportedLevels()) {
    for (GgmlType type : kWeightTypes) {
      const int bs = GetTypeTraits(type).block_size == 1 ? 32 : GetTypeTraits(type).block_size;
      // Block counts 1, 2, 3, 5, 16, 18 (576 columns) and 33, plus odd lengths for float types.
      std::vector<int64_t> lengths = {bs, 2 * bs, 3 * bs, 5 * bs, 16 * bs, 576 / bs * bs, 33 * bs};
      if (bs == 256) lengths = {256, 512, 768, 1536};
      if (GetTypeTraits(type).block_size == 1) lengths.insert(lengths.end(), {1, 7, 33, 577});
      uint32_t seed = 1;
      for (DotShape shape : {DotShape::kTiles, DotShape::kSingleRow}) {
        for (int64_t n : lengths) {
          for (int n_tok = 1; n_tok <= kMaxTileTokens; ++n_tok) {
            for (int n_rows : {1, 2, 3, 5, 9}) {  // 5 and 9: kernels that take rows four at a time
              CheckCase({type, n, n_rows, n_tok, seed++, false}, level, shape);
              CheckCase({type, n, n_rows, n_tok, seed++, true}, level, shape);
            }
          }
        }
      }
    }
  }
}

TEST(VecDotTest, SelectionHonoursTheRequestedLevel) {
  for (SimdLevel level : SupportedLevels()) {
    for (GgmlType type : kWeightTypes) EXPECT_LE(SelectDotKernel(type, level).level, level);
  }
  // The types with hand-written kernels at every level really get them (so the loops above
  // exercise SIMD code, not the portable fallback).
  for (SimdLevel level : SupportedLevels()) {
    for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
                          GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kF16, GgmlType::kBF16,
                          GgmlType::kF32}) {
      EXPECT_EQ(SelectDotKernel(type, level).level, level) << GetTypeTraits(type).name;
    }
  }
  EXPECT_EQ(SelectDotKernel(GgmlType::kQ4_1, SimdLevel::kPortable).activation, ActivationFormat::kQ8Block32);
  if (DetectedSimdLevel() >= SimdLevel::kAvx2) {  // both AVX2 kernels are reached (and so tested)
    for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1}) {
      EXPECT_EQ(SelectDotKernel(type, SimdLevel::kAvx2, DotShape::kTiles).activation,
                ActivationFormat::kQ8Block32Interleaved);
      EXPECT_EQ(SelectDotKernel(type, SimdLevel::kAvx2, DotShape::kSingleRow).activation,
                ActivationFormat::kQ8Block32);
    }
  }
  if (DetectedSimdLevel() >= SimdLevel::kAvx512) {  // both Q5 kernels are reached (and so tested)
    for (GgmlType type : {GgmlType::kQ5_0, GgmlType::kQ5_1}) {
      EXPECT_EQ(SelectDotKernel(type, SimdLevel::kAvx512, DotShape::kTiles).activation,
                ActivationFormat::kQ8Block32Interleaved);
      EXPECT_EQ(SelectDotKernel(type, SimdLevel::kAvx512, DotShape::kSingleRow).activation,
                ActivationFormat::kQ8Block32);
    }
  }
  EXPECT_EQ(SelectDotKernel(GgmlType::kQ6_K, SimdLevel::kPortable).activation, ActivationFormat::kQ8Block256);
  EXPECT_EQ(SelectDotKernel(GgmlType::kF16, SimdLevel::kPortable).activation, ActivationFormat::kF32);
}

TEST(VecDotTest, ExtremeCodesDoNotOverflow) {
  // All-maximal weight codes against all +-127 activations, the worst case for 16-bit
  // intermediate sums in the SIMD kernels.
  for (SimdLevel level : SupportedLevels()) {
    for (GgmlType type : kWeightTypes) {
      const TypeTraits& traits = GetTypeTraits(type);
      if (traits.block_size == 1) continue;
      const int64_t n = 512;
      std::vector<uint8_t> w = testing::RandomBlocks(type, static_cast<int>(n / traits.block_size), 5);
      // Set every byte that is not a scale field to 0xff (max codes, max scales for K-quants).
      for (int b = 0; b < n / traits.block_size; ++b) {
        std::vector<bool> is_scale(traits.block_bytes, false);
        for (const auto& f : testing::ScaleFields(type)) is_scale[f.offset] = is_scale[f.offset + 1] = true;
        for (size_t i = 0; i < traits.block_bytes; ++i) {
          if (!is_scale[i]) w[b * traits.block_bytes + i] = (type == GgmlType::kQ6_K && i >= 192) ? 0x7f : 0xff;
        }
      }
      std::vector<float> wv(n);
      DequantizeRow(type, w.data(), wv.data(), n);
      for (float sign : {1.0f, -1.0f}) {
        const DotKernel kernel = SelectDotKernel(type, level);
        const ActivationLayout layout = MakeActivationLayout(kernel.activation, n);
        std::vector<float> x(n, sign * 3.0f);
        std::vector<uint8_t> act(layout.row_bytes);
        QuantizeActivationRow(layout, x.data(), act.data());
        std::vector<float> av(n);
        DequantizeActivationRow(layout, act.data(), av.data());
        double ref = 0.0, mag = 0.0;
        for (int64_t i = 0; i < n; ++i) {
          ref += static_cast<double>(wv[i]) * av[i];
          mag += std::fabs(static_cast<double>(wv[i]) * av[i]);
        }
        float got = 0.0f;
        kernel.tile(n, w.data(), 0, 1, act.data(), 0, 1, &got, 1);
        EXPECT_NEAR(got, ref, kRelativeTolerance * mag) << traits.name << " " << SimdLevelName(level);
      }
    }
  }
}

}  // namespace
}  // namespace qevict
