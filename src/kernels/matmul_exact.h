// The exact matrix product: weights dequantized to fp32 and multiplied with the fp32
// activations as they are (no activation quantization), accumulated in fp64. Slow; it exists so
// the forward pass can be checked against fp32 references (Hugging Face transformers) to
// within float rounding, separately from the quantization noise of the fast kernels.
#pragma once

#include "kernels/matmul.h"

namespace qevict {

void MatMulExact(const WeightView& w, const float* x, int64_t n_tokens, float* y,
                 ThreadPool& pool);

}  // namespace qevict
