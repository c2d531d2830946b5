// AVX-512 kernel table.
#include "quant/vec_dot_impl.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot {

DotKernel Avx512Kernel(GgmlType weight_type, DotShape shape) {
  // Q5_0 / Q5_1 single rows: the plain-order kernel (the interleaved one gathers and unpacks
  // the fifth bits of every 16 blocks for one row only).
  const bool q5 = weight_type == GgmlType::kQ5_0 || weight_type == GgmlType::kQ5_1;
  DotTileFn interleaved =
      q5 && shape == DotShape::kSingleRow ? nullptr : avx512::InterleavedBlock32Tile(weight_type);
  if (DotTileFn f = interleaved) {
    return {ActivationFormat::kQ8Block32Interleaved, f, SimdLevel::kAvx512};
  }
  DotTileFn f = avx512::LegacyTile(weight_type);
  if (f == nullptr) f = avx512::KQuantTile(weight_type);
  if (f == nullptr) f = avx512::FloatTile(weight_type);
  return {PartnerFormat(weight_type), f, SimdLevel::kAvx512};
}

}  // namespace qevict::vec_dot
