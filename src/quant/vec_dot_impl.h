// Internal: the per-level kernel tables behind SelectDotKernel, and a helper that turns a
// one-row-one-token dot product into a DotTileFn.
#pragma once

#include "quant/vec_dot.h"

namespace qevict::vec_dot {

// Kernels of each level (tile null where the level has no specialised version of that type),
// with the activation format each one reads.
DotKernel PortableKernel(GgmlType weight_type);
DotKernel Avx2Kernel(GgmlType weight_type, DotShape shape);
DotKernel Avx512Kernel(GgmlType weight_type, DotShape shape);
// The activation format of the portable kernels (and of most SIMD ones).
ActivationFormat PartnerFormat(GgmlType weight_type);

// A DotTileFn that evaluates each (row, token) pair with Dot(n, w_row, act_row).
template <float (*Dot)(int64_t, const uint8_t*, const uint8_t*)>
void TileFromDot(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act,
                 size_t act_stride, int n_tok, float* out, int64_t out_stride) {
  for (int r = 0; r < n_rows; ++r) {
    for (int t = 0; t < n_tok; ++t) {
      out[t * out_stride + r] = Dot(n, w + r * w_stride, act + t * act_stride);
    }
  }
}

}  // namespace qevict::vec_dot
