// Prototype (benchmark only, not linked into the engine): the Q4_1 and Q8_0 dot-product tiles
// of src/quant/vec_dot_*_avx2.cc / *_avx512.cc written once over Google Highway 1.0.3 (the
// version Debian 12 ships), to measure what the single-source version costs. See
// bench/vec_dot_hwy_bench.cc for the figures and bench/vec_dot_hwy.cc for the design.
#pragma once

#include <cstdint>

#include "quant/ggml_type.h"
#include "quant/vec_dot.h"

namespace qevict::vec_dot_hwy {

// How the int8 activation codes reach the i16 multiply-add:
//   kStaged: widened to int16 once per kernel call (a per-thread buffer), reused by every
//            weight row of the call (the engine calls a tile with >= 16 rows in decode);
//   kDirect: sign-extended from the kQ8Block32 row at every use;
//   kNativeShim: an experiment outside Highway 1.0.3: the 8-bit multiply-add it lacks as one
//            intrinsic (vpmaddubsw on the AVX2 target, vpdpbusd on AVX3_DL), to measure what
//            the missing op costs. Only on HWY_AVX2 and HWY_AVX3_DL.
enum class Variant { kStaged, kDirect, kNativeShim };

// The Highway tile (same contract and kQ8Block32 activations as DotTileFn) for Q4_1 or Q8_0,
// compiled for Highway target `target` (HWY_AVX2, HWY_AVX3, HWY_EMU128, ...), or null when
// that target is not compiled or not supported by this CPU.
DotTileFn Tile(GgmlType type, Variant variant, int64_t target);

bool HasNativeShim(int64_t target);

// The Highway targets of this file that this CPU can run (bits of HWY_TARGETS).
int64_t SupportedTargets();
const char* TargetName(int64_t target);

}  // namespace qevict::vec_dot_hwy
