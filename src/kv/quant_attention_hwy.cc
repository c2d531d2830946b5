// Highway versions of the quantized-window reads (kv/quant_attention.h), written once and compiled
// for every Highway target (AVX2 and AVX-512 on x86, NEON on ARM); the SIMD level chooses the
// target at run time exactly as for kernels/attention_hwy.cc (kernels/hwy_targets.h: one target
// list, one dispatch index). quant_attention.cc keeps the portable reference and runs it for the
// shapes these kernels decline; quant_attention_test.cc checks every level and every compiled
// target against it with a stated rounding bound.
//
// Design. The packed codes (kv/kv_quantizer.h) are read directly, a row (token) at a time:
// nothing but a few rows in L1 is ever dequantized. A vector holds K = 16 (AVX-512), 8 (AVX2)
// or 4 (128-bit) float lanes; the widest K the shape divides is used.
// - Codes: K codes of consecutive channels are K bytes at one shift inside a 16-byte group, so
//   a widening load (u8 -> i32), a shift and a mask give them as lanes.
// - Keys, adjacent-pair RoPE: 2K channels at a time are split into their K even and K odd
//   channels by loading the code bytes as u16 (even byte low, odd byte high) and widening once:
//   the even codes are (x >> s) & m, the odd ones (x >> (s + 8)) & m. The pair rotation is then
//   four lane-wise multiply-adds with the position's cos/sin, composed from Rope's coarse and
//   fine rows (rope.h: four more per vector, on rows that stay in cache). Scales,
//   zeros and the queries are put in the same even/odd order once per call, so the dot products
//   are unchanged. (With K = 16 a 2K block spans two slots of a group: the group is broadcast to
//   both halves and shifted per lane.)
// - Keys, NEOX RoPE: the halves (i, i + rot/2) are dequantized in natural order and rotated.
// - Scores: up to 8 rotated rows are staged in L1, then dotted with up to 4 queries x 2 (AVX2)
//   or 4 rows at a time; four scores share one transpose-and-add reduction.
// - Values: up to 4 queries' outputs x 2 (AVX2) or 4 vectors of head_dim stay in registers
//   while the rows are swept; each row's codes are dequantized once per tile (decode, n_q <= 4),
//   or for more queries once per call into L1 and swept by each group of 4 queries. Every
//   output element receives fma(p_j, fma(code, scale, zero), .) in key order, whatever the split
//   of the rows into calls or the number of queries.
// - Declined (the portable code runs): keys with adjacent pairs unless head_dim and rot_dims are
//   multiples of 8; NEOX keys unless head_dim and rot_dims / 2 are multiples of 4; values unless
//   head_dim and the value group are multiples of 4; 1-lane HWY_SCALAR and scalable (SVE)
//   targets (the kernels keep vectors in arrays, which sizeless SVE types cannot be).
// Highway 1.0.3: fp16 promotions (the scales and zeros) are exact for finite values on every
// target, emulated or not; no fp16 arithmetic or demotion is used.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/attention_impl.h"
#include "kernels/hwy_targets.h"  // the targets compiled; before foreach_target.h
#include "kv/quant_attention.h"
#include "util/fp16.h"

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kv/quant_attention_hwy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/hwy_sum_lanes-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace qevict {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
namespace {  // helpers: internal linkage (attention_hwy.cc has names of its own in this namespace)

constexpr int kMaxHeadDim = 1024;   // QuantLayout::Make's bound
constexpr int kStagedFloats = 2048; // key rows rotated / value rows dequantized at a time (8 KiB)
constexpr int kQueryFloats = 8192;  // queries in the keys' even/odd order (32 KiB)
constexpr int kParamFloats = 1024;  // value scales (and zeros) of the rows of one pass
constexpr int kMaxStagedRows = 8;   // key rows rotated before they are dotted

#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kRowKeys = 2;      // AVX2 (16 registers): rows per dot step
constexpr int kTileVectors = 2;  // and vectors of head_dim per value tile
#else
constexpr int kRowKeys = 4;  // AVX-512, NEON: 32 registers
constexpr int kTileVectors = 4;
#endif

template <class D>
constexpr int LanesOf(D d) {
  return static_cast<int>(hn::MaxLanes(d));
}

template <class D>
HWY_INLINE hn::Vec<D> LoadHalves(D d, const uint16_t* p) {
  const hn::Rebind<hwy::float16_t, D> dh;
  return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}

// dst[i] = src[i] for i < n, fp16 -> fp32.
template <class D>
HWY_INLINE void HalvesToFloats(D d, const uint16_t* src, int n, float* dst) {
  const int K = LanesOf(d);
  int i = 0;
  for (; i + K <= n; i += K) hn::Store(LoadHalves(d, src + i), d, dst + i);
  for (; i < n; ++i) dst[i] = Fp16ToFp32(src[i]);
}

// n rows of hd floats (hd % 2K == 0), each block of 2K channels reordered as its K even
// channels then its K odd ones: the order of the split key rows.
template <class D, class Load>
HWY_INLINE void SplitEvenOdd(D d, int n, int hd, const Load& load, float* dst) {
  const int K = LanesOf(d);
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < hd; c += 2 * K) {
      const int64_t at = int64_t{r} * hd + c;
      const auto lo = load(at), hi = load(at + K);
      hn::Store(hn::ConcatEven(d, hi, lo), d, dst + at);
      hn::Store(hn::ConcatOdd(d, hi, lo), d, dst + at + K);
    }
  }
}

// The codes of channels [c, c + K) of a packed row (c % K == 0) as floats.
template <int BITS, class D>
HWY_INLINE hn::Vec<D> NaturalCodes(D d, const uint8_t* row, int c) {
  constexpr int kPerGroup = 128 / BITS;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint8_t, D> d8;
  const int r = c % kPerGroup;
  const auto bytes = hn::PromoteTo(di, hn::LoadU(d8, row + c / kPerGroup * 16 + r % 16));
  const auto codes = hn::ShiftRightSame(bytes, BITS * (r / 16));
  return hn::ConvertTo(d, hn::And(codes, hn::Set(di, (1 << BITS) - 1)));
}

// The codes of channels [c, c + 2K) (c % 2K == 0): even channels to `even`, odd ones to `odd`.
template <int BITS, class D>
HWY_INLINE void SplitCodes(D d, const uint8_t* row, int c, hn::Vec<D>& even, hn::Vec<D>& odd) {
  constexpr int kPerGroup = 128 / BITS;
  constexpr int K = LanesOf(D());
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint16_t, D> d16;
  const int r = c % kPerGroup;
  const auto* p = reinterpret_cast<const uint16_t*>(row + c / kPerGroup * 16 + r % 16);
  auto shift = hn::Set(di, BITS * (r / 16));
  hn::Vec<decltype(di)> pairs;
  if constexpr (K == 16 && BITS < 8) {
    // 32 channels: two slots of one group; lanes 8..15 take the next slot (one more shift).
    pairs = hn::PromoteTo(di, hn::LoadDup128(d16, p));
    shift = hn::Add(shift, hn::Mul(hn::ShiftRight<3>(hn::Iota(di, 0)), hn::Set(di, BITS)));
  } else {
    pairs = hn::PromoteTo(di, hn::LoadU(d16, p));  // (8 bits and K == 16: two whole groups)
  }
  const auto mask = hn::Set(di, (1 << BITS) - 1);
  even = hn::ConvertTo(d, hn::And(pairs >> shift, mask));
  odd = hn::ConvertTo(d, hn::And(pairs >> hn::Add(shift, hn::Set(di, 8)), mask));
}

// The rotation of one key row at position pos: Load(d, i, c, s) gives cos and sin of pairs
// [i, i + K), composed from Rope's coarse and fine float rows (the angle addition of rope.h).
template <class D>
struct ComposedRotation {
  const float* coarse_cs;
  const float* coarse_sn;
  const float* fine_cs;
  const float* fine_sn;
  ComposedRotation(const Rope& rope, int64_t pos)
      : coarse_cs(rope.coarse_cos(pos)), coarse_sn(rope.coarse_sin(pos)),
        fine_cs(rope.fine_cos(pos)), fine_sn(rope.fine_sin(pos)) {}
  HWY_INLINE void Load(D d, int i, hn::Vec<D>& c, hn::Vec<D>& s) const {
    const auto c0 = hn::LoadU(d, coarse_cs + i), s0 = hn::LoadU(d, coarse_sn + i);
    const auto c1 = hn::LoadU(d, fine_cs + i), s1 = hn::LoadU(d, fine_sn + i);
    c = hn::MulSub(c0, c1, hn::Mul(s0, s1));
    s = hn::MulAdd(s0, c1, hn::Mul(c0, s1));
  }
};

// One key row, dequantized and rotated (adjacent pairs over [0, rot)), in even/odd order.
template <int BITS, class D>
HWY_INLINE void SplitKeyRow(D d, const uint8_t* codes, const float* scales, const float* zeros,
                            int hd, int rot, const ComposedRotation<D>& rotation, float* dst) {
  const int K = LanesOf(d);
  for (int c = 0; c < hd; c += 2 * K) {
    hn::Vec<D> ke, ko;
    SplitCodes<BITS>(d, codes, c, ke, ko);
    ke = hn::MulAdd(ke, hn::Load(d, scales + c), hn::Load(d, zeros + c));
    ko = hn::MulAdd(ko, hn::Load(d, scales + c + K), hn::Load(d, zeros + c + K));
    if (c < rot) {
      hn::Vec<D> cv, sv;
      rotation.Load(d, c / 2, cv, sv);
      hn::Store(hn::MulSub(ke, cv, hn::Mul(ko, sv)), d, dst + c);
      hn::Store(hn::MulAdd(ke, sv, hn::Mul(ko, cv)), d, dst + c + K);
    } else {
      hn::Store(ke, d, dst + c);
      hn::Store(ko, d, dst + c + K);
    }
  }
}

// One key row, dequantized and rotated (NEOX halves (i, i + rot/2)), in natural order.
template <int BITS, class D>
HWY_INLINE void NeoxKeyRow(D d, const uint8_t* codes, const float* scales, const float* zeros,
                           int hd, int rot, const ComposedRotation<D>& rotation, float* dst) {
  const int K = LanesOf(d), half = rot / 2;
  const auto key = [&](int c) {
    return hn::MulAdd(NaturalCodes<BITS>(d, codes, c), hn::Load(d, scales + c),
                      hn::Load(d, zeros + c));
  };
  for (int i = 0; i < half; i += K) {
    const auto lo = key(i), hi = key(i + half);
    hn::Vec<D> cv, sv;
    rotation.Load(d, i, cv, sv);
    hn::Store(hn::MulSub(lo, cv, hn::Mul(hi, sv)), d, dst + i);
    hn::Store(hn::MulAdd(lo, sv, hn::Mul(hi, cv)), d, dst + i + half);
  }
  for (int c = rot; c < hd; c += K) hn::Store(key(c), d, dst + c);
}

// scores[i * ld + r] = scale * dot(q[i], rows[r]) for NQ (<= 4) queries and KB rows.
template <int NQ, int KB, class D>
HWY_INLINE void DotStep(D d, const float* q, int hd, const float* rows, float scale,
                        float* scores, int64_t ld) {
  const int K = LanesOf(d);
  hn::Vec<D> acc[KB][4];
  for (int r = 0; r < KB; ++r) {
    for (int i = 0; i < 4; ++i) acc[r][i] = hn::Zero(d);
  }
  for (int x = 0; x < hd; x += K) {
    hn::Vec<D> k[KB];
    for (int r = 0; r < KB; ++r) k[r] = hn::Load(d, rows + r * hd + x);
    for (int i = 0; i < NQ; ++i) {
      const auto w = hn::LoadU(d, q + i * hd + x);
      for (int r = 0; r < KB; ++r) acc[r][i] = hn::MulAdd(w, k[r], acc[r][i]);
    }
  }
  HWY_ALIGN float sums[16];
  if constexpr (KB == 4 && hn::MaxLanes(hn::CappedTag<float, 4>()) == 4) {  // not 1-lane targets
    // Per query, its four rows' sums side by side: NQ reductions, one 4-lane store each (a
    // sum's order depends only on lane positions: the same bits as per row).
    const hn::CappedTag<float, 4> d4;
    const auto vscale = hn::Set(d4, scale);
    for (int i = 0; i < NQ; ++i) {
      SumLanes4(d, acc[0][i], acc[1][i], acc[2][i], acc[3][i], sums + 4 * i);
      hn::StoreU(hn::Mul(hn::Load(d4, sums + 4 * i), vscale), d4, scores + i * ld);
    }
  } else {
    for (int r = 0; r < KB; ++r) SumLanes4(d, acc[r][0], acc[r][1], acc[r][2], acc[r][3], sums + 4 * r);
    for (int i = 0; i < NQ; ++i) {
      for (int r = 0; r < KB; ++r) scores[i * ld + r] = sums[4 * r + i] * scale;
    }
  }
}

template <int NQ, class D>
HWY_INLINE void DotRows(D d, const float* q, int hd, const float* rows, int n, float scale,
                        float* scores, int64_t ld) {
  int r = 0;
  for (; r + kRowKeys <= n; r += kRowKeys) {
    DotStep<NQ, kRowKeys>(d, q, hd, rows + r * hd, scale, scores + r, ld);
  }
  for (; r < n; ++r) DotStep<NQ, 1>(d, q, hd, rows + r * hd, scale, scores + r, ld);
}

template <class D>
HWY_INLINE void DotQueries(D d, const float* q, int n_q, int hd, const float* rows, int n,
                           float scale, float* scores, int64_t ld) {
  for (int q0 = 0; q0 < n_q; q0 += 4) {
    const float* qg = q + int64_t{q0} * hd;
    float* sg = scores + q0 * ld;
    switch (std::min(4, n_q - q0)) {
      case 1: DotRows<1>(d, qg, hd, rows, n, scale, sg, ld); break;
      case 2: DotRows<2>(d, qg, hd, rows, n, scale, sg, ld); break;
      case 3: DotRows<3>(d, qg, hd, rows, n, scale, sg, ld); break;
      default: DotRows<4>(d, qg, hd, rows, n, scale, sg, ld); break;
    }
  }
}

template <int BITS, class D>
HWY_NOINLINE void ScoreKeys(D d, const QuantLayout& l, const uint8_t* block, int head, int t0,
                            int t1, const int32_t* positions, const Rope& rope, const float* q,
                            int n_q, float scale, float* scores, int64_t ld) {
  const int hd = l.head_dim, rot = rope.config().rot_dims;
  const bool split = !rope.config().neox;
  const auto* key_scales = reinterpret_cast<const uint16_t*>(block + l.key_scales) + head * hd;
  const auto* key_zeros = reinterpret_cast<const uint16_t*>(block + l.key_zeros) + head * hd;
  HWY_ALIGN float scales[kMaxHeadDim], zeros[kMaxHeadDim];
  if (split) {
    SplitEvenOdd(d, 1, hd, [&](int64_t at) { return LoadHalves(d, key_scales + at); }, scales);
    SplitEvenOdd(d, 1, hd, [&](int64_t at) { return LoadHalves(d, key_zeros + at); }, zeros);
  } else {
    HalvesToFloats(d, key_scales, hd, scales);
    HalvesToFloats(d, key_zeros, hd, zeros);
  }
  HWY_ALIGN float rows[kStagedFloats];
  HWY_ALIGN float split_q[kQueryFloats];
  const int batch = std::min(kMaxStagedRows, kStagedFloats / hd);
  const int q_chunk = split ? kQueryFloats / hd : n_q;
  const uint8_t* codes0 = block + l.key_codes + int64_t{head} * l.window * l.row_bytes;
  for (int q0 = 0; q0 < n_q; q0 += q_chunk) {
    const int nq = std::min(q_chunk, n_q - q0);
    const float* qc = q + int64_t{q0} * hd;
    if (split) {
      SplitEvenOdd(d, nq, hd, [&](int64_t at) { return hn::LoadU(d, qc + at); }, split_q);
      qc = split_q;
    }
    for (int tb = t0; tb < t1; tb += batch) {
      const int nt = std::min(batch, t1 - tb);
      for (int t = 0; t < nt; ++t) {
        const uint8_t* codes = codes0 + int64_t{tb + t} * l.row_bytes;
        const ComposedRotation<D> rotation(rope, positions[tb + t - t0]);
        float* dst = rows + t * hd;
        if (split) {
          SplitKeyRow<BITS>(d, codes, scales, zeros, hd, rot, rotation, dst);
        } else {
          NeoxKeyRow<BITS>(d, codes, scales, zeros, hd, rot, rotation, dst);
        }
      }
      DotQueries(d, qc, nq, hd, rows, nt, scale, scores + q0 * ld + (tb - t0), ld);
    }
  }
}

// out[i] (channels [x, x + C K)) += sum_t p[i * ld + t] * row(t, .) for NQ (<= 4) queries;
// row(t, c) is the vector of value row t at channels [c, c + K).
template <int NQ, int C, class D, class Row>
HWY_INLINE void AccumulateTile(D d, const float* p, int64_t ld, int n, int hd, int x,
                               const Row& row, float* out) {
  const int K = LanesOf(d);
  hn::Vec<D> acc[NQ][C];
  for (int i = 0; i < NQ; ++i) {
    for (int j = 0; j < C; ++j) acc[i][j] = hn::LoadU(d, out + i * hd + x + j * K);
  }
  for (int t = 0; t < n; ++t) {
    hn::Vec<D> v[C];
    for (int j = 0; j < C; ++j) v[j] = row(t, x + j * K);
    for (int i = 0; i < NQ; ++i) {
      const auto w = hn::Set(d, p[i * ld + t]);
      for (int j = 0; j < C; ++j) acc[i][j] = hn::MulAdd(w, v[j], acc[i][j]);
    }
  }
  for (int i = 0; i < NQ; ++i) {
    for (int j = 0; j < C; ++j) hn::StoreU(acc[i][j], d, out + i * hd + x + j * K);
  }
}

template <int NQ, class D, class Row>
HWY_INLINE void AccumulateTiles(D d, const float* p, int64_t ld, int n, int hd, const Row& row,
                                float* out) {
  const int K = LanesOf(d);
  int x = 0;
  for (; x + kTileVectors * K <= hd; x += kTileVectors * K) {
    AccumulateTile<NQ, kTileVectors>(d, p, ld, n, hd, x, row, out);
  }
  for (; x < hd; x += K) AccumulateTile<NQ, 1>(d, p, ld, n, hd, x, row, out);
}

template <class D, class Row>
HWY_INLINE void AccumulateQueries(D d, const float* p, int n_q, int64_t ld, int n, int hd,
                                  const Row& row, float* out) {
  for (int q0 = 0; q0 < n_q; q0 += 4) {
    const float* pg = p + q0 * ld;
    float* og = out + int64_t{q0} * hd;
    switch (std::min(4, n_q - q0)) {
      case 1: AccumulateTiles<1>(d, pg, ld, n, hd, row, og); break;
      case 2: AccumulateTiles<2>(d, pg, ld, n, hd, row, og); break;
      case 3: AccumulateTiles<3>(d, pg, ld, n, hd, row, og); break;
      default: AccumulateTiles<4>(d, pg, ld, n, hd, row, og); break;
    }
  }
}

template <int BITS, class D>
HWY_NOINLINE void AccumulateValues(D d, const QuantLayout& l, const uint8_t* block, int head,
                                   int t0, int t1, const float* p, int n_q, int64_t ld,
                                   float* out) {
  const int K = LanesOf(d);
  const int hd = l.head_dim, vg = l.value_group, groups = l.value_groups;
  const int64_t row0 = int64_t{head} * l.window;
  const uint8_t* codes0 = block + l.value_codes + row0 * l.row_bytes;
  const auto* all_scales = reinterpret_cast<const uint16_t*>(block + l.value_scales) + row0 * groups;
  const auto* all_zeros = reinterpret_cast<const uint16_t*>(block + l.value_zeros) + row0 * groups;
  // Few queries dequantize each row once per tile; more stage the rows of a pass first.
  const bool stage = n_q > 4;
  const int pass = std::min(stage ? kStagedFloats / hd : kParamFloats, kParamFloats / groups);
  HWY_ALIGN float scales[kParamFloats], zeros[kParamFloats], staged[kStagedFloats];
  for (int tb = t0; tb < t1; tb += pass) {
    const int n = std::min(pass, t1 - tb);
    HalvesToFloats(d, all_scales + int64_t{tb} * groups, n * groups, scales);
    HalvesToFloats(d, all_zeros + int64_t{tb} * groups, n * groups, zeros);
    const uint8_t* codes = codes0 + int64_t{tb} * l.row_bytes;
    const auto value = [&](int t, int c) {
      const int g = t * groups + c / vg;
      return hn::MulAdd(NaturalCodes<BITS>(d, codes + int64_t{t} * l.row_bytes, c),
                        hn::Set(d, scales[g]), hn::Set(d, zeros[g]));
    };
    const float* pb = p + (tb - t0);
    if (!stage) {
      AccumulateQueries(d, pb, n_q, ld, n, hd, value, out);
      continue;
    }
    for (int t = 0; t < n; ++t) {
      for (int c = 0; c < hd; c += K) hn::Store(value(t, c), d, staged + t * hd + c);
    }
    const auto staged_row = [&](int t, int c) { return hn::Load(d, staged + t * hd + c); };
    AccumulateQueries(d, pb, n_q, ld, n, hd, staged_row, out);
  }
}

// run(d) with the widest tag of 16, 8 or 4 float lanes that this target has and `fits`;
// false when there is none.
template <class Fits, class Run>
HWY_INLINE bool WithWidestTag(const Fits& fits, const Run& run) {
  const hn::CappedTag<float, 16> d16;
  const hn::CappedTag<float, 8> d8;
  const hn::CappedTag<float, 4> d4;
  if constexpr (hn::MaxLanes(d16) == 16) {
    if (fits(16)) return run(d16);
  }
  if constexpr (hn::MaxLanes(d8) == 8) {
    if (fits(8)) return run(d8);
  }
  if constexpr (hn::MaxLanes(d4) == 4) {
    if (fits(4)) return run(d4);
  }
  return false;
}

}  // namespace
#endif  // !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR

// ---- Exported entry points (one per target): false when the shape is not covered.

bool ScoreQuantKeys(const QuantLayout& l, const uint8_t* block, int head, int t0, int t1,
                    const int32_t* positions, const Rope& rope, const float* q, int n_q,
                    float scale, float* scores, int64_t ld) {
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
  const int hd = l.head_dim, rot = rope.config().rot_dims;
  const bool neox = rope.config().neox;
  if (rot < 0 || rot > hd || rot % 2 != 0) return false;
  const auto fits = [&](int K) {
    return neox ? hd % K == 0 && (rot / 2) % K == 0 : hd % (2 * K) == 0 && rot % (2 * K) == 0;
  };
  return WithWidestTag(fits, [&](auto d) {
    switch (l.bits) {
      case 2: ScoreKeys<2>(d, l, block, head, t0, t1, positions, rope, q, n_q, scale, scores, ld); return true;
      case 4: ScoreKeys<4>(d, l, block, head, t0, t1, positions, rope, q, n_q, scale, scores, ld); return true;
      case 8: ScoreKeys<8>(d, l, block, head, t0, t1, positions, rope, q, n_q, scale, scores, ld); return true;
      default: return false;
    }
  });
#else
  return false;
#endif
}

bool AccumulateQuantValues(const QuantLayout& l, const uint8_t* block, int head, int t0, int t1,
                           const float* p, int n_q, int64_t ld, float* out) {
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
  const auto fits = [&](int K) { return l.head_dim % K == 0 && l.value_group % K == 0; };
  return WithWidestTag(fits, [&](auto d) {
    switch (l.bits) {
      case 2: AccumulateValues<2>(d, l, block, head, t0, t1, p, n_q, ld, out); return true;
      case 4: AccumulateValues<4>(d, l, block, head, t0, t1, p, n_q, ld, out); return true;
      case 8: AccumulateValues<8>(d, l, block, head, t0, t1, p, n_q, ld, out); return true;
      default: return false;
    }
  });
#else
  return false;
#endif
}

int64_t QuantTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace qevict
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qevict::quant_attention_impl::highway {

HWY_EXPORT(ScoreQuantKeys);
HWY_EXPORT(AccumulateQuantValues);
HWY_EXPORT(QuantTarget);

namespace hw = attention_impl::highway;

bool ScoreQuantKeys(const QuantLayout& layout, const uint8_t* block, int head, int t0, int t1,
                    const int32_t* positions, const Rope& rope, const float* q, int n_q,
                    float scale, float* scores, int64_t ld) {
  return hw::Enabled() && HWY_DISPATCH_TABLE(ScoreQuantKeys)[hw::DispatchIndex()](
                              layout, block, head, t0, t1, positions, rope, q, n_q, scale,
                              scores, ld);
}

bool AccumulateQuantValues(const QuantLayout& layout, const uint8_t* block, int head, int t0,
                           int t1, const float* p, int n_q, int64_t ld, float* out) {
  return hw::Enabled() && HWY_DISPATCH_TABLE(AccumulateQuantValues)[hw::DispatchIndex()](
                              layout, block, head, t0, t1, p, n_q, ld, out);
}

int64_t ActiveTarget() {
  return hw::Enabled() ? HWY_DISPATCH_TABLE(QuantTarget)[hw::DispatchIndex()]() : 0;
}

}  // namespace qevict::quant_attention_impl::highway
#endif  // HWY_ONCE
