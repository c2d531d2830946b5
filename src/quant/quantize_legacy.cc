// Round-to-nearest quantizers for the 32-element block formats. Scales are rounded to fp16
// first and the values quantized against the rounded scale, so dequantization reproduces the
// nearest representable value.
#include <algorithm>
#include <cstring>

#include "quant/block_formats.h"
#include "quant/quantize_common.h"
#include "quant/quantize_impl.h"
#include "util/fp16.h"

namespace qevict::quantize {
namespace {

// Rounds a scale to fp16; returns the bits and stores the rounded value.
uint16_t HalfScale(float d, float* rounded) {
  const uint16_t bits = Fp32ToFp16(d);
  *rounded = Fp16ToFp32(bits);
  return bits;
}

void MinMax(const float* x, int n, float* lo, float* hi) {
  *lo = x[0];
  *hi = x[0];
  for (int i = 1; i < n; ++i) {
    *lo = std::min(*lo, x[i]);
    *hi = std::max(*hi, x[i]);
  }
}

// Symmetric formats: q = round(x / d) + offset in [0, 2 * offset), d = signed_max / -offset,
// so the element of largest magnitude maps to q = 0 exactly.
void SymmetricCodes(const float* x, int offset, uint16_t* d_bits, int q[kQk32]) {
  float d;
  *d_bits = HalfScale(SignedAbsMax(x, kQk32) / static_cast<float>(-offset), &d);
  const float id = InverseOrZero(d);
  for (int i = 0; i < kQk32; ++i) q[i] = RoundClamp(x[i] * id, -offset, offset - 1) + offset;
}

// Asymmetric formats: x = q * d + m with q in [0, levels].
void AsymmetricCodes(const float* x, int levels, uint16_t* d_bits, uint16_t* m_bits,
                     int q[kQk32]) {
  float lo, hi, d, m;
  MinMax(x, kQk32, &lo, &hi);
  *d_bits = HalfScale((hi - lo) / static_cast<float>(levels), &d);
  *m_bits = HalfScale(lo, &m);
  const float id = InverseOrZero(d);
  for (int i = 0; i < kQk32; ++i) q[i] = RoundClamp((x[i] - m) * id, 0, levels);
}

void PackNibbles(const int q[kQk32], uint8_t qs[16]) {
  for (int i = 0; i < 16; ++i) qs[i] = static_cast<uint8_t>((q[i] & 0x0f) | ((q[i + 16] & 0x0f) << 4));
}

void PackFifthBits(const int q[kQk32], uint8_t qh[4]) {
  uint32_t bits = 0;
  for (int i = 0; i < kQk32; ++i) bits |= static_cast<uint32_t>((q[i] >> 4) & 1) << i;
  std::memcpy(qh, &bits, 4);
}

void Q8Codes(const float* x, uint16_t* d_bits, int8_t qs[kQk32], int* sum) {
  float amax = 0.0f;
  for (int i = 0; i < kQk32; ++i) amax = std::max(amax, std::fabs(x[i]));
  float d;
  *d_bits = HalfScale(amax / 127.0f, &d);
  const float id = InverseOrZero(d);
  *sum = 0;
  for (int i = 0; i < kQk32; ++i) {
    qs[i] = static_cast<int8_t>(RoundClamp(x[i] * id, -127, 127));
    *sum += qs[i];
  }
}

}  // namespace

void Q4_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4_0*>(dst);
  for (int64_t b = 0; b < n / kQk32; ++b, src += kQk32) {
    int q[kQk32];
    uint16_t d;
    SymmetricCodes(src, 8, &d, q);
    blocks[b].d = d;
    PackNibbles(q, blocks[b].qs);
  }
}

void Q4_1(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4_1*>(dst);
  for (int64_t b = 0; b < n / kQk32; ++b, src += kQk32) {
    int q[kQk32];
    uint16_t d, m;
    AsymmetricCodes(src, 15, &d, &m, q);
    blocks[b].d = d;
    blocks[b].m = m;
    PackNibbles(q, blocks[b].qs);
  }
}

void Q5_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5_0*>(dst);
  for (int64_t b = 0; b < n / kQk32; ++b, src += kQk32) {
    int q[kQk32];
    uint16_t d;
    SymmetricCodes(src, 16, &d, q);
    blocks[b].d = d;
    PackNibbles(q, blocks[b].qs);
    PackFifthBits(q, blocks[b].qh);
  }
}

void Q5_1(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5_1*>(dst);
  for (int64_t b = 0; b < n / kQk32; ++b, src += kQk32) {
    int q[kQk32];
    uint16_t d, m;
    AsymmetricCodes(src, 31, &d, &m, q);
    blocks[b].d = d;
    blocks[b].m = m;
    PackNibbles(q, blocks[b].qs);
    PackFifthBits(q, blocks[b].qh);
  }
}

void Q8_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQk32; ++b, src += kQk32) {
    uint16_t d;
    int sum;
    Q8Codes(src, &d, blocks[b].qs, &sum);
    blocks[b].d = d;
  }
}

void Q8_1(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_1*>(dst);
  for (int64_t b = 0; b < n / kQk32; ++b, src += kQk32) {
    uint16_t d;
    int sum;
    Q8Codes(src, &d, blocks[b].qs, &sum);
    blocks[b].d = d;
    blocks[b].s = Fp32ToFp16(Fp16ToFp32(d) * static_cast<float>(sum));
  }
}

}  // namespace qevict::quantize
