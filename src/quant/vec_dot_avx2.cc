// AVX2 kernel table.
#include "quant/vec_dot_impl.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot {

DotKernel Avx2Kernel(GgmlType weight_type) {
  DotTileFn f = avx2::LegacyTile(weight_type);
  if (f == nullptr) f = avx2::KQuantTile(weight_type);
  if (f == nullptr) f = avx2::FloatTile(weight_type);
  return {PartnerFormat(weight_type), f, SimdLevel::kAvx2};
}

}  // namespace qevict::vec_dot
