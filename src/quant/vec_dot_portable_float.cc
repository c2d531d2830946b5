// Portable dot products of F32 / F16 / BF16 weight rows with fp32 activations. Eight partial
// sums keep the loop vectorizable and the rounding independent of the compiler.
#include <cstring>

#include "quant/vec_dot_portable.h"
#include "util/fp16.h"

namespace qevict::vec_dot::portable {
namespace {

template <float (*Load)(const uint8_t*, int64_t)>
float DotWith(int64_t n, const uint8_t* w, const uint8_t* act) {
  const auto* x = reinterpret_cast<const float*>(act);
  float partial[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) partial[k] += Load(w, i + k) * x[i + k];
  }
  for (; i < n; ++i) partial[i & 7] += Load(w, i) * x[i];
  return ((partial[0] + partial[4]) + (partial[1] + partial[5])) +
         ((partial[2] + partial[6]) + (partial[3] + partial[7]));
}

inline float LoadF32(const uint8_t* w, int64_t i) {
  float v;
  std::memcpy(&v, w + 4 * i, 4);
  return v;
}
inline float LoadF16(const uint8_t* w, int64_t i) {
  uint16_t h;
  std::memcpy(&h, w + 2 * i, 2);
  return Fp16ToFp32(h);
}
inline float LoadBF16(const uint8_t* w, int64_t i) {
  uint16_t h;
  std::memcpy(&h, w + 2 * i, 2);
  return Bf16ToFp32(h);
}

}  // namespace

float DotF32(int64_t n, const uint8_t* w, const uint8_t* act) { return DotWith<LoadF32>(n, w, act); }
float DotF16(int64_t n, const uint8_t* w, const uint8_t* act) { return DotWith<LoadF16>(n, w, act); }
float DotBF16(int64_t n, const uint8_t* w, const uint8_t* act) { return DotWith<LoadBF16>(n, w, act); }

}  // namespace qevict::vec_dot::portable
