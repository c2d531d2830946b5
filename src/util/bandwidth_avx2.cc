// The bandwidth loop with 256-bit loads (compiled with -mavx2).
#include <immintrin.h>

#include "util/bandwidth.h"

namespace qevict::bandwidth_internal {

uint64_t SumWordsAvx2(const uint64_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 16) {
    const __m256i* v = reinterpret_cast<const __m256i*>(p + i);
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(v + 0));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(v + 1));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(v + 2));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(v + 3));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace qevict::bandwidth_internal
