// Small helpers for the *_avx512.cc kernel files only (they need the AVX-512 flags). Functions
// are static so that each kernel file keeps its own copy: an out-of-line copy compiled for
// AVX-512 must never be shared with code that runs on other CPUs.
#pragma once

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_*()
// (GCC PR 105593, fixed in GCC 13); the warning concerns the header, not the including code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace qevict::vec_dot::avx512 {

// Software prefetch distance for the weight stream. Decode reads each weight once, from DRAM or
// the last-level cache; touching the lines ~2 KiB ahead keeps more misses in flight than the
// hardware prefetcher alone (measured: cold 49152x576 Q4_1 decode 3.07 -> 2.45 ms, one thread).
inline constexpr int kPrefetchDistance = 2048;

// Prefetches the cache lines of [p + kPrefetchDistance, p + kPrefetchDistance + bytes).
static inline void PrefetchAhead(const uint8_t* p, int bytes) {
  for (int offset = 0; offset < bytes; offset += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchDistance + offset), _MM_HINT_T0);
  }
}

static inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

static inline float LoadHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

static inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A zeroed register through the xor idiom, which the core resolves at rename without using an
// execution port. (Left to itself GCC keeps one zero register and copies it before every
// accumulating instruction, and zmm copies are not eliminated on recent Intel cores.)
static inline __m512i ZeroInt() {
  __m512i z;
  asm volatile("vpxord %0, %0, %0" : "=v"(z));
  return z;
}

// Sum of the 16 lanes (avoids _mm512_reduce_add_ps, which trips -Wuninitialized in GCC 12).
static inline float HorizontalSum(__m512 v) {
  return HorizontalSum(_mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1)));
}

}  // namespace qevict::vec_dot::avx512
