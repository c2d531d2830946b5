// Tensor element types as numbered in the GGUF/ggml format, their block geometry, and
// dequantization of whole rows (the scalar reference every fast kernel is tested against).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace qevict {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kBF16 = 30,
};

struct TypeTraits {
  GgmlType type;
  const char* name;     // "Q4_1", as llama.cpp prints it
  int block_size;       // elements per block
  size_t block_bytes;   // bytes per block
  bool weight_supported;  // may appear as a model tensor (dequantize + dot product exist)
};

// Traits of a known type id, or nullopt for ids this build does not know (unknown, deprecated,
// or removed types such as Q4_2). Never throws.
std::optional<TypeTraits> FindTypeTraits(uint32_t type_id);
const TypeTraits& GetTypeTraits(GgmlType type);  // for types known to exist

// Bytes of a row of n elements; n must be a multiple of the block size (callers validate first).
size_t RowBytes(GgmlType type, int64_t n);

// dst[0..n) = the n elements encoded at src. n must be a multiple of the block size.
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);

}  // namespace qevict
