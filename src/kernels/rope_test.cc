// Rope's two-level tables (rope.h): Row against cos/sin computed directly in double, the float
// parts the kernels compose, Apply as the rotation by Row, and what the tables cost in memory.
#include "kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace qevict {
namespace {

RopeConfig Config(int rot_dims, float base, bool neox) {
  RopeConfig c;
  c.rot_dims = rot_dims;
  c.freq_base = base;
  c.neox = neox;
  return c;
}

double Theta(const RopeConfig& c, int i) {
  return std::pow(static_cast<double>(c.freq_base), -2.0 * i / c.rot_dims) * c.freq_scale;
}

// Positions across coarse rows, both ends included, and the last of a 32k context.
const int64_t kPositions[] = {0, 1, 7, 63, 64, 65, 1000, 4095, 17000, 32767};

TEST(Rope, RowIsTheFloatOfTheExactRotation) {
  for (const float base : {10000.0f, 1000000.0f}) {
    const RopeConfig config = Config(256, base, /*neox=*/true);
    const Rope rope(config, 32768);
    std::vector<float> c(128), s(128);
    int differ = 0;
    for (const int64_t pos : kPositions) {
      rope.Row(pos, c.data(), s.data());
      for (int i = 0; i < 128; ++i) {
        const double angle = static_cast<double>(pos) * Theta(config, i);
        const float want_c = static_cast<float>(std::cos(angle));
        const float want_s = static_cast<float>(std::sin(angle));
        // The same float, or the neighbour when the value sits on a rounding boundary.
        ASSERT_LE(std::fabs(c[i] - want_c), std::nextafter(std::fabs(want_c), 2.0f) - std::fabs(want_c))
            << "cos at " << pos << " pair " << i;
        ASSERT_LE(std::fabs(s[i] - want_s), std::nextafter(std::fabs(want_s), 2.0f) - std::fabs(want_s))
            << "sin at " << pos << " pair " << i;
        differ += (c[i] != want_c) + (s[i] != want_s);
      }
    }
    EXPECT_LE(differ, 2) << "Row should be the float of the exact value almost everywhere";
  }
}

TEST(Rope, FloatPartsComposeToRowWithinAFewRoundings) {
  const Rope rope(Config(64, 10000.0f, /*neox=*/false), 8192);
  std::vector<float> c(32), s(32);
  for (const int64_t pos : {0L, 5L, 64L, 130L, 8191L}) {
    rope.Row(pos, c.data(), s.data());
    for (int i = 0; i < 32; ++i) {
      const float cc = rope.coarse_cos(pos)[i], cs = rope.coarse_sin(pos)[i];
      const float fc = rope.fine_cos(pos)[i], fs = rope.fine_sin(pos)[i];
      EXPECT_NEAR(cc * fc - cs * fs, c[i], 4e-7f) << pos << " " << i;
      EXPECT_NEAR(cs * fc + cc * fs, s[i], 4e-7f) << pos << " " << i;
    }
  }
}

TEST(Rope, ApplyRotatesByRow) {
  for (const bool neox : {false, true}) {
    const Rope rope(Config(8, 10000.0f, neox), 300);
    const int head_dim = 10;  // two channels past rot_dims stay as they are
    std::vector<float> x(2 * head_dim), want(2 * head_dim);
    for (int j = 0; j < 2 * head_dim; ++j) x[j] = want[j] = 0.25f * static_cast<float>(j) - 1.0f;
    float c[4], s[4];
    rope.Row(299, c, s);
    for (int h = 0; h < 2; ++h) {
      float* v = want.data() + h * head_dim;
      for (int i = 0; i < 4; ++i) {
        const int ia = neox ? i : 2 * i, ib = neox ? i + 4 : 2 * i + 1;
        const float a = v[ia], b = v[ib];
        v[ia] = a * c[i] - b * s[i];
        v[ib] = a * s[i] + b * c[i];
      }
    }
    rope.Apply(x.data(), 2, head_dim, 299);
    EXPECT_EQ(x, want);
  }
}

TEST(Rope, TablesStaySmallAtLongContexts) {
  // Per-position tables at 32k positions and 128 pairs were 32 MiB.
  const Rope rope(Config(256, 1000000.0f, /*neox=*/true), 32768);
  EXPECT_LT(rope.table_bytes(), 2 * 1024 * 1024);
  EXPECT_GT(rope.table_bytes(), 0);
}

}  // namespace
}  // namespace qevict
