// AVX-512 kernel table.
#include "quant/vec_dot_impl.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot {

DotKernel Avx512Kernel(GgmlType weight_type) {
  if (DotTileFn f = avx512::InterleavedQ4Tile(weight_type)) {
    return {ActivationFormat::kQ8Block32Interleaved, f, SimdLevel::kAvx512};
  }
  DotTileFn f = avx512::LegacyTile(weight_type);
  if (f == nullptr) f = avx512::KQuantTile(weight_type);
  if (f == nullptr) f = avx512::FloatTile(weight_type);
  return {PartnerFormat(weight_type), f, SimdLevel::kAvx512};
}

}  // namespace qevict::vec_dot
