// AVX-512 (VNNI) kernels for Q4_0, Q4_1, Q5_0 and Q5_1 with kQ8Block32Interleaved activations.
//
// Sixteen blocks are processed side by side, one 32-bit lane per block. Four registers hold
// bytes 4m..4m+3 of the nibble array of each block (m < 4; for Q4_1, whose 20-byte blocks are
// dword-aligned, by transposing five plain loads; for the others by gathers); their low nibbles
// are elements 4m..4m+3 and their high nibbles elements 16+4m..16+4m+3 of that block. Q5_0 and
// Q5_1 gather each block's 32 high bits (qh) too: one byte shuffle puts the qh byte of elements
// 4m..4m+3 (or 16+4m..) in all four bytes of the lane, a byte test against the four bits picks
// the elements whose fifth bit is set, and a masked add puts 16 on them, so their codes (0-31)
// are unsigned like the nibbles. The activation rows are stored in the same interleaved order
// (activations.h), so eight vpdpbusd accumulate the whole integer dot product of every block in
// its own lane; the block scales, gathered in one more instruction, are then applied to all 16
// blocks with one multiply and two fused multiply-adds (scale, and min or offset * d times the
// activation sums). Per token this costs 12 vector instructions per 512 values; the weight side
// (20 more instructions for the fifth bits) is shared by up to kMaxTileTokens tokens. The last
// n/32 % 16 blocks of a row (stored in plain order) go two at a time through vpdpbusd with
// per-lane scales, as in vec_dot_legacy_avx512.cc.
#include "quant/block32_avx512.h"
#include "quant/simd_helpers_avx512.h"
#include "quant/vec_dot_simd.h"

namespace qevict::vec_dot::avx512 {
namespace {

using block32::LoadPair;
using block32::PairScales;

template <int T>
struct ActPointers {
  const int8_t* qs[T];
  const float* d[T];
  const float* sums[T];
};

// Scales (d) and constant terms (m: the min, or -8 * d) of `count` consecutive blocks.
template <class F>
inline void BlockScales(const uint8_t* base, __mmask16 present, __m512* d, __m512* m) {
  const __m512i block_offsets = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(F::kBlockBytes));
  const __m512i head = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), present, block_offsets, base, 1);
  *d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
  *m = F::kHasMin ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)))
                  : _mm512_mul_ps(*d, _mm512_set1_ps(F::kOffset));
}

// Lanes i of a 16-lane mask where lo <= 5i + c < hi.
constexpr __mmask16 FieldLanes(int c, int lo, int hi) {
  unsigned mask = 0;
  for (int i = 0; i < 16; ++i) mask |= (5 * i + c >= lo && 5 * i + c < hi) ? 1u << i : 0u;
  return static_cast<__mmask16>(mask);
}

// Sixteen consecutive Q4_1 blocks (320 bytes = 5 registers of 16 dwords, five dwords per
// block) transposed into one register per field, lane i = block i: field 0 is d | m << 16,
// field 1 + k is bytes 4k..4k+3 of the nibble array. Three permutes and a blend per field,
// cheaper than five gathers.
template <int c>
inline __m512i Q4_1Field(const __m512i z[5]) {
  const __m512i index = _mm512_add_epi32(
      _mm512_setr_epi32(0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75), _mm512_set1_epi32(c));
  __m512i r = _mm512_permutex2var_epi32(z[0], index, z[1]);  // dwords 0..31 (index bit 4 picks z[1])
  r = _mm512_mask_mov_epi32(r, FieldLanes(c, 32, 64), _mm512_permutex2var_epi32(z[2], index, z[3]));
  return _mm512_mask_permutexvar_epi32(r, FieldLanes(c, 64, 80), index, z[4]);  // index & 15
}

// Scales and constant terms of the first `count` (< 16) blocks at base, zero for the others,
// reading no byte past the last block.
template <class F>
inline void TailScales(const uint8_t* base, int count, __m512* d, __m512* m) {
  if constexpr (F::kBlockBytes == 20) {
    __m512i z[5];
    int64_t bytes = 20 * count;
    for (int k = 0; k < 5; ++k, bytes -= 64) {
      const __mmask64 keep = bytes >= 64 ? ~__mmask64{0} : bytes <= 0 ? 0 : (__mmask64{1} << bytes) - 1;
      z[k] = _mm512_maskz_loadu_epi8(keep, base + 64 * k);
    }
    const __m512i head = Q4_1Field<0>(z);
    *d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
    *m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)));
  } else {
    BlockScales<F>(base, static_cast<__mmask16>((1u << count) - 1), d, m);
  }
}

template <class F>
inline void LoadFullGroup(const uint8_t* base, __m512* d, __m512* m, __m512i words[4],
                          __m512i* high_bits) {
  if constexpr (F::kBlockBytes == 20) {
    __m512i z[5];
    PrefetchAhead(base, 320);
    for (int k = 0; k < 5; ++k) z[k] = _mm512_loadu_si512(base + 64 * k);
    const __m512i head = Q4_1Field<0>(z);
    *d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
    *m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)));
    words[0] = Q4_1Field<1>(z);
    words[1] = Q4_1Field<2>(z);
    words[2] = Q4_1Field<3>(z);
    words[3] = Q4_1Field<4>(z);
  } else {
    const __m512i block_offsets = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(F::kBlockBytes));
    PrefetchAhead(base, 16 * F::kBlockBytes);
    BlockScales<F>(base, 0xffff, d, m);
    for (int k = 0; k < 4; ++k) words[k] = _mm512_i32gather_epi32(block_offsets, base + F::kQsOffset + 4 * k, 1);
    if constexpr (F::kQhOffset >= 0) {
      *high_bits = _mm512_i32gather_epi32(block_offsets, base + F::kQhOffset, 1);
    }
  }
}

// Q5_0 / Q5_1: adds 16 to the codes whose fifth bit is set. qh: each lane's 32 high bits (bit e
// for element e); lo[k] / hi[k]: elements 4k..4k+3 / 16+4k..16+4k+3 in the lane's four bytes.
inline void AddFifthBits(__m512i qh, __m512i lo[4], __m512i hi[4]) {
  // Byte j of qh (elements 8j..8j+7) copied to the four bytes of each lane: within each
  // 128-bit lane, the bytes of dword i take byte 4i + j.
  const auto spread = [qh](int j) {
    const __m512i index = _mm512_add_epi8(
        _mm512_broadcast_i32x4(_mm_setr_epi32(0x00000000, 0x04040404, 0x08080808, 0x0c0c0c0c)),
        _mm512_set1_epi8(static_cast<char>(j)));
    return _mm512_shuffle_epi8(qh, index);
  };
  const __m512i sixteen = _mm512_set1_epi8(0x10);
  const __m512i bits_even = _mm512_set1_epi32(0x08040201);  // bits 0-3 of the byte, per byte
  const __m512i bits_odd = _mm512_set1_epi32(static_cast<int>(0x80402010u));  // bits 4-7
  const __m512i byte_lo[2] = {spread(0), spread(1)};
  const __m512i byte_hi[2] = {spread(2), spread(3)};
  for (int k = 0; k < 4; ++k) {
    const __m512i bits = k % 2 == 0 ? bits_even : bits_odd;
    lo[k] = _mm512_mask_add_epi8(lo[k], _mm512_test_epi8_mask(byte_lo[k / 2], bits), lo[k], sixteen);
    hi[k] = _mm512_mask_add_epi8(hi[k], _mm512_test_epi8_mask(byte_hi[k / 2], bits), hi[k], sixteen);
  }
}

template <class F, int T>
inline void RowDot(int64_t nb, const uint8_t* w, const ActPointers<T>& a, float out[T]) {
  const __m512i low_nibble = _mm512_set1_epi8(0x0f);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t full_groups = nb / 16;
  for (int64_t g = 0; g < full_groups; ++g) {
    __m512 d, m;
    __m512i words[4], high_bits;
    LoadFullGroup<F>(w + 16 * g * F::kBlockBytes, &d, &m, words, &high_bits);
    __m512i lo[4], hi[4];
    for (int k = 0; k < 4; ++k) {
      lo[k] = _mm512_and_si512(words[k], low_nibble);
      hi[k] = _mm512_and_si512(_mm512_srli_epi32(words[k], 4), low_nibble);
    }
    if constexpr (F::kQhOffset >= 0) AddFifthBits(high_bits, lo, hi);
    for (int t = 0; t < T; ++t) {
      const int8_t* q = a.qs[t] + 512 * g;
      __m512i isum = _mm512_dpbusd_epi32(ZeroInt(), lo[0], _mm512_loadu_si512(q));
      isum = _mm512_dpbusd_epi32(isum, lo[1], _mm512_loadu_si512(q + 64));
      isum = _mm512_dpbusd_epi32(isum, lo[2], _mm512_loadu_si512(q + 128));
      isum = _mm512_dpbusd_epi32(isum, lo[3], _mm512_loadu_si512(q + 192));
      isum = _mm512_dpbusd_epi32(isum, hi[0], _mm512_loadu_si512(q + 256));
      isum = _mm512_dpbusd_epi32(isum, hi[1], _mm512_loadu_si512(q + 320));
      isum = _mm512_dpbusd_epi32(isum, hi[2], _mm512_loadu_si512(q + 384));
      isum = _mm512_dpbusd_epi32(isum, hi[3], _mm512_loadu_si512(q + 448));
      const __m512 scale = _mm512_mul_ps(d, _mm512_loadu_ps(a.d[t] + 16 * g));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[t]);
      acc[t] = _mm512_fmadd_ps(m, _mm512_loadu_ps(a.sums[t] + 16 * g), acc[t]);
    }
  }
  const int tail = static_cast<int>(nb - 16 * full_groups);
  if (tail > 0) {
    const uint8_t* base = w + 16 * full_groups * F::kBlockBytes;
    const __mmask16 present = static_cast<__mmask16>((1u << tail) - 1);
    __m512 d, m;
    TailScales<F>(base, tail, &d, &m);
    __m512 d_act[T];
    for (int t = 0; t < T; ++t) {
      d_act[t] = _mm512_maskz_loadu_ps(present, a.d[t] + 16 * full_groups);
      acc[t] = _mm512_fmadd_ps(m, _mm512_maskz_loadu_ps(present, a.sums[t] + 16 * full_groups), acc[t]);
    }
    for (int p = 0; 2 * p < tail; ++p) {
      const bool two = 2 * p + 1 < tail;
      const __m512i wq = two ? LoadPair<F, true>(base + 2 * p * F::kBlockBytes)
                             : LoadPair<F, false>(base + 2 * p * F::kBlockBytes);
      const __m512 dw = PairScales(d, p);
      for (int t = 0; t < T; ++t) {
        const int8_t* q = a.qs[t] + 512 * full_groups + 64 * p;
        const __m512i codes = two ? _mm512_loadu_si512(q) : _mm512_maskz_loadu_epi8(0xffffffffu, q);
        const __m512i dot = _mm512_dpbusd_epi32(ZeroInt(), wq, codes);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, PairScales(d_act[t], p)), acc[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) out[t] = HorizontalSum(acc[t]);
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
  // A full tile of 16 tokens in one pass: the weight side (gathers, nibbles, fifth bits) is
  // decoded once for all of them. Other sizes: up to 8 at a time.
  if (n_tok == 16) return Rows<F, 16>(n, w, w_stride, n_rows, act, act_stride, out, out_stride);
  for (; n_tok > 8; n_tok -= 8, act += 8 * act_stride, out += 8 * out_stride) {
    Rows<F, 8>(n, w, w_stride, n_rows, act, act_stride, out, out_stride);
  }
  switch (n_tok) {
    case 1: return Rows<F, 1>(n, w, w_stride, n_rows, act, act_stride, out, out_stride);
    case 2: return Rows<F, 2>(n, w, w_stride, n_rows, act, act_stride, out, out_stride);
    case 3: return Rows<F, 3>(n, w, w_stride, n_rows, act, act_stride, out, out_stride);
    case 4: return Rows<F, 4>(n, w, w_stride, n_rows, act, act_stride, out, out_stride);
    case 5: return Rows<F, 5>(n, w, w_stride, n_rows, act, act_stride, out, out_stride);
    case 6: return Rows<F, 6>(n, w, w_stride, n_rows, act, act_stride, out, out_stride);
    case 7: return Rows<F, 7>(n, w, w_stride, n_rows, act, act_stride, out, out_stride);
    default: return Rows<F, 8>(n, w, w_stride, n_rows, act, act_stride, out, out_stride);
  }
}

static_assert(kMaxTileTokens <= 16);

}  // namespace

DotTileFn InterleavedBlock32Tile(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::kQ4_0: return Tile<block32::Q4_0Format>;
    case GgmlType::kQ4_1: return Tile<block32::Q4_1Format>;
    case GgmlType::kQ5_0: return Tile<block32::Q5_0Format>;
    case GgmlType::kQ5_1: return Tile<block32::Q5_1Format>;
    default: return nullptr;
  }
}

}  // namespace qevict::vec_dot::avx512
