#include "quant/ggml_type.h"

#include <array>

#include "util/error.h"

namespace qevict {
namespace {

// Block geometry of every type id we know. Types present in the format but without a weight
// kernel here (the activation-only Q8_1/Q8_K) are known but not weight_supported, so a file
// using them is refused with a clear message instead of misread.
constexpr std::array<TypeTraits, 15> kTraits = {{
    {GgmlType::kF32, "F32", 1, 4, true},
    {GgmlType::kF16, "F16", 1, 2, true},
    {GgmlType::kBF16, "BF16", 1, 2, true},
    {GgmlType::kQ4_0, "Q4_0", 32, 18, true},
    {GgmlType::kQ4_1, "Q4_1", 32, 20, true},
    {GgmlType::kQ5_0, "Q5_0", 32, 22, true},
    {GgmlType::kQ5_1, "Q5_1", 32, 24, true},
    {GgmlType::kQ8_0, "Q8_0", 32, 34, true},
    {GgmlType::kQ8_1, "Q8_1", 32, 36, false},
    {GgmlType::kQ2_K, "Q2_K", 256, 84, true},
    {GgmlType::kQ3_K, "Q3_K", 256, 110, true},
    {GgmlType::kQ4_K, "Q4_K", 256, 144, true},
    {GgmlType::kQ5_K, "Q5_K", 256, 176, true},
    {GgmlType::kQ6_K, "Q6_K", 256, 210, true},
    {GgmlType::kQ8_K, "Q8_K", 256, 292, false},
}};

}  // namespace

std::optional<TypeTraits> FindTypeTraits(uint32_t type_id) {
  for (const TypeTraits& t : kTraits) {
    if (static_cast<uint32_t>(t.type) == type_id) return t;
  }
  return std::nullopt;
}

const TypeTraits& GetTypeTraits(GgmlType type) {
  for (const TypeTraits& t : kTraits) {
    if (t.type == type) return t;
  }
  QEVICT_CHECK(false && "unknown GgmlType");
}

size_t RowBytes(GgmlType type, int64_t n) {
  const TypeTraits& t = GetTypeTraits(type);
  QEVICT_CHECK(n >= 0 && n % t.block_size == 0);
  return static_cast<size_t>(n / t.block_size) * t.block_bytes;
}

}  // namespace qevict
