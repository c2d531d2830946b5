// How the x86 dot kernels walk a tile of activation rows: in passes of at most kMax tokens, as
// that many tokens' accumulators and the decoded weights fill the vector registers; a larger
// tile is done in passes that decode the weights again. Four tokens a pass fill sixteen ymm
// (AVX2, and the legacy and float AVX-512 kernels keep that budget); the K-quant AVX-512 kernels
// take eight (their 32 zmm hold eight tokens' integer and float sums). One walk for every kernel
// file (legacy, K-quant, float and interleaved, AVX2 and AVX-512), which differ only in the pass
// they run and its width.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace qevict::vec_dot {

// fn(std::integral_constant<int, n>{}) for the runtime count n in [1, N].
template <int N, class Fn>
inline void WithTokenCount(int n, Fn&& fn) {
  if constexpr (N == 1) {
    fn(std::integral_constant<int, 1>{});
  } else if (n >= N) {
    fn(std::integral_constant<int, N>{});
  } else {
    WithTokenCount<N - 1>(n, fn);
  }
}

// rows(std::integral_constant<int, T>{}, act_rows, out_rows) runs one pass of T <= kMax tokens:
// act_rows is the pass's first activation row, out_rows its first output row.
template <int kMax, class PassFn>
inline void TileInPasses(const uint8_t* act, size_t act_stride, int n_tok, float* out,
                         int64_t out_stride, PassFn&& rows) {
  for (int t0 = 0; t0 < n_tok; t0 += kMax) {
    const uint8_t* a = act + t0 * act_stride;
    float* o = out + t0 * out_stride;
    WithTokenCount<kMax>(n_tok - t0, [&](auto tokens) { rows(tokens, a, o); });
  }
}

template <class PassFn>
inline void TileInPassesOfFour(const uint8_t* act, size_t act_stride, int n_tok, float* out,
                               int64_t out_stride, PassFn&& rows) {
  TileInPasses<4>(act, act_stride, n_tok, out, out_stride, rows);
}

}  // namespace qevict::vec_dot
