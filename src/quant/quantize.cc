// QuantizeRow (quantize.h): dispatch to the per-type quantizers.
#include "quant/quantize.h"

#include "quant/quantize_impl.h"
#include "util/error.h"

namespace qevict {

bool CanQuantize(GgmlType type) { return FindTypeTraits(static_cast<uint32_t>(type)).has_value(); }

void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n) {
  QEVICT_CHECK(n % GetTypeTraits(type).block_size == 0);
  switch (type) {
    case GgmlType::kF32: return quantize::F32(src, dst, n);
    case GgmlType::kF16: return quantize::F16(src, dst, n);
    case GgmlType::kBF16: return quantize::BF16(src, dst, n);
    case GgmlType::kQ4_0: return quantize::Q4_0(src, dst, n);
    case GgmlType::kQ4_1: return quantize::Q4_1(src, dst, n);
    case GgmlType::kQ5_0: return quantize::Q5_0(src, dst, n);
    case GgmlType::kQ5_1: return quantize::Q5_1(src, dst, n);
    case GgmlType::kQ8_0: return quantize::Q8_0(src, dst, n);
    case GgmlType::kQ8_1: return quantize::Q8_1(src, dst, n);
    case GgmlType::kQ2_K: return quantize::Q2K(src, dst, n);
    case GgmlType::kQ3_K: return quantize::Q3K(src, dst, n);
    case GgmlType::kQ4_K: return quantize::Q4K(src, dst, n);
    case GgmlType::kQ5_K: return quantize::Q5K(src, dst, n);
    case GgmlType::kQ6_K: return quantize::Q6K(src, dst, n);
    case GgmlType::kQ8_K: return quantize::Q8K(src, dst, n);
  }
  QEVICT_CHECK(false && "QuantizeRow: unknown type");
}

}  // namespace qevict
