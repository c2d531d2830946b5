#include "kernels/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/simd_paths_test_util.h"

namespace qevict {
namespace {

void CheckGatedActivations();

// The dispatched kernels at every SIMD level and Highway target against the scalar reference,
// over values from the range activations take (|x| up to 30, both signs, lengths not a
// multiple of any vector).
TEST(ElementwiseTest, GatedActivationsMatchTheScalarReference) {
  for (const testing::SimdPath& path : testing::SimdPaths()) {
    SCOPED_TRACE(path.name);
    testing::SelectSimdPath(path);
    CheckGatedActivations();
  }
  testing::RestoreSimdPath();
}

void CheckGatedActivations() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-30.0f, 30.0f), narrow(-4.0f, 4.0f);
  for (int n : {1, 7, 8, 33, 1000}) {
    std::vector<float> gate(n), up(n);
    for (int i = 0; i < n; ++i) {
      gate[i] = i % 3 == 0 ? wide(rng) : narrow(rng);
      up[i] = narrow(rng);
    }
    for (int which = 0; which < 2; ++which) {
      std::vector<float> fast = gate, reference = gate;
      if (which == 0) {
        SiluMul(fast.data(), up.data(), n);
        SiluMulPortable(reference.data(), up.data(), n);
      } else {
        GeluTanhMul(fast.data(), up.data(), n);
        GeluTanhMulPortable(reference.data(), up.data(), n);
      }
      for (int i = 0; i < n; ++i) {
        ASSERT_NEAR(fast[i], reference[i], 1e-5f * (1.0f + std::fabs(reference[i])))
            << (which == 0 ? "silu" : "gelu") << " x=" << gate[i];
      }
    }
  }
}

TEST(ElementwiseTest, GeluTanhKnownValues) {
  // gelu_tanh(1) = 0.841192, gelu_tanh(-1) = -0.158808, gelu_tanh(0) = 0 (PyTorch's
  // approximate="tanh").
  float gate[3] = {1.0f, -1.0f, 0.0f};
  const float up[3] = {1.0f, 1.0f, 1.0f};
  GeluTanhMul(gate, up, 3);
  EXPECT_NEAR(gate[0], 0.841192f, 1e-5f);
  EXPECT_NEAR(gate[1], -0.158808f, 1e-5f);
  EXPECT_EQ(gate[2], 0.0f);
}

}  // namespace
}  // namespace qevict
