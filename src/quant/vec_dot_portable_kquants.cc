// Portable dot products of the K-quants with kQ8Block256 activations. Each super-block's codes
// are unpacked to one int per element, dotted in integers per sub-block, and the sub-block
// scales (and mins, through the activation sums bsums) applied in integers before the single
// float multiply by the super-block scales.
#include "quant/activations.h"
#include "quant/block_formats.h"
#include "quant/vec_dot_portable.h"
#include "util/fp16.h"

namespace qevict::vec_dot::portable {
namespace {

struct ActSuperBlocks {
  const int8_t* qs;
  const float* d;
  const int16_t* bsums;
};

ActSuperBlocks ViewAct(int64_t n, const uint8_t* act) { return {ActQs(act), ActScales(act, n), ActBsums(act, n)}; }

inline int DotRun(const int* q, const int8_t* a, int count) {
  int sum = 0;
  for (int i = 0; i < count; ++i) sum += q[i] * a[i];
  return sum;
}

// Element e = 128h + 32k + l of Q2_K / Q3_K: two low bits of qs[32h + l] >> 2k.
inline int LowTwoBits(const uint8_t* qs, int e) {
  const int h = e >> 7, k = (e >> 5) & 3, l = e & 31;
  return (qs[32 * h + l] >> (2 * k)) & 3;
}

}  // namespace

float DotQ2K(int64_t n, const uint8_t* w, const uint8_t* act) {
  const auto* blocks = reinterpret_cast<const BlockQ2K*>(w);
  const ActSuperBlocks a = ViewAct(n, act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ2K& x = blocks[b];
    int q[kQkK];
    for (int e = 0; e < kQkK; ++e) q[e] = LowTwoBits(x.qs, e);
    int isum = 0, msum = 0;
    for (int g = 0; g < 16; ++g) {
      isum += (x.scales[g] & 0x0f) * DotRun(q + 16 * g, a.qs + kQkK * b + 16 * g, 16);
      msum += (x.scales[g] >> 4) * a.bsums[16 * b + g];
    }
    acc += a.d[b] * (Fp16ToFp32(x.d) * static_cast<float>(isum) - Fp16ToFp32(x.dmin) * static_cast<float>(msum));
  }
  return acc;
}

float DotQ3K(int64_t n, const uint8_t* w, const uint8_t* act) {
  const auto* blocks = reinterpret_cast<const BlockQ3K*>(w);
  const ActSuperBlocks a = ViewAct(n, act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ3K& x = blocks[b];
    int8_t scales[16];
    UnpackScalesQ3K(x.scales, scales);
    int q[kQkK];
    for (int e = 0; e < kQkK; ++e) {
      const int h = e >> 7, k = (e >> 5) & 3, l = e & 31;
      q[e] = LowTwoBits(x.qs, e) - (((x.hmask[l] >> (4 * h + k)) & 1) ? 0 : 4);
    }
    int isum = 0;
    for (int g = 0; g < 16; ++g) isum += scales[g] * DotRun(q + 16 * g, a.qs + kQkK * b + 16 * g, 16);
    acc += a.d[b] * Fp16ToFp32(x.d) * static_cast<float>(isum);
  }
  return acc;
}

float DotQ4K(int64_t n, const uint8_t* w, const uint8_t* act) {
  const auto* blocks = reinterpret_cast<const BlockQ4K*>(w);
  const ActSuperBlocks a = ViewAct(n, act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ4K& x = blocks[b];
    int isum = 0, msum = 0;
    for (int sub = 0; sub < 8; ++sub) {
      int scale, min;
      UnpackScaleMinK4(x.scales, sub, &scale, &min);
      const uint8_t* qs = x.qs + 32 * (sub / 2);
      const int shift = 4 * (sub & 1);
      int q[32];
      for (int l = 0; l < 32; ++l) q[l] = (qs[l] >> shift) & 0x0f;
      isum += scale * DotRun(q, a.qs + kQkK * b + 32 * sub, 32);
      msum += min * (a.bsums[16 * b + 2 * sub] + a.bsums[16 * b + 2 * sub + 1]);
    }
    acc += a.d[b] * (Fp16ToFp32(x.d) * static_cast<float>(isum) - Fp16ToFp32(x.dmin) * static_cast<float>(msum));
  }
  return acc;
}

float DotQ5K(int64_t n, const uint8_t* w, const uint8_t* act) {
  const auto* blocks = reinterpret_cast<const BlockQ5K*>(w);
  const ActSuperBlocks a = ViewAct(n, act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ5K& x = blocks[b];
    int isum = 0, msum = 0;
    for (int sub = 0; sub < 8; ++sub) {
      int scale, min;
      UnpackScaleMinK4(x.scales, sub, &scale, &min);
      const uint8_t* qs = x.qs + 32 * (sub / 2);
      const int shift = 4 * (sub & 1);
      int q[32];
      for (int l = 0; l < 32; ++l) q[l] = ((qs[l] >> shift) & 0x0f) | (((x.qh[l] >> sub) & 1) << 4);
      isum += scale * DotRun(q, a.qs + kQkK * b + 32 * sub, 32);
      msum += min * (a.bsums[16 * b + 2 * sub] + a.bsums[16 * b + 2 * sub + 1]);
    }
    acc += a.d[b] * (Fp16ToFp32(x.d) * static_cast<float>(isum) - Fp16ToFp32(x.dmin) * static_cast<float>(msum));
  }
  return acc;
}

float DotQ6K(int64_t n, const uint8_t* w, const uint8_t* act) {
  const auto* blocks = reinterpret_cast<const BlockQ6K*>(w);
  const ActSuperBlocks a = ViewAct(n, act);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ6K& x = blocks[b];
    int q[kQkK];
    for (int h = 0; h < 2; ++h) {
      for (int quarter = 0; quarter < 4; ++quarter) {
        const uint8_t* lows = x.ql + 64 * h + 32 * (quarter & 1);
        const int nibble_shift = 4 * (quarter >> 1);
        for (int l = 0; l < 32; ++l) {
          q[128 * h + 32 * quarter + l] =
              (((lows[l] >> nibble_shift) & 0x0f) | (((x.qh[32 * h + l] >> (2 * quarter)) & 3) << 4)) - 32;
        }
      }
    }
    int isum = 0;
    for (int g = 0; g < 16; ++g) isum += x.scales[g] * DotRun(q + 16 * g, a.qs + kQkK * b + 16 * g, 16);
    acc += a.d[b] * Fp16ToFp32(x.d) * static_cast<float>(isum);
  }
  return acc;
}

}  // namespace qevict::vec_dot::portable
