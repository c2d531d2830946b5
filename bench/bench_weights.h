// Weight matrices for the micro benchmarks: 64-byte aligned, filled with deterministic
// pseudo-random values quantized to the requested type, built once per shape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <tuple>
#include <vector>

#include "quant/ggml_type.h"
#include "quant/quantize.h"

namespace qevict::bench {

struct AlignedBytes {
  explicit AlignedBytes(size_t n)
      : size(n), data(static_cast<uint8_t*>(::operator new(n, std::align_val_t{64}))) {}
  ~AlignedBytes() { ::operator delete(data, std::align_val_t{64}); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  size_t size;
  uint8_t* data;
};

// A rows x cols matrix of the given type, cached for the process.
inline const AlignedBytes& Weights(GgmlType type, int64_t rows, int64_t cols) {
  static std::map<std::tuple<GgmlType, int64_t, int64_t>, std::unique_ptr<AlignedBytes>> cache;
  auto& slot = cache[{type, rows, cols}];
  if (!slot) {
    const size_t row_bytes = RowBytes(type, cols);
    slot = std::make_unique<AlignedBytes>(row_bytes * rows);
    std::vector<float> x(cols);
    uint32_t s = 12345;
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : x) {
        s = s * 1664525u + 1013904223u;
        v = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * 0.2f;
      }
      QuantizeRow(type, x.data(), slot->data + r * row_bytes, cols);
    }
  }
  return *slot;
}

}  // namespace qevict::bench
