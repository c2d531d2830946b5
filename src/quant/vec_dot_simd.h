// Internal: the SIMD kernel families, one file each per level. Each returns its kernel for a
// weight type or null when the family does not cover that type. Call only when the CPU supports
// the level (SelectDotKernel guarantees it).
//
// The *_avx2.cc / *_avx512.cc files are compiled for their instruction set, so everything they
// define lives in an anonymous namespace (no inline function of a shared header is emitted from
// them, which could otherwise be picked by the linker for portable callers).
#pragma once

#include "quant/vec_dot.h"

namespace qevict::vec_dot {

namespace avx2 {
DotTileFn InterleavedBlock32Tile(GgmlType weight_type);  // Q4_0, Q4_1, Q5_0, Q5_1 (kQ8Block32Interleaved)
DotTileFn LegacyTile(GgmlType weight_type);   // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
DotTileFn KQuantTile(GgmlType weight_type);   // Q4_K, Q5_K, Q6_K
DotTileFn FloatTile(GgmlType weight_type);    // F32, F16, BF16
}  // namespace avx2

namespace avx512 {
DotTileFn InterleavedBlock32Tile(GgmlType weight_type);  // Q4_0, Q4_1, Q5_0, Q5_1 (kQ8Block32Interleaved)
DotTileFn LegacyTile(GgmlType weight_type);         // Q5_0, Q5_1, Q8_0
DotTileFn KQuantTile(GgmlType weight_type);
DotTileFn FloatTile(GgmlType weight_type);
}  // namespace avx512

// Byte offsets of the sections of an activation row (activations.h), for the SIMD files.
inline constexpr size_t ActScaleOffset(int64_t n) { return (static_cast<size_t>(n) + 63) & ~size_t{63}; }
inline constexpr size_t ActSumOffset32(int64_t n) {
  return ActScaleOffset(n) + ((static_cast<size_t>(n) / 32 * 8 * sizeof(float) + 63) & ~size_t{63});
}
inline constexpr size_t ActSumOffset256(int64_t n) {
  return ActScaleOffset(n) + ((static_cast<size_t>(n) / 256 * sizeof(float) + 63) & ~size_t{63});
}
// kQ8Block32Interleaved has the section offsets of kQ8Block32 (scales at ActScaleOffset, sums
// at ActSumOffset32Packed), with one scale per block instead of eight.
inline constexpr size_t ActSumOffset32Packed(int64_t n) {
  return ActScaleOffset(n) + ((static_cast<size_t>(n) / 32 * sizeof(float) + 63) & ~size_t{63});
}

}  // namespace qevict::vec_dot
