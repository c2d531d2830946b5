// The Highway targets every *_hwy.cc file compiles. Include it before hwy/foreach_target.h: the
// files then share one list of targets, so the dispatch index that the SIMD level picks
// (attention_impl::highway::DispatchIndex) is valid for each file's HWY_EXPORT tables.
#pragma once

// Machines without AVX2 run the portable code (SimdLevel::kPortable): no SSSE3/SSE4 targets.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
