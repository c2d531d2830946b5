// Dot-product kernels between rows of a weight matrix (in its GGUF block format) and activation
// rows (in the partner format of activations.h), with one implementation per SIMD level and a
// run-time choice among them. MatMul (kernels/matmul.h) is built on these.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/activations.h"
#include "quant/ggml_type.h"
#include "util/cpu_features.h"

namespace qevict {

// Most activation rows one kernel call handles; each weight block is decoded once per call and
// reused for all of them.
inline constexpr int kMaxTileTokens = 16;

// A tile of dot products: for r < n_rows and t < n_tok (1 <= n_tok <= kMaxTileTokens)
//   out[t * out_stride + r] = sum_i W_r[i] * A_t[i],   i < n,
// where W_r is the weight row at w + r * w_stride and A_t the activation row at
// act + t * act_stride. n is a multiple of the weight type's block size.
using DotTileFn = void (*)(int64_t n, const uint8_t* w, size_t w_stride, int n_rows,
                           const uint8_t* act, size_t act_stride, int n_tok, float* out,
                           int64_t out_stride);

struct DotKernel {
  ActivationFormat activation = ActivationFormat::kF32;
  DotTileFn tile = nullptr;
  SimdLevel level = SimdLevel::kPortable;  // level of the code actually chosen
};

// What the kernel will be called for: one activation row (decode) or tiles of up to
// kMaxTileTokens rows (prefill). Some types have a different best kernel for each (AVX-512
// Q5_0 / Q5_1: the interleaved kernel wins on tiles and loses on single rows, whose weight
// unpacking it cannot share; bench/matmul_bench.cc).
enum class DotShape { kTiles, kSingleRow };

// The kernel for a weight type at a SIMD level (the best implementation at or below `level`;
// types without a faster version fall back to portable). Checks the type is weight_supported.
// Every kernel accepts any n_tok: the shape only says which one is fastest.
DotKernel SelectDotKernel(GgmlType weight_type, SimdLevel level,
                          DotShape shape = DotShape::kTiles);
inline DotKernel SelectDotKernel(GgmlType weight_type, DotShape shape = DotShape::kTiles) {
  return SelectDotKernel(weight_type, ActiveSimdLevel(), shape);
}

}  // namespace qevict
