// AVX2 + FMA + F16C reads of quantized windows (packing in kv_quantizer.h).
//
// Codes: a packed row is read 16 bytes (one group) at a time; pshufb + one widening conversion
// give the group's bytes as eight int32 lanes, and each b-bit slot is a shift and a mask away.
// Keys with adjacent-pair RoPE are processed 16 channels at a time split into their 8 even and
// 8 odd channels: the rotation of pairs (2i, 2i+1) is then four vector multiply-adds with the
// position's cos/sin tables loaded as they are, without shuffles. The queries are split the same
// way once per call, so the dot product is unchanged. Scores of up to eight tokens are reduced
// together (one transposed horizontal sum instead of eight).
#include <immintrin.h>

#include <algorithm>

#include "kernels/simd_avx2.h"
#include "kv/quant_attention.h"

namespace qevict::quant_attention_impl {
namespace {

constexpr int kMaxHeadDim = 1024;
constexpr int kMaxQueries = 64;

// Eight codes of channels [c, c + 8) (c a multiple of 8) of a packed row, as floats.
inline __m256 LoadCodes8(const uint8_t* row, int c, int bits) {
  const int per_group = 128 / bits;
  const int g = c / per_group, r = c % per_group;
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + g * 16 + r % 16));
  __m256i codes = _mm256_cvtepu8_epi32(bytes);
  codes = _mm256_srl_epi32(codes, _mm_cvtsi32_si128(bits * (r / 16)));
  codes = _mm256_and_si256(codes, _mm256_set1_epi32((1 << bits) - 1));
  return _mm256_cvtepi32_ps(codes);
}

inline __m256 Slot(__m256i lanes, int shift, __m256i mask) {
  return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(lanes, _mm_cvtsi32_si128(shift)), mask));
}

inline void Fp16ToFp32(const uint16_t* src, float* dst, int n) {
  for (int i = 0; i < n; i += 8) {
    _mm256_store_ps(dst + i,
                    _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
}

// src (natural channel order, n % 16 == 0) -> per 16 channels: its 8 even, then its 8 odd ones.
inline void SplitEvenOdd(const float* src, float* dst, int n) {
  for (int i = 0; i < n; i += 16) {
    const __m256 a = _mm256_loadu_ps(src + i), b = _mm256_loadu_ps(src + i + 8);
    const __m256 even = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    const __m256 odd = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
    _mm256_store_ps(dst + i, even);
    _mm256_store_ps(dst + i + 8, odd);
  }
}

// [hsum(v[0]), ..., hsum(v[7])].
inline __m256 HorizontalSums8(const __m256* v) {
  const __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
}

// Rotates row[0, rot_dims) in place to the position whose tables are cs/sn (rot_dims/2 each).
inline void RotateRow(float* row, int rot_dims, bool neox, const float* cs, const float* sn) {
  if (neox) {
    const int half = rot_dims / 2;
    for (int i = 0; i < half; i += 8) {
      const __m256 lo = _mm256_load_ps(row + i), hi = _mm256_load_ps(row + i + half);
      const __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
      _mm256_store_ps(row + i, _mm256_fmsub_ps(lo, c, _mm256_mul_ps(hi, s)));
      _mm256_store_ps(row + i + half, _mm256_fmadd_ps(lo, s, _mm256_mul_ps(hi, c)));
    }
    return;
  }
  const __m256 sign = _mm256_setr_ps(-0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f);
  for (int d = 0; d < rot_dims; d += 8) {
    const __m128 c4 = _mm_loadu_ps(cs + d / 2), s4 = _mm_loadu_ps(sn + d / 2);
    const __m256 c = _mm256_set_m128(_mm_unpackhi_ps(c4, c4), _mm_unpacklo_ps(c4, c4));
    const __m256 s = _mm256_xor_ps(
        _mm256_set_m128(_mm_unpackhi_ps(s4, s4), _mm_unpacklo_ps(s4, s4)), sign);
    const __m256 x = _mm256_load_ps(row + d);
    const __m256 swapped = _mm256_permute_ps(x, 0xB1);  // (x1, x0, x3, x2, ...)
    _mm256_store_ps(row + d, _mm256_fmadd_ps(x, c, _mm256_mul_ps(swapped, s)));
  }
}

// Writes the (up to 8) token dot products of accumulators acc[t] (t < n) as scaled scores.
inline void StoreScores(__m256* acc, int n, float scale, float* dst) {
  for (int t = n; t < 8; ++t) acc[t] = _mm256_setzero_ps();
  alignas(32) float sums[8];
  _mm256_store_ps(sums, _mm256_mul_ps(HorizontalSums8(acc), _mm256_set1_ps(scale)));
  std::copy_n(sums, n, dst);
}

// Keys with adjacent-pair RoPE over all of head_dim, head_dim % 16 == 0.
void ScoreKeysEvenOdd(const QuantLayout& layout, const uint8_t* block, int head, int t0, int t1,
                      const int32_t* positions, const Rope& rope, const float* q, int n_q,
                      float scale, float* scores, int64_t ld) {
  const int hd = layout.head_dim, bits = layout.bits;
  const int slots = 8 / bits;  // 16-channel blocks per 16-byte group
  alignas(32) float tmp[kMaxHeadDim], scales[kMaxHeadDim], zeros[kMaxHeadDim];
  alignas(32) float row[kMaxHeadDim];
  alignas(32) float qs[kMaxQueries * 64];
  Fp16ToFp32(reinterpret_cast<const uint16_t*>(block + layout.key_scales) + head * hd, tmp, hd);
  SplitEvenOdd(tmp, scales, hd);
  Fp16ToFp32(reinterpret_cast<const uint16_t*>(block + layout.key_zeros) + head * hd, tmp, hd);
  SplitEvenOdd(tmp, zeros, hd);
  const __m128i even_bytes = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i odd_bytes = _mm_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i mask = _mm256_set1_epi32((1 << bits) - 1);
  const uint8_t* codes0 = block + layout.key_codes + int64_t{head} * layout.window * layout.row_bytes;
  // Queries in the same even/odd order, a chunk of them at a time.
  for (int q0 = 0; q0 < n_q; q0 += kMaxQueries * 64 / hd) {
    const int nq = std::min(n_q - q0, kMaxQueries * 64 / hd);
    for (int qi = 0; qi < nq; ++qi) SplitEvenOdd(q + int64_t{q0 + qi} * hd, qs + qi * hd, hd);
    for (int tb = t0; tb < t1; tb += 8) {
      const int nt = std::min(8, t1 - tb);
      __m256 acc[kMaxQueries][8];
      for (int t = 0; t < nt; ++t) {
        const uint8_t* codes = codes0 + int64_t{tb + t} * layout.row_bytes;
        const int32_t pos = positions[tb + t - t0];
        const float* cs = rope.cos_at(pos);
        const float* sn = rope.sin_at(pos);
        for (int g = 0; g * slots * 16 < hd; ++g) {
          const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + g * 16));
          const __m256i even = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(bytes, even_bytes));
          const __m256i odd = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(bytes, odd_bytes));
          for (int s = 0; s < slots && (g * slots + s) * 16 < hd; ++s) {
            const int b = (g * slots + s) * 16;  // first channel of this 16-channel block
            const __m256 ke = _mm256_fmadd_ps(Slot(even, bits * s, mask), _mm256_load_ps(scales + b),
                                              _mm256_load_ps(zeros + b));
            const __m256 ko = _mm256_fmadd_ps(Slot(odd, bits * s, mask), _mm256_load_ps(scales + b + 8),
                                              _mm256_load_ps(zeros + b + 8));
            const __m256 c = _mm256_loadu_ps(cs + b / 2), sin = _mm256_loadu_ps(sn + b / 2);
            _mm256_store_ps(row + b, _mm256_fmsub_ps(ke, c, _mm256_mul_ps(ko, sin)));
            _mm256_store_ps(row + b + 8, _mm256_fmadd_ps(ke, sin, _mm256_mul_ps(ko, c)));
          }
        }
        for (int qi = 0; qi < nq; ++qi) {
          const float* qv = qs + qi * hd;
          __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
          for (int c = 0; c < hd; c += 16) {
            a0 = _mm256_fmadd_ps(_mm256_load_ps(qv + c), _mm256_load_ps(row + c), a0);
            a1 = _mm256_fmadd_ps(_mm256_load_ps(qv + c + 8), _mm256_load_ps(row + c + 8), a1);
          }
          acc[qi][t] = _mm256_add_ps(a0, a1);
        }
      }
      for (int qi = 0; qi < nq; ++qi) {
        StoreScores(acc[qi], nt, scale, scores + (q0 + qi) * ld + (tb - t0));
      }
    }
  }
}

// Keys with neox or partial RoPE: dequantize the row, rotate it, dot.
void ScoreKeysGeneric(const QuantLayout& layout, const uint8_t* block, int head, int t0, int t1,
                      const int32_t* positions, const Rope& rope, const float* q, int n_q,
                      float scale, float* scores, int64_t ld) {
  const int hd = layout.head_dim, bits = layout.bits;
  alignas(32) float scales[kMaxHeadDim], zeros[kMaxHeadDim], row[kMaxHeadDim];
  Fp16ToFp32(reinterpret_cast<const uint16_t*>(block + layout.key_scales) + head * hd, scales, hd);
  Fp16ToFp32(reinterpret_cast<const uint16_t*>(block + layout.key_zeros) + head * hd, zeros, hd);
  const int rot = rope.config().rot_dims;
  const bool neox = rope.config().neox;
  for (int t = t0; t < t1; ++t) {
    const uint8_t* codes =
        block + layout.key_codes + (int64_t{head} * layout.window + t) * layout.row_bytes;
    for (int c = 0; c < hd; c += 8) {
      _mm256_store_ps(row + c, _mm256_fmadd_ps(LoadCodes8(codes, c, bits),
                                               _mm256_load_ps(scales + c),
                                               _mm256_load_ps(zeros + c)));
    }
    const int32_t pos = positions[t - t0];
    RotateRow(row, rot, neox, rope.cos_at(pos), rope.sin_at(pos));
    for (int qi = 0; qi < n_q; ++qi) {
      const float* qv = q + static_cast<int64_t>(qi) * hd;
      __m256 acc = _mm256_setzero_ps();
      for (int c = 0; c < hd; c += 8) {
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(qv + c), _mm256_load_ps(row + c), acc);
      }
      scores[qi * ld + (t - t0)] = HorizontalSum(acc) * scale;
    }
  }
}

}  // namespace

void ScoreQuantKeysAvx2(const QuantLayout& layout, const uint8_t* block, int head, int t0, int t1,
                        const int32_t* positions, const Rope& rope, const float* q, int n_q,
                        float scale, float* scores, int64_t ld) {
  if (!rope.config().neox && rope.config().rot_dims == layout.head_dim &&
      layout.head_dim % 16 == 0) {
    ScoreKeysEvenOdd(layout, block, head, t0, t1, positions, rope, q, n_q, scale, scores, ld);
  } else {
    ScoreKeysGeneric(layout, block, head, t0, t1, positions, rope, q, n_q, scale, scores, ld);
  }
}

void AccumulateQuantValuesAvx2(const QuantLayout& layout, const uint8_t* block, int head, int t0,
                               int t1, const float* p, int n_q, int64_t ld, float* out) {
  const int hd = layout.head_dim, bits = layout.bits, vg = layout.value_group;
  const int per_group = 128 / bits;
  const __m256i mask = _mm256_set1_epi32((1 << bits) - 1);
  const uint16_t* all_scales = reinterpret_cast<const uint16_t*>(block + layout.value_scales);
  const uint16_t* all_zeros = reinterpret_cast<const uint16_t*>(block + layout.value_zeros);
  // Up to eight dequantized rows at a time (fewer for very long rows): rows[t * hd + d].
  alignas(32) float rows[8 * 256];
  const int batch = std::min(8, 8 * 256 / hd);
  for (int tb = t0; tb < t1; tb += batch) {
    const int nt = std::min(batch, t1 - tb);
    // Dequantize the rows.
    for (int t = 0; t < nt; ++t) {
      const int64_t r = int64_t{head} * layout.window + tb + t;
      const uint8_t* codes = block + layout.value_codes + r * layout.row_bytes;
      for (int g0 = 0; g0 < hd; g0 += per_group) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + g0 / per_group * 16));
        const __m256i lo = _mm256_cvtepu8_epi32(bytes);
        const __m256i hi = _mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8));
        for (int c = g0; c < std::min(hd, g0 + per_group); c += 8) {
          const int rr = c - g0;
          const __m256 x = Slot((rr % 16) != 0 ? hi : lo, bits * (rr / 16), mask);
          const int g = c / vg;
          const __m256 s = _mm256_set1_ps(_cvtsh_ss(all_scales[r * layout.value_groups + g]));
          const __m256 z = _mm256_set1_ps(_cvtsh_ss(all_zeros[r * layout.value_groups + g]));
          _mm256_store_ps(rows + t * hd + c, _mm256_fmadd_ps(x, s, z));
        }
      }
    }
    // out[qi] += sum_t p[qi][t] * rows[t], eight channels at a time.
    for (int c = 0; c < hd; c += 8) {
      for (int qi = 0; qi < n_q; ++qi) {
        const float* pq = p + qi * ld + (tb - t0);
        float* o = out + static_cast<int64_t>(qi) * hd + c;
        __m256 acc = _mm256_loadu_ps(o);
        for (int t = 0; t < nt; ++t) {
          acc = _mm256_fmadd_ps(_mm256_broadcast_ss(pq + t), _mm256_load_ps(rows + t * hd + c), acc);
        }
        _mm256_storeu_ps(o, acc);
      }
    }
  }
}

}  // namespace qevict::quant_attention_impl
