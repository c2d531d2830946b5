// Activation rows in the form the dot-product kernels read them. MatMul quantizes each fp32
// activation row once into the partner format of the weight type, then every weight row is
// dotted against it. The layout is internal to qevict (it is never written to a file): planar,
// so that SIMD kernels load contiguous int8 values and scales without shuffling.
//
//   kQ8Block32  (partner of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), n a multiple of 32:
//     qs      int8[n]          q = round(x / d), |q| <= 127
//     d_wide  float[n/32][8]   the scale d = max|x| / 127 of each block, repeated 8 times so a
//                              256-bit load gives the scale of one block in every lane
//     sum     float[n/32]      d * (sum of the block's qs)
//   kQ8Block256 (partner of the K-quants), n a multiple of 256:
//     qs      int8[n]
//     d       float[n/256]     one scale per super-block
//     bsums   int16[n/16]      sum of each 16 consecutive qs
//   kQ8Block32Interleaved (partner of Q4_0, Q4_1, Q5_0 and Q5_1 in the AVX-512 kernels and in
//   the AVX2 kernels of several tokens; the AVX2 ones read each 64-byte chunk as two halves of
//   eight blocks): the blocks of
//   kQ8Block32; each full group of 16 blocks interleaved so that one 64-byte load holds four
//   consecutive codes of each of the 16 blocks (one 32-bit lane per block), the remaining
//   n/32 % 16 blocks in plain order after them:
//     qs      int8[F][8][16][4]  F = n / 512 full groups; the code of element 4k + j of block
//                                16g + i is qs[g][k][i][j]
//             int8[n/32 % 16][32]  the tail blocks, element by element
//     d       float[n/32]        the scale of each block
//     sum     float[n/32]        d * (sum of the block's codes)
//   kF32: the fp32 row itself (float weights, and types without integer kernels).
//
// Sections start at 64-byte aligned offsets from the row start.
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/cpu_features.h"

namespace qevict {

enum class ActivationFormat { kF32, kQ8Block32, kQ8Block32Interleaved, kQ8Block256 };

struct ActivationLayout {
  ActivationFormat format = ActivationFormat::kF32;
  int64_t n = 0;
  size_t scale_offset = 0;  // d_wide (block32) or d (interleaved, block256)
  size_t sum_offset = 0;    // sum (block32, interleaved) or bsums (block256)
  size_t row_bytes = 0;     // multiple of 64
};

ActivationLayout MakeActivationLayout(ActivationFormat format, int64_t n);

// Views of one quantized row in kQ8Block32 / kQ8Block256 format (rows are 64-byte aligned for
// the SIMD kernels' sake, not required). Other formats: use the layout's offsets.
inline const int8_t* ActQs(const uint8_t* row) { return reinterpret_cast<const int8_t*>(row); }
inline const float* ActScales(const uint8_t* row, int64_t n) {
  return reinterpret_cast<const float*>(row + ((static_cast<size_t>(n) + 63) & ~size_t{63}));
}
const float* ActSums(const uint8_t* row, int64_t n);       // block32 only
const int16_t* ActBsums(const uint8_t* row, int64_t n);    // block256 only

// dst (layout.row_bytes) = x[0..layout.n) in layout.format, with SIMD code up to `level`. Every
// level writes the same bytes: d = max|x| / 127 per block, q = x * (1 / d) rounded half away
// from zero.
void QuantizeActivationRow(const ActivationLayout& layout, const float* x, uint8_t* dst, SimdLevel level);
inline void QuantizeActivationRow(const ActivationLayout& layout, const float* x, uint8_t* dst) {
  QuantizeActivationRow(layout, x, dst, ActiveSimdLevel());
}

// The fp32 values a quantized row stands for (q * d); for tests.
void DequantizeActivationRow(const ActivationLayout& layout, const uint8_t* row, float* dst);

}  // namespace qevict
