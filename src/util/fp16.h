// IEEE half and bfloat16 conversions, portable scalar versions. SIMD files convert in bulk with
// F16C / AVX-512 instead.
#pragma once

#include <cstdint>
#include <cstring>

namespace qevict {

inline float Fp32FromBits(uint32_t w) {
  float f;
  std::memcpy(&f, &w, sizeof f);
  return f;
}
inline uint32_t Fp32ToBits(float f) {
  uint32_t w;
  std::memcpy(&w, &f, sizeof w);
  return w;
}

inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return Fp32FromBits(sign);
    // Subnormal: value = mant * 2^-24.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return Fp32FromBits(sign | 0x7f800000u | (mant << 13));
  return Fp32FromBits(sign | ((exp + 112) << 23) | (mant << 13));
}

// Round-to-nearest-even, overflow to infinity, NaN preserved.
inline uint16_t Fp32ToFp16(float f) {
  const uint32_t x = Fp32ToBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past max half
  if (abs < 0x38800000u) {                                                 // subnormal half or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float Bf16ToFp32(uint16_t b) { return Fp32FromBits(static_cast<uint32_t>(b) << 16); }

inline uint16_t Fp32ToBf16(float f) {
  uint32_t x = Fp32ToBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace qevict
