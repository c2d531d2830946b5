// Helpers shared by the quant and matmul tests: deterministic pseudo-random data and blocks.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/ggml_type.h"
#include "util/fp16.h"

namespace qevict::testing {

// The LCG the golden values were generated with (see dequantize_test.cc): byte = state >> 24.
inline std::vector<uint8_t> LcgBytes(uint32_t seed, size_t n) {
  std::vector<uint8_t> out(n);
  uint32_t s = seed;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    out[i] = static_cast<uint8_t>(s >> 24);
  }
  return out;
}

inline void PutHalf(uint8_t* p, float v) {
  const uint16_t h = Fp32ToFp16(v);
  std::memcpy(p, &h, 2);
}

// Deterministic, roughly normal values (sum of uniforms), scaled.
inline std::vector<float> RandomFloats(uint32_t seed, size_t n, float scale = 1.0f) {
  std::vector<float> out(n);
  uint32_t s = seed * 2654435761u + 1;
  auto uniform = [&s] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) * (1.0f / 16777216.0f);
  };
  for (auto& v : out) v = scale * ((uniform() + uniform() + uniform() + uniform()) - 2.0f) * 1.7320508f;
  return out;
}

// Offsets of the fp16 scale fields of a block, with plausible values for them; random bytes
// elsewhere make valid blocks of every type once these are set.
struct HalfField {
  int offset;
  float value;
};
inline std::vector<HalfField> ScaleFields(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return {{0, 0.25f}};
    case GgmlType::kQ4_1: return {{0, 0.125f}, {2, -1.0f}};
    case GgmlType::kQ5_0: return {{0, 0.0625f}};
    case GgmlType::kQ5_1: return {{0, 0.03125f}, {2, -0.5f}};
    case GgmlType::kQ8_0: return {{0, 0.01f}};
    case GgmlType::kQ2_K: return {{80, 0.05f}, {82, 0.02f}};
    case GgmlType::kQ3_K: return {{108, 0.03f}};
    case GgmlType::kQ4_K: return {{0, 0.01f}, {2, 0.004f}};
    case GgmlType::kQ5_K: return {{0, 0.005f}, {2, 0.002f}};
    case GgmlType::kQ6_K: return {{208, 0.002f}};
    default: return {};
  }
}

// n_blocks random blocks of a quantized type; block b gets the ScaleFields values times (b+1).
inline std::vector<uint8_t> RandomBlocks(GgmlType type, int n_blocks, uint32_t seed) {
  const size_t bb = GetTypeTraits(type).block_bytes;
  std::vector<uint8_t> data = LcgBytes(seed, bb * n_blocks);
  for (int b = 0; b < n_blocks; ++b) {
    for (const HalfField& f : ScaleFields(type)) PutHalf(&data[b * bb + f.offset], f.value * (b + 1));
  }
  return data;
}

}  // namespace qevict::testing
