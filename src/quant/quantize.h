// Quantization of fp32 rows into the GGUF block formats (portable scalar, round to nearest).
// These produce valid blocks for every format we can dequantize; they aim for correctness and
// determinism, not for the error-minimizing searches of llama.cpp's quantize tool. Used by
// tests and benchmarks to build weight matrices, and as the reference for activation formats.
#pragma once

#include <cstdint>

#include "quant/ggml_type.h"

namespace qevict {

// True for every type QuantizeRow accepts (all types of ggml_type.h).
bool CanQuantize(GgmlType type);

// dst (RowBytes(type, n) bytes) = src[0..n) encoded. n must be a multiple of the block size.
void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace qevict
