// Dequantization of the 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1).
#include <cstring>

#include "quant/block_formats.h"
#include "quant/dequantize_impl.h"
#include "util/fp16.h"

namespace qevict::dequant {
namespace {

template <typename Block>
const Block* Blocks(const void* src) {
  return static_cast<const Block*>(src);
}

uint32_t HighBits(const uint8_t qh[4]) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return bits;
}

}  // namespace

void Q4_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = Blocks<BlockQ4_0>(src);
  for (int64_t b = 0; b < n / kQk32; ++b, dst += kQk32) {
    const float d = Fp16ToFp32(blocks[b].d);
    for (int i = 0; i < 16; ++i) {
      dst[i] = static_cast<float>((blocks[b].qs[i] & 0x0f) - 8) * d;
      dst[i + 16] = static_cast<float>((blocks[b].qs[i] >> 4) - 8) * d;
    }
  }
}

void Q4_1(const void* src, float* dst, int64_t n) {
  const auto* blocks = Blocks<BlockQ4_1>(src);
  for (int64_t b = 0; b < n / kQk32; ++b, dst += kQk32) {
    const float d = Fp16ToFp32(blocks[b].d);
    const float m = Fp16ToFp32(blocks[b].m);
    for (int i = 0; i < 16; ++i) {
      dst[i] = static_cast<float>(blocks[b].qs[i] & 0x0f) * d + m;
      dst[i + 16] = static_cast<float>(blocks[b].qs[i] >> 4) * d + m;
    }
  }
}

void Q5_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = Blocks<BlockQ5_0>(src);
  for (int64_t b = 0; b < n / kQk32; ++b, dst += kQk32) {
    const float d = Fp16ToFp32(blocks[b].d);
    const uint32_t qh = HighBits(blocks[b].qh);
    for (int i = 0; i < 16; ++i) {
      const int lo = (blocks[b].qs[i] & 0x0f) | (((qh >> i) & 1) << 4);
      const int hi = (blocks[b].qs[i] >> 4) | (((qh >> (i + 16)) & 1) << 4);
      dst[i] = static_cast<float>(lo - 16) * d;
      dst[i + 16] = static_cast<float>(hi - 16) * d;
    }
  }
}

void Q5_1(const void* src, float* dst, int64_t n) {
  const auto* blocks = Blocks<BlockQ5_1>(src);
  for (int64_t b = 0; b < n / kQk32; ++b, dst += kQk32) {
    const float d = Fp16ToFp32(blocks[b].d);
    const float m = Fp16ToFp32(blocks[b].m);
    const uint32_t qh = HighBits(blocks[b].qh);
    for (int i = 0; i < 16; ++i) {
      const int lo = (blocks[b].qs[i] & 0x0f) | (((qh >> i) & 1) << 4);
      const int hi = (blocks[b].qs[i] >> 4) | (((qh >> (i + 16)) & 1) << 4);
      dst[i] = static_cast<float>(lo) * d + m;
      dst[i + 16] = static_cast<float>(hi) * d + m;
    }
  }
}

void Q8_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = Blocks<BlockQ8_0>(src);
  for (int64_t b = 0; b < n / kQk32; ++b, dst += kQk32) {
    const float d = Fp16ToFp32(blocks[b].d);
    for (int i = 0; i < kQk32; ++i) dst[i] = static_cast<float>(blocks[b].qs[i]) * d;
  }
}

void Q8_1(const void* src, float* dst, int64_t n) {
  const auto* blocks = Blocks<BlockQ8_1>(src);
  for (int64_t b = 0; b < n / kQk32; ++b, dst += kQk32) {
    const float d = Fp16ToFp32(blocks[b].d);
    for (int i = 0; i < kQk32; ++i) dst[i] = static_cast<float>(blocks[b].qs[i]) * d;
  }
}

}  // namespace qevict::dequant
