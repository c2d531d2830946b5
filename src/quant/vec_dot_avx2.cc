// AVX2 kernel table.
#include "quant/vec_dot_impl.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot {

DotKernel Avx2Kernel(GgmlType weight_type, DotShape shape) {
  // Tiles of several tokens (prefill): the interleaved kernel applies scales once per 8 blocks.
  // Single rows (decode): the plain-order kernel, which needs no gathers.
  if (shape == DotShape::kTiles) {
    if (DotTileFn f = avx2::InterleavedBlock32Tile(weight_type)) {
      return {ActivationFormat::kQ8Block32Interleaved, f, SimdLevel::kAvx2};
    }
  }
  DotTileFn f = avx2::LegacyTile(weight_type);
  if (f == nullptr) f = avx2::KQuantTile(weight_type);
  if (f == nullptr) f = avx2::FloatTile(weight_type);
  return {PartnerFormat(weight_type), f, SimdLevel::kAvx2};
}

}  // namespace qevict::vec_dot
