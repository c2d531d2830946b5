#include "kv/kv_quantizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "util/fp16.h"

namespace qevict {
namespace {

// Worst-case round-trip error of one element of a group with range [lo, hi] at `bits` bits:
// half a step, plus the fp16 rounding of the stored zero and of the top of the range (reached
// only when a value is clamped), plus fp32 arithmetic.
float ErrorBound(float lo, float hi, int bits) {
  const float step = Fp16ToFp32(Fp32ToFp16((hi - lo) / ((1 << bits) - 1)));
  return 0.5f * step + std::ldexp(std::fabs(lo) + (hi - lo), -11) +
         1e-6f * (std::fabs(lo) + std::fabs(hi)) + 1e-7f;
}

std::vector<float> RandomData(size_t n, bool outliers, std::mt19937& rng, int head_dim) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  if (outliers) {
    // Outlier channels (as in real keys) and a few spiking elements.
    for (size_t i = 0; i < n; ++i) {
      if (i % head_dim == 3 || i % head_dim == 17) x[i] *= 40.0f;
    }
    std::uniform_int_distribution<size_t> pick(0, n - 1);
    for (int s = 0; s < 8; ++s) x[pick(rng)] = 150.0f * normal(rng);
  }
  return x;
}

struct Case {
  int bits;
  bool outliers;
  int head_dim;
  int value_group;
};

class QuantizerRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizerRoundTrip, ErrorWithinStepBound) {
  const Case c = GetParam();
  const int n_kv = 3, w = 8, hd = c.head_dim;
  const QuantLayout l = QuantLayout::Make(n_kv, w, hd, c.bits, c.value_group);
  std::mt19937 rng(c.bits * 100 + hd + (c.outliers ? 7 : 0));
  for (int trial = 0; trial < 20; ++trial) {
    const auto keys = RandomData(size_t{n_kv} * w * hd, c.outliers, rng, hd);
    const auto values = RandomData(size_t{n_kv} * w * hd, c.outliers, rng, hd);
    std::vector<uint8_t> block(l.bytes);
    QuantizeWindow(l, keys.data(), values.data(), block.data());
    std::vector<float> kd(size_t{w} * hd), vd(size_t{w} * hd);
    double worst_ratio = 0.0;
    for (int h = 0; h < n_kv; ++h) {
      DequantizeKeyRows(l, block.data(), h, 0, w, kd.data());
      DequantizeValueRows(l, block.data(), h, 0, w, vd.data());
      const float* kh = keys.data() + static_cast<size_t>(h) * w * hd;
      const float* vh = values.data() + static_cast<size_t>(h) * w * hd;
      for (int d = 0; d < hd; ++d) {  // keys: per channel over the window
        float lo = kh[d], hi = kh[d];
        for (int t = 0; t < w; ++t) {
          lo = std::min(lo, kh[t * hd + d]);
          hi = std::max(hi, kh[t * hd + d]);
        }
        const float bound = ErrorBound(lo, hi, c.bits);
        for (int t = 0; t < w; ++t) {
          const float err = std::fabs(kd[t * hd + d] - kh[t * hd + d]);
          ASSERT_LE(err, bound) << "key h=" << h << " t=" << t << " d=" << d;
          worst_ratio = std::max(worst_ratio, static_cast<double>(err / bound));
        }
      }
      for (int t = 0; t < w; ++t) {  // values: per token, groups of channels
        for (int d0 = 0; d0 < hd; d0 += l.value_group) {
          const int d1 = std::min(hd, d0 + l.value_group);
          const auto [lo, hi] = std::minmax_element(vh + t * hd + d0, vh + t * hd + d1);
          const float bound = ErrorBound(*lo, *hi, c.bits);
          for (int d = d0; d < d1; ++d) {
            ASSERT_LE(std::fabs(vd[t * hd + d] - vh[t * hd + d]), bound)
                << "value h=" << h << " t=" << t << " d=" << d;
          }
        }
      }
    }
    EXPECT_GT(worst_ratio, 0.2);  // the bound is tight enough to mean something
  }
}

INSTANTIATE_TEST_SUITE_P(AllWidths, QuantizerRoundTrip,
                         ::testing::Values(Case{2, false, 64, 32}, Case{4, false, 64, 32},
                                           Case{8, false, 64, 32}, Case{2, true, 64, 32},
                                           Case{4, true, 64, 32}, Case{8, true, 64, 32},
                                           Case{2, true, 20, 32}, Case{4, false, 128, 32},
                                           Case{8, true, 40, 16}));

TEST(Quantizer, ConstantGroupsAreExactUpToFp16) {
  const QuantLayout l = QuantLayout::Make(1, 4, 64, 2, 32);
  std::vector<float> keys(4 * 64, 1.2345f), values(4 * 64, -3.5f);
  std::vector<uint8_t> block(l.bytes);
  QuantizeWindow(l, keys.data(), values.data(), block.data());
  std::vector<float> out(4 * 64);
  DequantizeKeyRows(l, block.data(), 0, 0, 4, out.data());
  for (float x : out) EXPECT_EQ(x, Fp16ToFp32(Fp32ToFp16(1.2345f)));
  DequantizeValueRows(l, block.data(), 0, 0, 4, out.data());
  for (float x : out) EXPECT_EQ(x, -3.5f);
}

TEST(Quantizer, LayoutSizes) {
  // SmolLM2 geometry at W = 8, 2 bits: 3 heads x 8 tokens x 16 bytes of codes for K and V,
  // per-channel fp16 scale + zero for keys, per (token, 32 channels) for values.
  const QuantLayout l = QuantLayout::Make(3, 8, 64, 2, 32);
  EXPECT_EQ(l.row_bytes, 16);
  EXPECT_EQ(l.bytes, 3 * 8 * 16 * 2 + 3 * 64 * 4 + 3 * 8 * 2 * 4);
  EXPECT_EQ(QuantLayout::Make(3, 8, 64, 4, 32).row_bytes, 32);
  EXPECT_EQ(QuantLayout::Make(3, 8, 64, 8, 32).row_bytes, 64);
  EXPECT_EQ(QuantLayout::Make(1, 8, 20, 2, 32).row_bytes, 16);  // padded to a 16-byte group
}

TEST(Packing, RoundTripIsExactForEveryWidthAndLength) {
  std::mt19937 rng(1);
  for (int bits : {2, 4, 8}) {
    for (int n : {1, 7, 8, 16, 31, 63, 64, 65, 128, 200, 1024}) {
      std::uniform_int_distribution<int> code(0, (1 << bits) - 1);
      std::vector<uint8_t> codes(n), back(n);
      for (auto& c : codes) c = static_cast<uint8_t>(code(rng));
      std::vector<uint8_t> packed(PackedRowBytes(n, bits), 0xAA);
      PackCodes(codes.data(), n, bits, packed.data());
      UnpackCodes(packed.data(), n, bits, back.data());
      EXPECT_EQ(codes, back) << "bits=" << bits << " n=" << n;
      EXPECT_EQ(PackedRowBytes(n, bits) % 16, 0);
      EXPECT_GE(PackedRowBytes(n, bits) * 8, n * bits);
    }
  }
}

TEST(Packing, DocumentedBitPositions) {
  // 2 bits: code r of a 64-code group sits in byte r % 16 at bit offset 2 * (r / 16).
  std::vector<uint8_t> codes(64, 0);
  codes[0] = 1;
  codes[16] = 2;
  codes[33] = 3;
  codes[63] = 1;
  std::vector<uint8_t> packed(16);
  PackCodes(codes.data(), 64, 2, packed.data());
  EXPECT_EQ(packed[0], 1 | (2 << 2));
  EXPECT_EQ(packed[1], 3 << 4);
  EXPECT_EQ(packed[15], 1 << 6);
}

}  // namespace
}  // namespace qevict
