// DequantizeRow against (1) values produced by gguf-py's independent implementation of the
// llama.cpp formats, (2) a decoder written here from the published bit layouts, element by
// element and by byte offsets (not through block_formats.h), and (3) hand-built blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "quant/ggml_type.h"
#include "quant/test_support.h"
#include "util/fp16.h"

namespace qevict {
namespace {

using testing::LcgBytes;
using testing::PutHalf;
using testing::RandomBlocks;

float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Fp16ToFp32(h);
}
int Bit(const uint8_t* bytes, int bit) { return (bytes[bit / 8] >> (bit % 8)) & 1; }

// Value of element i of one block, straight from the ggml bit layouts.
float ElementValue(GgmlType type, const uint8_t* blk, int i) {
  switch (type) {
    case GgmlType::kQ4_0: {
      const int q = (i < 16) ? (blk[2 + i] & 15) : (blk[2 + i - 16] >> 4);
      return static_cast<float>(q - 8) * HalfAt(blk);
    }
    case GgmlType::kQ4_1: {
      const int q = (i < 16) ? (blk[4 + i] & 15) : (blk[4 + i - 16] >> 4);
      return static_cast<float>(q) * HalfAt(blk) + HalfAt(blk + 2);
    }
    case GgmlType::kQ5_0: {
      const int lo = (i < 16) ? (blk[6 + i] & 15) : (blk[6 + i - 16] >> 4);
      return static_cast<float>((lo | (Bit(blk + 2, i) << 4)) - 16) * HalfAt(blk);
    }
    case GgmlType::kQ5_1: {
      const int lo = (i < 16) ? (blk[8 + i] & 15) : (blk[8 + i - 16] >> 4);
      return static_cast<float>(lo | (Bit(blk + 4, i) << 4)) * HalfAt(blk) + HalfAt(blk + 2);
    }
    case GgmlType::kQ8_0:
      return static_cast<float>(static_cast<int8_t>(blk[2 + i])) * HalfAt(blk);
    case GgmlType::kQ2_K: {
      // scales[16] at 0, qs[64] at 16, d at 80, dmin at 82.
      const int h = i / 128, k = (i % 128) / 32, l = i % 32, sub = i / 16;
      const int q = (blk[16 + 32 * h + l] >> (2 * k)) & 3;
      return HalfAt(blk + 80) * static_cast<float>(blk[sub] & 15) * static_cast<float>(q) -
             HalfAt(blk + 82) * static_cast<float>(blk[sub] >> 4);
    }
    case GgmlType::kQ3_K: {
      // hmask[32] at 0, qs[64] at 32, scales[12] at 96, d at 108.
      const int h = i / 128, k = (i % 128) / 32, l = i % 32, sub = i / 16;
      const uint8_t* sc = blk + 96;
      const int low4 = (sub < 8) ? (sc[sub] & 15) : (sc[sub - 8] >> 4);
      const int high2 = (sc[8 + sub % 4] >> (2 * (sub / 4))) & 3;
      const int scale = (low4 | (high2 << 4)) - 32;
      const int q = ((blk[32 + 32 * h + l] >> (2 * k)) & 3) - (Bit(blk + l, 4 * h + k) ? 0 : 4);
      return HalfAt(blk + 108) * static_cast<float>(scale) * static_cast<float>(q);
    }
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      // d, dmin, scales[12] at 4, [Q5_K: qh[32] at 16], qs[128] at 16 (Q4_K) or 48 (Q5_K).
      const bool five = type == GgmlType::kQ5_K;
      const uint8_t* sc = blk + 4;
      const int sub = i / 32;
      int scale, min;
      if (sub < 4) {
        scale = sc[sub] & 63;
        min = sc[sub + 4] & 63;
      } else {
        scale = (sc[sub + 4] & 15) | ((sc[sub - 4] >> 6) << 4);
        min = (sc[sub + 4] >> 4) | ((sc[sub] >> 6) << 4);
      }
      const uint8_t* qs = blk + (five ? 48 : 16);
      int q = (qs[32 * (i / 64) + i % 32] >> (4 * (sub % 2))) & 15;
      if (five) q |= Bit(blk + 16 + i % 32, sub) << 4;
      return HalfAt(blk) * static_cast<float>(scale) * static_cast<float>(q) -
             HalfAt(blk + 2) * static_cast<float>(min);
    }
    case GgmlType::kQ6_K: {
      // ql[128] at 0, qh[64] at 128, scales[16] (int8) at 192, d at 208.
      const int h = i / 128, quarter = (i % 128) / 32, l = i % 32;
      const int low = (blk[64 * h + 32 * (quarter % 2) + l] >> (4 * (quarter / 2))) & 15;
      const int high = (blk[128 + 32 * h + l] >> (2 * quarter)) & 3;
      const int scale = static_cast<int8_t>(blk[192 + i / 16]);
      return HalfAt(blk + 208) * static_cast<float>(scale) * static_cast<float>((low | (high << 4)) - 32);
    }
    default:
      ADD_FAILURE() << "no test decoder";
      return 0.0f;
  }
}

constexpr GgmlType kQuantizedWeightTypes[] = {
    GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
    GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

TEST(DequantizeTest, MatchesBitLayoutDecoderOnRandomBlocks) {
  for (GgmlType type : kQuantizedWeightTypes) {
    const TypeTraits& traits = GetTypeTraits(type);
    constexpr int kBlocks = 5;
    const std::vector<uint8_t> data = RandomBlocks(type, kBlocks, 77 + static_cast<int>(type));
    std::vector<float> got(kBlocks * traits.block_size);
    DequantizeRow(type, data.data(), got.data(), static_cast<int64_t>(got.size()));
    for (int b = 0; b < kBlocks; ++b) {
      for (int i = 0; i < traits.block_size; ++i) {
        const float want = ElementValue(type, data.data() + b * traits.block_bytes, i);
        ASSERT_NEAR(got[b * traits.block_size + i], want, 1e-6f * (1.0f + std::fabs(want)))
            << traits.name << " block " << b << " element " << i;
      }
    }
  }
}

// Values from gguf-py 0.19 (gguf.quants.dequantize) for two blocks of LcgBytes(1234 + block
// bytes) with the ScaleFields of test_support.h: sum of v[i] * (i % 7 - 3), sum of |v[i]|, and
// v[0..4).
struct Golden {
  const char* name;
  double weighted_sum;
  double abs_sum;
  double first[4];
};
constexpr Golden kGolden[] = {
    {"Q4_0", 16.25, 100.25, {-1.25, -1.25, 1.0, -1.75}},
    {"Q4_1", 22.75, 49.375, {-0.875, -1.0, 0.625, 0.75}},
    {"Q5_0", -10.6875, 47.875, {-0.4375, -0.75, -0.75, -0.25}},
    {"Q5_1", 0.09375, 25.9375, {-0.25, -0.1875, 0.15625, 0.34375}},
    {"Q8_0", -7.311561584472656, 64.29373168945312,
     {0.07001495361328125, -1.0202178955078125, 1.1802520751953125, -0.72015380859375}},
    {"Q2_K", -55.16770935058594, 417.0028381347656,
     {-0.2200469970703125, -0.2200469970703125, 2.0294036865234375, 2.0294036865234375}},
    {"Q3_K", -51.35791015625, 870.5945739746094, {0.0, 1.7999267578125, 2.69989013671875, -3.599853515625}},
    {"Q4_K", 117.32726669311523, 1629.4990463256836,
     {0.04400634765625, 0.04400634765625, 0.2840576171875, -0.0160064697265625}},
    {"Q5_K", 20.544666290283203, 1840.694320678711,
     {3.103658676147461, 0.8531780242919922, 3.853818893432617, 2.3534984588623047}},
    {"Q6_K", 186.45736503601074, 1727.4662322998047,
     {0.6382579803466797, 0.05802345275878906, 0.5222110748291016, -1.0444221496582031}},
};

TEST(DequantizeTest, MatchesGgufPyGoldenValues) {
  for (GgmlType type : kQuantizedWeightTypes) {
    const TypeTraits& traits = GetTypeTraits(type);
    const Golden* golden = nullptr;
    for (const Golden& g : kGolden) {
      if (std::strcmp(g.name, traits.name) == 0) golden = &g;
    }
    ASSERT_NE(golden, nullptr) << traits.name;
    const std::vector<uint8_t> data = RandomBlocks(type, 2, 1234 + static_cast<uint32_t>(traits.block_bytes));
    std::vector<float> v(2 * traits.block_size);
    DequantizeRow(type, data.data(), v.data(), static_cast<int64_t>(v.size()));
    double weighted = 0.0, abs_sum = 0.0;
    for (size_t i = 0; i < v.size(); ++i) {
      weighted += v[i] * static_cast<double>(static_cast<int>(i % 7) - 3);
      abs_sum += std::fabs(v[i]);
    }
    EXPECT_NEAR(weighted, golden->weighted_sum, 1e-5 * golden->abs_sum) << traits.name;
    EXPECT_NEAR(abs_sum, golden->abs_sum, 1e-5 * golden->abs_sum) << traits.name;
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(v[i], golden->first[i], 1e-6) << traits.name << " " << i;
  }
}

TEST(DequantizeTest, FloatTypes) {
  const float values[4] = {1.0f, -2.5f, 65504.0f, 0.0f};
  std::vector<float> out(4);
  DequantizeRow(GgmlType::kF32, values, out.data(), 4);
  EXPECT_EQ(out, std::vector<float>(values, values + 4));

  const uint16_t halves[4] = {0x3c00, 0xc100, 0x7bff, 0x0001};  // 1, -2.5, 65504, 2^-24
  DequantizeRow(GgmlType::kF16, halves, out.data(), 4);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.5f, 65504.0f, 5.9604644775390625e-8f}));

  const uint16_t bf[4] = {0x3f80, 0xc020, 0x4780, 0x8000};  // 1, -2.5, 65536, -0
  DequantizeRow(GgmlType::kBF16, bf, out.data(), 4);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.5f, 65536.0f, -0.0f}));
}

TEST(DequantizeTest, HandBuiltQ4_0) {
  uint8_t blk[18];
  PutHalf(blk, 0.5f);
  for (int i = 0; i < 16; ++i) blk[2 + i] = static_cast<uint8_t>(i | ((15 - i) << 4));
  float out[32];
  DequantizeRow(GgmlType::kQ4_0, blk, out, 32);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(out[i], 0.5f * (i - 8));
    EXPECT_EQ(out[16 + i], 0.5f * (7 - i));
  }
}

TEST(DequantizeTest, HandBuiltQ5_1) {
  uint8_t blk[24] = {};
  PutHalf(blk, 2.0f);
  PutHalf(blk + 2, -3.0f);
  const uint32_t qh = 0x80000001u;  // fifth bit set for elements 0 and 31
  std::memcpy(blk + 4, &qh, 4);
  blk[8] = 0x21;   // element 0: 1 | 16 = 17, element 16: 2
  blk[23] = 0xf3;  // element 15: 3, element 31: 15 | 16 = 31
  float out[32];
  DequantizeRow(GgmlType::kQ5_1, blk, out, 32);
  EXPECT_EQ(out[0], 17 * 2.0f - 3.0f);
  EXPECT_EQ(out[16], 2 * 2.0f - 3.0f);
  EXPECT_EQ(out[15], 3 * 2.0f - 3.0f);
  EXPECT_EQ(out[31], 31 * 2.0f - 3.0f);
  EXPECT_EQ(out[1], -3.0f);
}

TEST(DequantizeTest, HandBuiltQ4K) {
  uint8_t blk[144] = {};
  PutHalf(blk, 1.0f);      // d
  PutHalf(blk + 2, 0.5f);  // dmin
  // Sub-block 1: scale 5, min 3 (low 6 bits of bytes 1 and 5). Sub-block 6: scale 37 = 0b100101
  // (low nibble 5 in byte 10, top bits 0b10 in byte 2), min 18 = 0b010010 (high nibble 2 of byte
  // 10, top bits 0b01 in byte 6).
  blk[4 + 1] = 5;
  blk[4 + 5] = 3;
  blk[4 + 10] = 0x25;
  blk[4 + 2] = 0b10 << 6;
  blk[4 + 6] = 0b01 << 6;
  blk[16 + 0] = 0x70;       // element 32 (sub-block 1) = 7
  blk[16 + 96 + 4] = 0x0b;  // element 192 + 4 (sub-block 6) = 11
  float out[256];
  DequantizeRow(GgmlType::kQ4_K, blk, out, 256);
  EXPECT_EQ(out[32], 5.0f * 7 - 0.5f * 3);
  EXPECT_EQ(out[33], -0.5f * 3);
  EXPECT_EQ(out[196], 37.0f * 11 - 0.5f * 18);
  EXPECT_EQ(out[0], 0.0f);
}

TEST(DequantizeTest, HandBuiltQ6K) {
  uint8_t blk[210] = {};
  PutHalf(blk + 208, 0.25f);
  for (int j = 0; j < 16; ++j) blk[192 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 8));
  // Element 128 + 64 + 3 (half 1, quarter 2): high nibble of ql[64 + 3], bits 4-5 of qh[32 + 3].
  blk[64 + 3] = 0x90;           // low bits 9
  blk[128 + 32 + 3] = 0b10 << 4;  // high bits 2 -> q = 9 | 32 = 41 -> 9 after -32
  float out[256];
  DequantizeRow(GgmlType::kQ6_K, blk, out, 256);
  EXPECT_EQ(out[195], 0.25f * static_cast<float>(195 / 16 - 8) * 9);
  EXPECT_EQ(out[0], 0.25f * -8 * -32);
}

TEST(DequantizeTest, RowBytesMatchesBlockGeometry) {
  EXPECT_EQ(RowBytes(GgmlType::kQ4_1, 576), 18u * 20u);
  EXPECT_EQ(RowBytes(GgmlType::kQ6_K, 512), 2u * 210u);
  EXPECT_EQ(RowBytes(GgmlType::kF16, 3), 6u);
}

}  // namespace
}  // namespace qevict
