// Portable dot products of the 32-element formats with kQ8Block32 activations: an exact integer
// dot product per block, scaled by d_weight * d_activation (plus m * activation sum for the
// formats with a min).
#include <cstring>

#include "quant/activations.h"
#include "quant/block_formats.h"
#include "quant/vec_dot_portable.h"
#include "util/fp16.h"

namespace qevict::vec_dot::portable {
namespace {

struct ActBlocks {
  const int8_t* qs;
  const float* d_wide;
  const float* sum;
};

ActBlocks ViewAct(int64_t n, const uint8_t* act) { return {ActQs(act), ActScales(act, n), ActSums(act, n)}; }

// Integer dot of 32 weight codes (already offset) with 32 activation codes.
inline int DotCodes(const int q[kQk32], const int8_t* a) {
  int sum = 0;
  for (int i = 0; i < kQk32; ++i) sum += q[i] * a[i];
  return sum;
}

inline void Nibbles(const uint8_t qs[16], int offset, int q[kQk32]) {
  for (int i = 0; i < 16; ++i) {
    q[i] = (qs[i] & 0x0f) - offset;
    q[i + 16] = (qs[i] >> 4) - offset;
  }
}

inline void FiveBit(const uint8_t qs[16], const uint8_t qh_bytes[4], int offset, int q[kQk32]) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int i = 0; i < 16; ++i) {
    q[i] = ((qs[i] & 0x0f) | (((qh >> i) & 1) << 4)) - offset;
    q[i + 16] = ((qs[i] >> 4) | (((qh >> (i + 16)) & 1) << 4)) - offset;
  }
}

}  // namespace

float DotQ4_0(int64_t n, const uint8_t* w, const uint8_t* act) {
  const auto* blocks = reinterpret_cast<const BlockQ4_0*>(w);
  const ActBlocks a = ViewAct(n, act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQk32; ++b) {
    int q[kQk32];
    Nibbles(blocks[b].qs, 8, q);
    acc += Fp16ToFp32(blocks[b].d) * a.d_wide[8 * b] * static_cast<float>(DotCodes(q, a.qs + kQk32 * b));
  }
  return acc;
}

float DotQ4_1(int64_t n, const uint8_t* w, const uint8_t* act) {
  const auto* blocks = reinterpret_cast<const BlockQ4_1*>(w);
  const ActBlocks a = ViewAct(n, act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQk32; ++b) {
    int q[kQk32];
    Nibbles(blocks[b].qs, 0, q);
    acc += Fp16ToFp32(blocks[b].d) * a.d_wide[8 * b] * static_cast<float>(DotCodes(q, a.qs + kQk32 * b)) +
           Fp16ToFp32(blocks[b].m) * a.sum[b];
  }
  return acc;
}

float DotQ5_0(int64_t n, const uint8_t* w, const uint8_t* act) {
  const auto* blocks = reinterpret_cast<const BlockQ5_0*>(w);
  const ActBlocks a = ViewAct(n, act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQk32; ++b) {
    int q[kQk32];
    FiveBit(blocks[b].qs, blocks[b].qh, 16, q);
    acc += Fp16ToFp32(blocks[b].d) * a.d_wide[8 * b] * static_cast<float>(DotCodes(q, a.qs + kQk32 * b));
  }
  return acc;
}

float DotQ5_1(int64_t n, const uint8_t* w, const uint8_t* act) {
  const auto* blocks = reinterpret_cast<const BlockQ5_1*>(w);
  const ActBlocks a = ViewAct(n, act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQk32; ++b) {
    int q[kQk32];
    FiveBit(blocks[b].qs, blocks[b].qh, 0, q);
    acc += Fp16ToFp32(blocks[b].d) * a.d_wide[8 * b] * static_cast<float>(DotCodes(q, a.qs + kQk32 * b)) +
           Fp16ToFp32(blocks[b].m) * a.sum[b];
  }
  return acc;
}

float DotQ8_0(int64_t n, const uint8_t* w, const uint8_t* act) {
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(w);
  const ActBlocks a = ViewAct(n, act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQk32; ++b) {
    int sum = 0;
    for (int i = 0; i < kQk32; ++i) sum += blocks[b].qs[i] * a.qs[kQk32 * b + i];
    acc += Fp16ToFp32(blocks[b].d) * a.d_wide[8 * b] * static_cast<float>(sum);
  }
  return acc;
}

}  // namespace qevict::vec_dot::portable
