// QuantizeRow round trips: relative RMS error bounds per type (measured on roughly normal data,
// bounds about 1.3x the measured value), per-element bounds that follow from round-to-nearest,
// and exactness where the format can represent the input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "quant/activations.h"
#include "quant/block_formats.h"
#include "quant/quantize.h"
#include "quant/test_support.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

namespace qevict {
namespace {

struct Bound {
  GgmlType type;
  double max_relative_rms;  // sqrt(mean((x - x')^2) / mean(x^2))
};

// Measured on this data (n = 4096, and n = 1024 at scale 1e-3; the larger of the two):
// F16 2.2e-4, BF16 1.7e-3, Q8_0 5.1e-3, Q8_1 5.1e-3, Q8_K 6.2e-3, Q6_K 1.9e-2, Q5_0 4.1e-2,
// Q5_1 3.8e-2, Q5_K 3.8e-2, Q4_0 8.4e-2, Q4_1 7.7e-2, Q4_K 7.7e-2, Q3_K 0.154, Q2_K 0.321.
// Bounds are 1.25x those (plain round-to-nearest; llama.cpp's searched scales do better).
constexpr Bound kBounds[] = {
    {GgmlType::kF32, 0.0},       {GgmlType::kF16, 2.8e-4},   {GgmlType::kBF16, 2.1e-3},
    {GgmlType::kQ8_0, 6.4e-3},   {GgmlType::kQ8_1, 6.4e-3},  {GgmlType::kQ8_K, 7.8e-3},
    {GgmlType::kQ6_K, 2.4e-2},   {GgmlType::kQ5_0, 5.1e-2},  {GgmlType::kQ5_1, 4.8e-2},
    {GgmlType::kQ5_K, 4.8e-2},   {GgmlType::kQ4_0, 1.05e-1}, {GgmlType::kQ4_1, 9.6e-2},
    {GgmlType::kQ4_K, 9.6e-2},   {GgmlType::kQ3_K, 1.93e-1}, {GgmlType::kQ2_K, 4.0e-1},
};

double RelativeRmsError(GgmlType type, const std::vector<float>& x) {
  std::vector<uint8_t> q(RowBytes(type, static_cast<int64_t>(x.size())));
  QuantizeRow(type, x.data(), q.data(), static_cast<int64_t>(x.size()));
  std::vector<float> back(x.size());
  DequantizeRow(type, q.data(), back.data(), static_cast<int64_t>(x.size()));
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (x[i] - back[i]) * static_cast<double>(x[i] - back[i]);
    ref += x[i] * static_cast<double>(x[i]);
  }
  return std::sqrt(err / ref);
}

TEST(QuantizeTest, RoundTripErrorWithinBounds) {
  const std::vector<float> x = testing::RandomFloats(5, 4096, 0.7f);
  for (const Bound& b : kBounds) {
    ASSERT_TRUE(CanQuantize(b.type));
    const double err = RelativeRmsError(b.type, x);
    EXPECT_LE(err, b.max_relative_rms) << GetTypeTraits(b.type).name;
    if (b.type != GgmlType::kF32) {
      EXPECT_GT(err, 0.0) << GetTypeTraits(b.type).name;
    }
  }
}

TEST(QuantizeTest, ErrorScalesWithData) {
  // Tiny values (far below 1, above the fp16 subnormal range): same relative bounds.
  const std::vector<float> x = testing::RandomFloats(9, 1024, 1e-3f);
  for (const Bound& b : kBounds) {
    EXPECT_LE(RelativeRmsError(b.type, x), b.max_relative_rms) << GetTypeTraits(b.type).name;
  }
}

TEST(QuantizeTest, LegacyFormatsRoundToNearestLevel) {
  // Every element of the 32-element formats lands within half a step of the input, except that
  // the symmetric formats (Q4_0, Q5_0) have one level less on the side opposite the largest
  // magnitude, where values may clip by up to one step.
  const std::vector<float> x = testing::RandomFloats(11, 512, 2.0f);
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0}) {
    const TypeTraits& t = GetTypeTraits(type);
    std::vector<uint8_t> q(RowBytes(type, 512));
    QuantizeRow(type, x.data(), q.data(), 512);
    std::vector<float> back(512);
    DequantizeRow(type, q.data(), back.data(), 512);
    for (int b = 0; b < 512 / 32; ++b) {
      uint16_t dbits;
      std::memcpy(&dbits, q.data() + b * t.block_bytes, 2);
      const float step = std::fabs(Fp16ToFp32(dbits));
      const bool symmetric = type == GgmlType::kQ4_0 || type == GgmlType::kQ5_0;
      const float allowed = (symmetric ? 1.0f : 0.5f) * step * 1.001f;
      for (int i = 0; i < 32; ++i) {
        // Half a step, plus the rounding of the fp16 min (Q*_1) and of the float arithmetic.
        EXPECT_LE(std::fabs(x[32 * b + i] - back[32 * b + i]), allowed + 2e-3f * std::fabs(x[32 * b + i]))
            << t.name << " block " << b << " element " << i;
      }
    }
  }
}

TEST(QuantizeTest, RepresentableValuesAreExact) {
  // Integers -8..7 times 0.5 are exactly representable by Q4_0 with d = -0.5 (max -4 / -8).
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = 0.5f * static_cast<float>((i % 16) - 8);
  std::vector<uint8_t> q(RowBytes(GgmlType::kQ4_0, 32));
  QuantizeRow(GgmlType::kQ4_0, x.data(), q.data(), 32);
  std::vector<float> back(32);
  DequantizeRow(GgmlType::kQ4_0, q.data(), back.data(), 32);
  EXPECT_EQ(back, x);

  std::vector<uint8_t> q8(RowBytes(GgmlType::kQ8_0, 32));
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i * 4 - 64);  // max |x| = 64, d = 64/127
  QuantizeRow(GgmlType::kQ8_0, x.data(), q8.data(), 32);
  const auto* blk = reinterpret_cast<const BlockQ8_0*>(q8.data());
  EXPECT_EQ(blk->qs[0], -127);
}

TEST(QuantizeTest, ZeroRowsStayZero) {
  const std::vector<float> zeros(256, 0.0f);
  for (const Bound& b : kBounds) {
    std::vector<uint8_t> q(RowBytes(b.type, 256));
    QuantizeRow(b.type, zeros.data(), q.data(), 256);
    std::vector<float> back(256, 1.0f);
    DequantizeRow(b.type, q.data(), back.data(), 256);
    for (float v : back) ASSERT_EQ(v, 0.0f) << GetTypeTraits(b.type).name;
  }
}

TEST(QuantizeTest, Q8KBlockSums) {
  const std::vector<float> x = testing::RandomFloats(3, 512);
  std::vector<uint8_t> q(RowBytes(GgmlType::kQ8_K, 512));
  QuantizeRow(GgmlType::kQ8_K, x.data(), q.data(), 512);
  const auto* blocks = reinterpret_cast<const BlockQ8K*>(q.data());
  for (int b = 0; b < 2; ++b) {
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += blocks[b].qs[16 * j + i];
      EXPECT_EQ(blocks[b].bsums[j], sum);
    }
  }
}

TEST(ActivationTest, Block32LayoutAndRoundTrip) {
  const std::vector<float> x = testing::RandomFloats(21, 576, 3.0f);
  const ActivationLayout layout = MakeActivationLayout(ActivationFormat::kQ8Block32, 576);
  EXPECT_EQ(layout.row_bytes % 64, 0u);
  std::vector<uint8_t> row(layout.row_bytes);
  QuantizeActivationRow(layout, x.data(), row.data());
  std::vector<float> back(576);
  DequantizeActivationRow(layout, row.data(), back.data());
  const float* d_wide = ActScales(row.data(), 576);
  const float* sums = ActSums(row.data(), 576);
  for (int b = 0; b < 18; ++b) {
    int sum = 0;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) {
      sum += ActQs(row.data())[32 * b + i];
      amax = std::max(amax, std::fabs(x[32 * b + i]));
      EXPECT_LE(std::fabs(back[32 * b + i] - x[32 * b + i]), 0.5f * d_wide[8 * b] * 1.0001f);
    }
    for (int lane = 0; lane < 8; ++lane) EXPECT_EQ(d_wide[8 * b + lane], amax / 127.0f);
    EXPECT_FLOAT_EQ(sums[b], d_wide[8 * b] * static_cast<float>(sum));
  }
}

TEST(ActivationTest, Block256BsumsAndRoundTrip) {
  const std::vector<float> x = testing::RandomFloats(22, 512, 0.1f);
  const ActivationLayout layout = MakeActivationLayout(ActivationFormat::kQ8Block256, 512);
  std::vector<uint8_t> row(layout.row_bytes);
  QuantizeActivationRow(layout, x.data(), row.data());
  std::vector<float> back(512);
  DequantizeActivationRow(layout, row.data(), back.data());
  const float* d = ActScales(row.data(), 512);
  for (int i = 0; i < 512; ++i) EXPECT_LE(std::fabs(back[i] - x[i]), 0.5f * d[i / 256] * 1.0001f);
  for (int j = 0; j < 32; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += ActQs(row.data())[16 * j + i];
    EXPECT_EQ(ActBsums(row.data(), 512)[j], sum);
  }
}

}  // namespace
}  // namespace qevict

namespace qevict {
namespace {

TEST(ActivationTest, EverySimdLevelWritesTheSameBytes) {
  for (ActivationFormat format : {ActivationFormat::kQ8Block32, ActivationFormat::kQ8Block32Interleaved,
                                  ActivationFormat::kQ8Block256}) {
    for (int64_t n : {256, 512, 768, 1536, 2048 + 256}) {
      std::vector<float> x = testing::RandomFloats(static_cast<uint32_t>(n), n, 3.0f);
      for (int64_t i = 0; i < n; i += 7) x[i] = static_cast<float>(i % 255 - 127) * 0.25f;  // exact ties
      x[n / 3] = 0.0f;
      std::fill(x.begin(), x.begin() + 32, 0.0f);  // an all-zero block
      const ActivationLayout layout = MakeActivationLayout(format, n);
      std::vector<uint8_t> want(layout.row_bytes, 0), got(layout.row_bytes, 0);
      QuantizeActivationRow(layout, x.data(), want.data(), SimdLevel::kPortable);
      for (SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
        if (level > DetectedSimdLevel()) continue;
        QuantizeActivationRow(layout, x.data(), got.data(), level);
        EXPECT_EQ(got, want) << "format " << static_cast<int>(format) << " n " << n << " " << SimdLevelName(level);
      }
    }
  }
}

TEST(ActivationTest, InterleavedLayoutPutsFourCodesOfEachBlockInOneLane) {
  const int64_t n = 512 + 64;  // one full group and a tail of two blocks
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i % 32) - 16 + (i / 32));
  const ActivationLayout layout = MakeActivationLayout(ActivationFormat::kQ8Block32Interleaved, n);
  std::vector<uint8_t> row(layout.row_bytes);
  QuantizeActivationRow(layout, x.data(), row.data(), SimdLevel::kPortable);
  const auto* d = reinterpret_cast<const float*>(row.data() + layout.scale_offset);
  const auto* qs = reinterpret_cast<const int8_t*>(row.data());
  for (int64_t b = 0; b < 18; ++b) {
    for (int e = 0; e < 32; ++e) {
      const int64_t at = b < 16 ? 64 * (e / 4) + 4 * b + e % 4 : 512 + 32 * (b - 16) + e;
      EXPECT_NEAR(qs[at] * d[b], x[32 * b + e], 0.5f * d[b] * 1.0001f) << b << " " << e;
    }
  }
}

}  // namespace
}  // namespace qevict
