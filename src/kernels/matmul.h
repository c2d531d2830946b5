// Matrix products of quantized weights with fp32 activations. Weights stay in their GGUF block
// format; activations are quantized per row to the partner format of the weight type (Q8_0,
// Q8_1 or Q8_K) and multiplied through integer dot products. SIMD level chosen at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "quant/ggml_type.h"
#include "util/thread_pool.h"

namespace qevict {

// A 2-D weight tensor as stored in GGUF: `rows` rows of `cols` elements, row-major.
struct WeightView {
  GgmlType type;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
};

// y[t][r] = sum_c W[r][c] * x[t][c] for t < n_tokens.
// x: [n_tokens][cols] fp32, y: [n_tokens][rows] fp32 (distinct from x).
void MatMul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// One product of a group: y = W x, shapes as for MatMul.
struct MatMulProduct {
  const WeightView* w = nullptr;
  float* y = nullptr;
};

// Several products of the same activations (a layer's Q, K and V projections; its gate and up
// projections): the activations are quantized once per partner format and every weight's rows
// go through one parallel region, so the pool meets once for the group instead of once per
// weight. Each y is what MatMul would write, bit for bit. Every weight has x's `cols`.
void MatMulGroup(std::span<const MatMulProduct> products, const float* x, int64_t n_tokens,
                 ThreadPool& pool);

// Same product computed by dequantizing each row to fp32 (slow; the reference for tests).
void MatMulReference(const WeightView& w, const float* x, int64_t n_tokens, float* y);

}  // namespace qevict
