// The portable kernel table: every weight_supported type.
#include "quant/vec_dot_impl.h"
#include "quant/vec_dot_portable.h"

namespace qevict::vec_dot {

namespace {

DotTileFn PortableTile(GgmlType weight_type) {
  using namespace portable;  // NOLINT(build/namespaces)
  switch (weight_type) {
    case GgmlType::kF32: return TileFromDot<DotF32>;
    case GgmlType::kF16: return TileFromDot<DotF16>;
    case GgmlType::kBF16: return TileFromDot<DotBF16>;
    case GgmlType::kQ4_0: return TileFromDot<DotQ4_0>;
    case GgmlType::kQ4_1: return TileFromDot<DotQ4_1>;
    case GgmlType::kQ5_0: return TileFromDot<DotQ5_0>;
    case GgmlType::kQ5_1: return TileFromDot<DotQ5_1>;
    case GgmlType::kQ8_0: return TileFromDot<DotQ8_0>;
    case GgmlType::kQ2_K: return TileFromDot<DotQ2K>;
    case GgmlType::kQ3_K: return TileFromDot<DotQ3K>;
    case GgmlType::kQ4_K: return TileFromDot<DotQ4K>;
    case GgmlType::kQ5_K: return TileFromDot<DotQ5K>;
    case GgmlType::kQ6_K: return TileFromDot<DotQ6K>;
    default: return nullptr;
  }
}

}  // namespace

DotKernel PortableKernel(GgmlType weight_type) {
  return {PartnerFormat(weight_type), PortableTile(weight_type), SimdLevel::kPortable};
}

}  // namespace qevict::vec_dot
