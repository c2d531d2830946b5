// Internal: portable scalar dot products of one weight row with one activation row (the partner
// format of activations.h). They are the fallback of every SIMD level and the reference the
// SIMD kernels are tested against.
#pragma once

#include <cstdint>

namespace qevict::vec_dot::portable {

// Float weights with fp32 activations.
float DotF32(int64_t n, const uint8_t* w, const uint8_t* act);
float DotF16(int64_t n, const uint8_t* w, const uint8_t* act);
float DotBF16(int64_t n, const uint8_t* w, const uint8_t* act);

// 32-element formats with kQ8Block32 activations.
float DotQ4_0(int64_t n, const uint8_t* w, const uint8_t* act);
float DotQ4_1(int64_t n, const uint8_t* w, const uint8_t* act);
float DotQ5_0(int64_t n, const uint8_t* w, const uint8_t* act);
float DotQ5_1(int64_t n, const uint8_t* w, const uint8_t* act);
float DotQ8_0(int64_t n, const uint8_t* w, const uint8_t* act);

// K-quants with kQ8Block256 activations.
float DotQ2K(int64_t n, const uint8_t* w, const uint8_t* act);
float DotQ3K(int64_t n, const uint8_t* w, const uint8_t* act);
float DotQ4K(int64_t n, const uint8_t* w, const uint8_t* act);
float DotQ5K(int64_t n, const uint8_t* w, const uint8_t* act);
float DotQ6K(int64_t n, const uint8_t* w, const uint8_t* act);

}  // namespace qevict::vec_dot::portable
