// How the x86 dot kernels walk a tile of activation rows: in passes of at most four tokens, as
// four tokens' accumulators and the decoded weights fill the vector registers (sixteen ymm on
// AVX2, the same budget kept on AVX-512); a larger tile is done in passes that decode the
// weights again. One walk for every kernel file (legacy, K-quant, float and interleaved, AVX2
// and AVX-512), which differ only in the pass they run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace qevict::vec_dot {

// rows(std::integral_constant<int, T>{}, act_rows, out_rows) runs one pass of T <= 4 tokens:
// act_rows is the pass's first activation row, out_rows its first output row.
template <class PassFn>
inline void TileInPassesOfFour(const uint8_t* act, size_t act_stride, int n_tok, float* out,
                               int64_t out_stride, PassFn&& rows) {
  for (int t0 = 0; t0 < n_tok; t0 += 4) {
    const uint8_t* a = act + t0 * act_stride;
    float* o = out + t0 * out_stride;
    switch (n_tok - t0) {
      case 1: rows(std::integral_constant<int, 1>{}, a, o); break;
      case 2: rows(std::integral_constant<int, 2>{}, a, o); break;
      case 3: rows(std::integral_constant<int, 3>{}, a, o); break;
      default: rows(std::integral_constant<int, 4>{}, a, o); break;
    }
  }
}

}  // namespace qevict::vec_dot
