// Encoding of fp32 rows as F32, F16 (round to nearest even) and BF16.
#include <cstring>

#include "quant/quantize_impl.h"
#include "util/fp16.h"

namespace qevict::quantize {

void F32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void F16(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = Fp32ToFp16(src[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void BF16(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = Fp32ToBf16(src[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

}  // namespace qevict::quantize
