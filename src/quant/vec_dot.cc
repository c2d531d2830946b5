// SelectDotKernel: the best kernel at or below the requested SIMD level.
#include "quant/vec_dot.h"

#include "quant/vec_dot_impl.h"
#include "util/error.h"

namespace qevict {
namespace vec_dot {

ActivationFormat PartnerFormat(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
      return ActivationFormat::kQ8Block32;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return ActivationFormat::kQ8Block256;
    default:
      return ActivationFormat::kF32;
  }
}

}  // namespace vec_dot

DotKernel SelectDotKernel(GgmlType weight_type, SimdLevel level, DotShape shape) {
  QEVICT_CHECK(GetTypeTraits(weight_type).weight_supported);
  level = level < DetectedSimdLevel() ? level : DetectedSimdLevel();
  DotKernel kernel;
#if defined(__x86_64__)  // the hand-written x86 files (elsewhere the level is always portable)
  if (level >= SimdLevel::kAvx512) kernel = vec_dot::Avx512Kernel(weight_type, shape);
  if (kernel.tile == nullptr && level >= SimdLevel::kAvx2) kernel = vec_dot::Avx2Kernel(weight_type, shape);
#endif
  if (kernel.tile == nullptr) kernel = vec_dot::PortableKernel(weight_type);
  QEVICT_CHECK(kernel.tile != nullptr);
  return kernel;
}

}  // namespace qevict
