// DequantizeRow (declared in ggml_type.h): dispatch to the per-type scalar decoders.
#include "quant/dequantize_impl.h"
#include "quant/ggml_type.h"
#include "util/error.h"

namespace qevict {

void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  QEVICT_CHECK(n % GetTypeTraits(type).block_size == 0);
  switch (type) {
    case GgmlType::kF32: return dequant::F32(src, dst, n);
    case GgmlType::kF16: return dequant::F16(src, dst, n);
    case GgmlType::kBF16: return dequant::BF16(src, dst, n);
    case GgmlType::kQ4_0: return dequant::Q4_0(src, dst, n);
    case GgmlType::kQ4_1: return dequant::Q4_1(src, dst, n);
    case GgmlType::kQ5_0: return dequant::Q5_0(src, dst, n);
    case GgmlType::kQ5_1: return dequant::Q5_1(src, dst, n);
    case GgmlType::kQ8_0: return dequant::Q8_0(src, dst, n);
    case GgmlType::kQ8_1: return dequant::Q8_1(src, dst, n);
    case GgmlType::kQ2_K: return dequant::Q2K(src, dst, n);
    case GgmlType::kQ3_K: return dequant::Q3K(src, dst, n);
    case GgmlType::kQ4_K: return dequant::Q4K(src, dst, n);
    case GgmlType::kQ5_K: return dequant::Q5K(src, dst, n);
    case GgmlType::kQ6_K: return dequant::Q6K(src, dst, n);
    case GgmlType::kQ8_K: return dequant::Q8K(src, dst, n);
  }
  QEVICT_CHECK(false && "DequantizeRow: unknown type");
}

}  // namespace qevict
