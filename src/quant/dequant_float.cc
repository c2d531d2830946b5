// Row conversion of the unquantized storage types (F32, F16, BF16) to fp32.
#include <cstring>

#include "quant/dequantize_impl.h"
#include "util/fp16.h"

namespace qevict::dequant {

void F32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void F16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, h + 2 * i, 2);
    dst[i] = Fp16ToFp32(bits);
  }
}

void BF16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, h + 2 * i, 2);
    dst[i] = Bf16ToFp32(bits);
  }
}

}  // namespace qevict::dequant
