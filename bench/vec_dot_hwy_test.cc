// The Highway prototype tiles (bench/vec_dot_hwy.h), every compiled target this CPU supports,
// against the portable reference kernels (quant/vec_dot_portable.h) on random data: quantized
// rows and raw random blocks, block counts with and without a partial group, 1-8 tokens.
// Tolerance as in quant/vec_dot_test.cc: 2e-5 * sum_i |w_i * a_i|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/vec_dot_hwy.h"
#include "quant/activations.h"
#include "quant/quantize.h"
#include "quant/test_support.h"
#include "quant/vec_dot_portable.h"

namespace qevict {
namespace {

using vec_dot_hwy::Variant;

std::vector<int64_t> Targets() {
  std::vector<int64_t> targets;
  const int64_t supported = vec_dot_hwy::SupportedTargets();
  for (int64_t bit = 1; bit != 0 && bit <= supported; bit <<= 1) {
    if (supported & bit) targets.push_back(bit);
  }
  return targets;
}

void CheckCase(GgmlType type, Variant variant, int64_t target, int64_t n, int n_rows, int n_tok,
               uint32_t seed, bool random_blocks) {
  const DotTileFn tile = vec_dot_hwy::Tile(type, variant, target);
  ASSERT_NE(tile, nullptr);
  const std::string what = std::string(GetTypeTraits(type).name) + " " + vec_dot_hwy::TargetName(target) +
                           (variant == Variant::kStaged ? " staged" : variant == Variant::kDirect ? " direct" : " native") + " n=" + std::to_string(n) +
                           " rows=" + std::to_string(n_rows) + " tokens=" + std::to_string(n_tok);
  const size_t row_bytes = RowBytes(type, n) + 7;  // odd stride
  std::vector<uint8_t> w(row_bytes * n_rows);
  std::vector<std::vector<float>> wv(n_rows, std::vector<float>(n));
  for (int r = 0; r < n_rows; ++r) {
    uint8_t* row = w.data() + r * row_bytes;
    if (random_blocks) {
      const auto blocks = testing::RandomBlocks(type, static_cast<int>(n / 32), seed + r);
      std::copy(blocks.begin(), blocks.end(), row);
    } else {
      const auto x = testing::RandomFloats(seed * 31 + r, n, 0.5f);
      QuantizeRow(type, x.data(), row, n);
    }
    DequantizeRow(type, row, wv[r].data(), n);
  }
  const ActivationLayout layout = MakeActivationLayout(ActivationFormat::kQ8Block32, n);
  const size_t act_stride = layout.row_bytes + 64;
  std::vector<uint8_t> act(act_stride * n_tok + 64);
  uint8_t* act0 = act.data() + (64 - reinterpret_cast<uintptr_t>(act.data()) % 64) % 64;
  std::vector<std::vector<float>> av(n_tok, std::vector<float>(n));
  for (int t = 0; t < n_tok; ++t) {
    std::vector<float> x = testing::RandomFloats(seed * 7 + 1000 + t, n, 2.0f);
    if (t == 1) x[n / 2] = 40.0f;
    QuantizeActivationRow(layout, x.data(), act0 + t * act_stride);
    DequantizeActivationRow(layout, act0 + t * act_stride, av[t].data());
  }
  const int64_t out_stride = n_rows + 3;
  std::vector<float> out(out_stride * n_tok, -12345.0f);
  tile(n, w.data(), row_bytes, n_rows, act0, act_stride, n_tok, out.data(), out_stride);
  for (int t = 0; t < n_tok; ++t) {
    for (int r = 0; r < n_rows; ++r) {
      const uint8_t* wr = w.data() + r * row_bytes;
      const uint8_t* ar = act0 + t * act_stride;
      const float ref = type == GgmlType::kQ4_1 ? vec_dot::portable::DotQ4_1(n, wr, ar)
                                                : vec_dot::portable::DotQ8_0(n, wr, ar);
      double mag = 0.0;
      for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(wv[r][i]) * av[t][i]);
      ASSERT_NEAR(out[t * out_stride + r], ref, 2e-5 * mag + 1e-30) << what << " row " << r << " token " << t;
    }
    for (int64_t r = n_rows; r < out_stride; ++r) ASSERT_EQ(out[t * out_stride + r], -12345.0f) << what;
  }
}

TEST(VecDotHwyTest, MatchesPortableReferenceOnEveryTarget) {
  const auto targets = Targets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    std::printf("target %s\n", vec_dot_hwy::TargetName(target));
    for (GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ8_0}) {
      for (Variant variant : {Variant::kStaged, Variant::kDirect, Variant::kNativeShim}) {
        if (variant == Variant::kNativeShim && !vec_dot_hwy::HasNativeShim(target)) continue;
        uint32_t seed = 1;
        // 1, 2, 3, 5, 16, 18 (576 columns), 20 (640) and 33 blocks.
        for (int64_t n : {32, 64, 96, 160, 512, 576, 640, 1056}) {
          for (int n_tok = 1; n_tok <= kMaxTileTokens; ++n_tok) {
            for (int n_rows : {1, 3, 5}) {
              CheckCase(type, variant, target, n, n_rows, n_tok, seed++, false);
              CheckCase(type, variant, target, n, n_rows, n_tok, seed++, true);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace qevict
