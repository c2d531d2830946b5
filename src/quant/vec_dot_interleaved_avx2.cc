// AVX2 kernels for Q4_0, Q4_1, Q5_0 and Q5_1 with kQ8Block32Interleaved activations: the
// AVX-512 scheme (vec_dot_interleaved_avx512.cc) on 256-bit registers, without VNNI.
//
// Each full group of 16 blocks is done as two halves of 8 blocks, one 32-bit lane per block:
// the low and high 32 bytes of each 64-byte activation chunk (activations.h) are the halves'
// codes. Four gathers fetch bytes 4k..4k+3 of the nibble array of the 8 blocks (k < 4); their
// low nibbles are elements 4k..4k+3 and their high nibbles 16+4k..16+4k+3 of each block, so
// they line up with the interleaved activation codes. Q5_0 / Q5_1 gather each block's qh and
// set the fifth bit the same way as on AVX-512 (a byte shuffle spreads the qh byte over the
// lane, a compare against the four bits picks the elements). Per token, vpmaddubsw multiplies
// eight weight registers by eight activation loads; the 16-bit pair sums are added (at most 8
// for 4-bit codes, 4 for 5-bit ones, so they stay below 2^15), vpmaddwd turns them into one
// 32-bit sum per block, and one conversion and two fused multiply-adds apply the 8 blocks'
// scales and constant terms: against one conversion and one multiply-add per block in the
// plain-order kernel (vec_dot_legacy_avx2.cc). The weight side is shared by the tokens of a
// pass. The last n/32 % 16 blocks (plain order) are done one at a time.
#include "quant/block32_avx2.h"
#include "quant/tile_passes.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot::avx2 {
namespace {

using block32::HalvesToFloat;
using block32::LoadBlock;
using block32::Q4_0Format;
using block32::Q4_1Format;
using block32::Q5_0Format;
using block32::Q5_1Format;

template <int T>
struct ActPointers {
  const int8_t* qs[T];
  const float* d[T];
  const float* sums[T];
};

inline __m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// The weight side of 8 consecutive blocks at base: scales d, constant terms m (the min, or
// offset * d), and the codes in interleaved order (lo[k]: elements 4k..4k+3 of each block in
// its lane, hi[k]: elements 16+4k..16+4k+3), unsigned.
template <class F>
struct HalfGroup {
  __m256 d, m;
  __m256i lo[4], hi[4];
};

// Adds 16 to the codes whose fifth bit is set; qh holds each lane's 32 high bits (bit e for
// element e).
inline void AddFifthBits(__m256i qh, __m256i lo[4], __m256i hi[4]) {
  // Byte c of each dword of qh copied to the dword's four bytes.
  const auto spread = [qh](int c) {
    const __m256i index = _mm256_add_epi8(
        _mm256_setr_epi32(0x00000000, 0x04040404, 0x08080808, 0x0c0c0c0c, 0x00000000, 0x04040404, 0x08080808,
                          0x0c0c0c0c),
        _mm256_set1_epi8(static_cast<char>(c)));
    return _mm256_shuffle_epi8(qh, index);
  };
  const __m256i sixteen = _mm256_set1_epi8(0x10);
  const __m256i bits_even = _mm256_set1_epi32(0x08040201);                     // bits 0-3, one per byte
  const __m256i bits_odd = _mm256_set1_epi32(static_cast<int>(0x80402010u));  // bits 4-7
  const __m256i byte_lo[2] = {spread(0), spread(1)};
  const __m256i byte_hi[2] = {spread(2), spread(3)};
  for (int k = 0; k < 4; ++k) {
    const __m256i bits = k % 2 == 0 ? bits_even : bits_odd;
    const __m256i set_lo = _mm256_cmpeq_epi8(_mm256_and_si256(byte_lo[k / 2], bits), bits);
    const __m256i set_hi = _mm256_cmpeq_epi8(_mm256_and_si256(byte_hi[k / 2], bits), bits);
    lo[k] = _mm256_or_si256(lo[k], _mm256_and_si256(set_lo, sixteen));
    hi[k] = _mm256_or_si256(hi[k], _mm256_and_si256(set_hi, sixteen));
  }
}

template <class F>
inline void LoadHalfGroup(const uint8_t* base, HalfGroup<F>* g) {
  const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(F::kBlockBytes));
  PrefetchAhead(base, 8 * F::kBlockBytes);
  const __m256i head = _mm256_i32gather_epi32(reinterpret_cast<const int*>(base), offsets, 1);
  g->d = HalvesToFloat(head, 0);
  g->m = F::kHasMin ? HalvesToFloat(head, 16) : _mm256_mul_ps(g->d, _mm256_set1_ps(F::kOffset));
  const __m256i low_nibble = _mm256_set1_epi8(0x0f);
  for (int k = 0; k < 4; ++k) {
    const __m256i words = _mm256_i32gather_epi32(reinterpret_cast<const int*>(base + F::kQsOffset + 4 * k), offsets, 1);
    g->lo[k] = _mm256_and_si256(words, low_nibble);
    g->hi[k] = _mm256_and_si256(_mm256_srli_epi32(words, 4), low_nibble);
  }
  if constexpr (F::kQhOffset >= 0) {
    AddFifthBits(_mm256_i32gather_epi32(reinterpret_cast<const int*>(base + F::kQhOffset), offsets, 1), g->lo, g->hi);
  }
}

// One 32-bit integer dot product per block of the half group against the activation codes at
// q (chunk k at q + 64k). 4-bit codes: eight 16-bit pair sums of at most 2 * 15 * 127 add up
// below 2^15; 5-bit codes (up to 2 * 31 * 127) are widened after four.
template <class F>
inline __m256i HalfDot(const HalfGroup<F>& g, const int8_t* q) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i a = _mm256_maddubs_epi16(g.lo[0], Load256(q));
  a = _mm256_add_epi16(a, _mm256_maddubs_epi16(g.lo[1], Load256(q + 64)));
  a = _mm256_add_epi16(a, _mm256_maddubs_epi16(g.lo[2], Load256(q + 128)));
  a = _mm256_add_epi16(a, _mm256_maddubs_epi16(g.lo[3], Load256(q + 192)));
  __m256i b = _mm256_maddubs_epi16(g.hi[0], Load256(q + 256));
  b = _mm256_add_epi16(b, _mm256_maddubs_epi16(g.hi[1], Load256(q + 320)));
  b = _mm256_add_epi16(b, _mm256_maddubs_epi16(g.hi[2], Load256(q + 384)));
  b = _mm256_add_epi16(b, _mm256_maddubs_epi16(g.hi[3], Load256(q + 448)));
  if constexpr (F::kQhOffset >= 0) {
    return _mm256_add_epi32(_mm256_madd_epi16(a, ones), _mm256_madd_epi16(b, ones));
  } else {
    return _mm256_madd_epi16(_mm256_add_epi16(a, b), ones);
  }
}

template <class F, int T>
inline void RowDot(int64_t nb, const uint8_t* w, const ActPointers<T>& a, float out[T]) {
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const int64_t full_groups = nb / 16;
  for (int64_t g = 0; g < full_groups; ++g) {
    for (int h = 0; h < 2; ++h) {
      HalfGroup<F> half;
      LoadHalfGroup<F>(w + (16 * g + 8 * h) * F::kBlockBytes, &half);
      const int64_t first = 16 * g + 8 * h;  // the half's first block
      for (int t = 0; t < T; ++t) {
        const __m256i isum = HalfDot<F>(half, a.qs[t] + 512 * g + 32 * h);
        const __m256 scale = _mm256_mul_ps(half.d, _mm256_loadu_ps(a.d[t] + first));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[t]);
        acc[t] = _mm256_fmadd_ps(half.m, _mm256_loadu_ps(a.sums[t] + first), acc[t]);
      }
    }
  }
  float tail_const[T] = {};
  for (int64_t b = 16 * full_groups; b < nb; ++b) {
    const uint8_t* blk = w + b * F::kBlockBytes;
    const __m256i wq = LoadBlock<F>(blk);
    const float dw = LoadHalf(blk);
    const float mw = F::kHasMin ? LoadHalf(blk + 2) : dw * F::kOffset;
    for (int t = 0; t < T; ++t) {
      const __m256i codes = Load256(a.qs[t] + 32 * b);  // the tail blocks follow the groups
      const __m256 scale = _mm256_set1_ps(dw * a.d[t][b]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DotUnsignedSigned(wq, codes)), scale, acc[t]);
      tail_const[t] += mw * a.sums[t][b];
    }
  }
  for (int t = 0; t < T; ++t) out[t] = HorizontalSum(acc[t]) + tail_const[t];
}

template <class F, int T>
void Rows(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act, size_t act_stride,
          float* out, int64_t out_stride) {
  ActPointers<T> a;
  for (int t = 0; t < T; ++t) {
    const uint8_t* row = act + t * act_stride;
    a.qs[t] = reinterpret_cast<const int8_t*>(row);
    a.d[t] = reinterpret_cast<const float*>(row + ActScaleOffset(n));
    a.sums[t] = reinterpret_cast<const float*>(row + ActSumOffset32Packed(n));
  }
  for (int r = 0; r < n_rows; ++r) {
    float result[T];
    RowDot<F, T>(n / 32, w + r * w_stride, a, result);
    for (int t = 0; t < T; ++t) out[t * out_stride + r] = result[t];
  }
}

template <class F>
void Tile(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act, size_t act_stride,
          int n_tok, float* out, int64_t out_stride) {
  TileInPassesOfFour(act, act_stride, n_tok, out, out_stride,
                     [&](auto tokens, const uint8_t* a, float* o) {
                       Rows<F, decltype(tokens)::value>(n, w, w_stride, n_rows, a, act_stride, o,
                                                            out_stride);
                     });
}

}  // namespace

DotTileFn InterleavedBlock32Tile(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::kQ4_0: return Tile<Q4_0Format>;
    case GgmlType::kQ4_1: return Tile<Q4_1Format>;
    case GgmlType::kQ5_0: return Tile<Q5_0Format>;
    case GgmlType::kQ5_1: return Tile<Q5_1Format>;
    default: return nullptr;
  }
}

}  // namespace qevict::vec_dot::avx2
