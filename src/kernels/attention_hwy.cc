// Highway versions of the attention building blocks (kernels/attention.h): written once, compiled
// for every Highway target (AVX2, AVX-512 on x86; NEON/SVE on ARM; a scalar fallback) and
// chosen at run time from the SIMD level (util/cpu_features.h). attention.cc keeps the portable
// reference implementations; tests compare every target with them (attention_test.cc).
//
// Design (the shapes: decode has n_q = the GQA group, 3-4 queries; prefill n_q = group x 8
// query tokens, 24-32; head_dim 64-256):
// - Scores, few queries: per 4 key rows (2 on AVX2) each row is converted fp16->fp32 once and
//   dotted with up to 4 queries at a time (up to 16 independent accumulators); four scores share
//   one transpose-and-add reduction.
// - Scores, n_q >= 8: the queries are transposed once per call into [head_dim][n_q padded to
//   lanes]; tiles of 16 key rows are converted to fp32 and each element broadcast, so one FMA
//   advances a whole vector of queries' scores (no horizontal reduction per (query, key)); the
//   tile's scores are written query by query.
// - Values: outputs stay in registers (up to 4 queries x 4 vectors of head_dim, 2 on AVX2)
//   while they sweep the keys; few queries read the fp16 rows directly, many queries sweep a
//   block of 32 rows staged as fp32. Every output element receives fma(p_j, v_j, .) in key
//   order on every path, so results do not depend on how keys are split into calls nor on the
//   number of queries.
// - head_dim must be a multiple of the lane count of the widest tag that fits (full vectors,
//   then 8 lanes); otherwise the portable code runs.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/attention_impl.h"
#include "kernels/hwy_targets.h"  // the targets compiled; before foreach_target.h
#include "util/cpu_features.h"

// foreach_target.h re-includes this file for every target; highway.h and contrib after it.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention_hwy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/hwy_sum_lanes-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace qevict {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Whether fp16 conversions are done in hardware. Highway 1.0.3's emulation (EMU128, SCALAR, NEON
// without fp16 conversions) truncates in DemoteTo and mishandles infinities and NaN, so the row
// conversions there stay portable (the kernels' promotions are exact for finite values).
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE2 || \
    HWY_TARGET == HWY_SVE_256 || HWY_TARGET == HWY_SVE2_128 ||                                     \
    (HWY_TARGET == HWY_NEON && (__ARM_FP & 2))
constexpr bool kHardwareFp16 = true;
#else
constexpr bool kHardwareFp16 = false;
#endif

// Largest head_dim and query group of the staged paths (stack buffers); larger ones take the
// row paths, which need no staging.
constexpr int kMaxStagedHeadDim = 256;
constexpr size_t kMaxQueryGroup = 64;
constexpr int64_t kValueBlock = 32;  // value rows staged as fp32 at a time (many queries)

template <class D>
HWY_INLINE hn::Vec<D> LoadRow(D d, const uint16_t* p) {
  const hn::Rebind<hwy::float16_t, D> dh;
  return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}
template <class D>
HWY_INLINE hn::Vec<D> LoadRow(D d, const float* p) {
  return hn::LoadU(d, p);
}

// ---- Scores, few queries: NQ (<= 4) queries against KB (1, 2 or 4) key rows at a time.

// Four key rows (KB of them used) per step where the register file holds 16 accumulators.
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kRowKeys = 2;  // AVX2: 16 registers
#else
constexpr int kRowKeys = 4;  // AVX-512, NEON, SVE: 32
#endif

template <int NQ, int KB, class D>
HWY_INLINE void ScoreRowsStep(D d, const float* q, int hd, const uint16_t* k, int64_t k_stride,
                              float scale, float* scores, int64_t ld) {
  using V = hn::Vec<D>;
  const size_t N = hn::Lanes(d);
  const float* q0 = q;
  const float* q1 = q + std::min(1, NQ - 1) * hd;
  const float* q2 = q + std::min(2, NQ - 1) * hd;
  const float* q3 = q + std::min(3, NQ - 1) * hd;
  const uint16_t* ka = k;
  const uint16_t* kb = k + std::min(1, KB - 1) * k_stride;
  const uint16_t* kc = k + std::min(2, KB - 1) * k_stride;
  const uint16_t* ke = k + std::min(3, KB - 1) * k_stride;
  // Accumulator of query i with key row a, b, c, e: ai, bi, ci, ei.
  V a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  V c0 = a0, c1 = a0, c2 = a0, c3 = a0, e0 = a0, e1 = a0, e2 = a0, e3 = a0;
  // One query's vector of products with each key row.
  const auto step = [d](const float* qv, V va, V vb, V vc, V ve, V& a, V& b, V& c, V& e) {
    const V w = hn::LoadU(d, qv);
    a = hn::MulAdd(w, va, a);
    if constexpr (KB > 1) b = hn::MulAdd(w, vb, b);
    if constexpr (KB > 2) c = hn::MulAdd(w, vc, c);
    if constexpr (KB > 3) e = hn::MulAdd(w, ve, e);
  };
  for (size_t x = 0; x < static_cast<size_t>(hd); x += N) {
    const V va = LoadRow(d, ka + x);
    const V vb = KB > 1 ? LoadRow(d, kb + x) : va;
    const V vc = KB > 2 ? LoadRow(d, kc + x) : va;
    const V ve = KB > 3 ? LoadRow(d, ke + x) : va;
    step(q0 + x, va, vb, vc, ve, a0, b0, c0, e0);
    if constexpr (NQ > 1) step(q1 + x, va, vb, vc, ve, a1, b1, c1, e1);
    if constexpr (NQ > 2) step(q2 + x, va, vb, vc, ve, a2, b2, c2, e2);
    if constexpr (NQ > 3) step(q3 + x, va, vb, vc, ve, a3, b3, c3, e3);
  }
  HWY_ALIGN float sums[16];
  if constexpr (KB == 4 && hn::MaxLanes(hn::CappedTag<float, 4>()) == 4) {  // not 1-lane targets
    // Per query, its four rows' sums side by side: NQ reductions, one 4-lane store each (a
    // sum's order depends only on lane positions, so the bits are those of the per-row path).
    const hn::CappedTag<float, 4> d4;
    const auto vscale = hn::Set(d4, scale);
    const auto put = [&](int i, V w, V x, V y, V z) {
      SumLanes4(d, w, x, y, z, sums + 4 * i);
      hn::StoreU(hn::Mul(hn::Load(d4, sums + 4 * i), vscale), d4, scores + i * ld);
    };
    put(0, a0, b0, c0, e0);
    if constexpr (NQ > 1) put(1, a1, b1, c1, e1);
    if constexpr (NQ > 2) put(2, a2, b2, c2, e2);
    if constexpr (NQ > 3) put(3, a3, b3, c3, e3);
  } else {
    SumLanes4(d, a0, a1, a2, a3, sums);
    if constexpr (KB > 1) SumLanes4(d, b0, b1, b2, b3, sums + 4);
    if constexpr (KB > 2) SumLanes4(d, c0, c1, c2, c3, sums + 8);
    if constexpr (KB > 3) SumLanes4(d, e0, e1, e2, e3, sums + 12);
    for (int i = 0; i < NQ; ++i) {
      for (int r = 0; r < KB; ++r) scores[i * ld + r] = sums[4 * r + i] * scale;
    }
  }
}

template <int NQ, class D>
HWY_INLINE void ScoreRows(D d, const float* q, int hd, const uint16_t* k, int64_t k_stride,
                          int64_t n, float scale, float* scores, int64_t ld) {
  int64_t j = 0;
  for (; j + kRowKeys <= n; j += kRowKeys) {
    ScoreRowsStep<NQ, kRowKeys>(d, q, hd, k + j * k_stride, k_stride, scale, scores + j, ld);
  }
  for (; j < n; ++j)
    ScoreRowsStep<NQ, 1>(d, q, hd, k + j * k_stride, k_stride, scale, scores + j, ld);
}

// ---- Scores, many queries: QC vectors of queries (transposed, qt[x * qp + i]) against KB key
// rows staged as fp32 (ks[kb * hd + x]); res[kb * qp + i] receives the dot products.

template <int QC, int KB, class D>
HWY_INLINE void ScoreBlockedStep(D d, const float* HWY_RESTRICT qt, size_t qp,
                                 const float* HWY_RESTRICT ks, int hd, float* HWY_RESTRICT res) {
  static_assert(QC >= 1 && QC <= 4 && KB >= 1 && KB <= 4, "tile shape");
  const size_t N = hn::Lanes(d);
  // Named accumulators (key row b, query vector c: s<b><c>); those beyond KB and QC are never
  // touched. (Arrays of vectors compiled to slower code here.)
  auto s00 = hn::Zero(d), s01 = hn::Zero(d), s02 = hn::Zero(d), s03 = hn::Zero(d);
  auto s10 = hn::Zero(d), s11 = hn::Zero(d), s12 = hn::Zero(d), s13 = hn::Zero(d);
  auto s20 = hn::Zero(d), s21 = hn::Zero(d), s22 = hn::Zero(d), s23 = hn::Zero(d);
  auto s30 = hn::Zero(d), s31 = hn::Zero(d), s32 = hn::Zero(d), s33 = hn::Zero(d);
  for (int x = 0; x < hd; ++x) {
    const float* qx = qt + static_cast<size_t>(x) * qp;
    const auto c0 = hn::Load(d, qx);
    const auto c1 = QC > 1 ? hn::Load(d, qx + N) : c0;
    const auto c2 = QC > 2 ? hn::Load(d, qx + 2 * N) : c0;
    const auto c3 = QC > 3 ? hn::Load(d, qx + 3 * N) : c0;
    const auto k0 = hn::Set(d, ks[x]);
    s00 = hn::MulAdd(c0, k0, s00);
    if constexpr (QC > 1) s01 = hn::MulAdd(c1, k0, s01);
    if constexpr (QC > 2) s02 = hn::MulAdd(c2, k0, s02);
    if constexpr (QC > 3) s03 = hn::MulAdd(c3, k0, s03);
    if constexpr (KB > 1) {
      const auto k1 = hn::Set(d, ks[hd + x]);
      s10 = hn::MulAdd(c0, k1, s10);
      if constexpr (QC > 1) s11 = hn::MulAdd(c1, k1, s11);
      if constexpr (QC > 2) s12 = hn::MulAdd(c2, k1, s12);
      if constexpr (QC > 3) s13 = hn::MulAdd(c3, k1, s13);
    }
    if constexpr (KB > 2) {
      const auto k2 = hn::Set(d, ks[2 * hd + x]);
      s20 = hn::MulAdd(c0, k2, s20);
      if constexpr (QC > 1) s21 = hn::MulAdd(c1, k2, s21);
      if constexpr (QC > 2) s22 = hn::MulAdd(c2, k2, s22);
      if constexpr (QC > 3) s23 = hn::MulAdd(c3, k2, s23);
    }
    if constexpr (KB > 3) {
      const auto k3 = hn::Set(d, ks[3 * hd + x]);
      s30 = hn::MulAdd(c0, k3, s30);
      if constexpr (QC > 1) s31 = hn::MulAdd(c1, k3, s31);
      if constexpr (QC > 2) s32 = hn::MulAdd(c2, k3, s32);
      if constexpr (QC > 3) s33 = hn::MulAdd(c3, k3, s33);
    }
  }
  auto store_row = [&](float* row, auto a0, auto a1, auto a2, auto a3) {
    hn::Store(a0, d, row);
    if constexpr (QC > 1) hn::Store(a1, d, row + N);
    if constexpr (QC > 2) hn::Store(a2, d, row + 2 * N);
    if constexpr (QC > 3) hn::Store(a3, d, row + 3 * N);
  };
  store_row(res, s00, s01, s02, s03);
  if constexpr (KB > 1) store_row(res + qp, s10, s11, s12, s13);
  if constexpr (KB > 2) store_row(res + 2 * qp, s20, s21, s22, s23);
  if constexpr (KB > 3) store_row(res + 3 * qp, s30, s31, s32, s33);
}

// Key rows per step of ScoreBlocked for QC vectors of queries: as many as keep the QC x KB
// accumulators, QC query vectors and a broadcast key within the register file (32 vectors on
// AVX-512, NEON and SVE; 16 on AVX2).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
template <int QC>
constexpr int kBlockedKeyRows = QC <= 2 ? 4 : 2;
#else
template <int QC>
constexpr int kBlockedKeyRows = 4;
#endif

// g (<= QC lanes-vectors) queries starting at q; hd <= kMaxStagedHeadDim.
template <int QC, class D>
HWY_NOINLINE void ScoreBlocked(D d, const float* q, int g, const uint16_t* k, int64_t k_stride,
                               int64_t n, int hd, float scale, float* scores, int64_t ld) {
  constexpr int KB = kBlockedKeyRows<QC>;
  const size_t N = hn::Lanes(d);
  const size_t qp = QC * N;
  HWY_ALIGN float qt[kMaxStagedHeadDim * kMaxQueryGroup];
  constexpr int kTile = 16;
  HWY_ALIGN float ks[kTile * kMaxStagedHeadDim];
  HWY_ALIGN float res[kTile * kMaxQueryGroup];
  for (int x = 0; x < hd; ++x) {
    float* row = qt + static_cast<size_t>(x) * qp;
    for (int i = 0; i < g; ++i) row[i] = q[static_cast<int64_t>(i) * hd + x];
    for (size_t i = g; i < qp; ++i) row[i] = 0.0f;
  }
  // Tiles of kTile keys: staged as fp32, scored KB at a time, then written query by query.
  for (int64_t j0 = 0; j0 < n; j0 += kTile) {
    const int rows = static_cast<int>(std::min<int64_t>(kTile, n - j0));
    for (int r = 0; r < rows; ++r) {
      const uint16_t* src = k + (j0 + r) * k_stride;
      for (size_t x = 0; x < static_cast<size_t>(hd); x += N) {
        hn::Store(LoadRow(d, src + x), d, ks + r * hd + x);
      }
    }
    int r = 0;
    for (; r + KB <= rows; r += KB)
      ScoreBlockedStep<QC, KB>(d, qt, qp, ks + r * hd, hd, res + r * qp);
    for (; r < rows; ++r) ScoreBlockedStep<QC, 1>(d, qt, qp, ks + r * hd, hd, res + r * qp);
    for (int i = 0; i < g; ++i) {
      float* dst = scores + i * ld + j0;
      for (int t = 0; t < rows; ++t) dst[t] = res[t * qp + i] * scale;
    }
  }
}

template <class D>
HWY_INLINE void ScoreImpl(D d, const float* q, int n_q, const uint16_t* k, int64_t k_stride,
                          int64_t n, int hd, float scale, float* scores, int64_t ld) {
  const size_t N = hn::Lanes(d);
  // The kernels for 1-4 vectors of queries (blocked) or 1-4 queries (rows).
  using Blocked = void (*)(D, const float*, int, const uint16_t*, int64_t, int64_t, int, float,
                           float*, int64_t);
  using Rows =
      void (*)(D, const float*, int, const uint16_t*, int64_t, int64_t, float, float*, int64_t);
  static constexpr Blocked kBlocked[4] = {&ScoreBlocked<1, D>, &ScoreBlocked<2, D>,
                                          &ScoreBlocked<3, D>, &ScoreBlocked<4, D>};
  static constexpr Rows kRows[4] = {&ScoreRows<1, D>, &ScoreRows<2, D>, &ScoreRows<3, D>,
                                    &ScoreRows<4, D>};
  if (n_q >= 8 && hd <= kMaxStagedHeadDim) {
    const int group = static_cast<int>(std::min(kMaxQueryGroup, 4 * N));
    for (int q0 = 0; q0 < n_q; q0 += group) {
      const int g = std::min(group, n_q - q0);
      const float* qg = q + static_cast<int64_t>(q0) * hd;
      float* sg = scores + q0 * ld;
      kBlocked[(g + N - 1) / N - 1](d, qg, g, k, k_stride, n, hd, scale, sg, ld);
    }
    return;
  }
  for (int q0 = 0; q0 < n_q; q0 += 4) {
    const float* qg = q + static_cast<int64_t>(q0) * hd;
    float* sg = scores + q0 * ld;
    kRows[std::min(4, n_q - q0) - 1](d, qg, hd, k, k_stride, n, scale, sg, ld);
  }
}

// ---- Values: NQ (<= 4) queries' outputs, C vectors of head_dim from offset x, kept in
// registers over n rows (fp16 rows or fp32 staged rows).

// Vectors of head_dim per tile when few queries read fp16 rows directly (decode): 4 where the
// register file has 32 vectors (NQ x 4 accumulators, 4 row vectors, one weight), 2 on AVX2. The
// staged fp32 rows of many queries keep 2: measured faster there (attention_bench).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kRowValueVectors = 2;  // AVX2: 16 registers
#else
constexpr int kRowValueVectors = 4;  // AVX-512, NEON, SVE: 32
#endif
constexpr int kStagedValueVectors = 2;

template <int NQ, int C, class D, class T>
HWY_INLINE void AccumulateTile(D d, const float* p, int64_t ld, const T* v, int64_t v_stride,
                               int64_t n, int hd, size_t x, float* out) {
  static_assert(NQ >= 1 && NQ <= 4 && C >= 1 && C <= 4, "tile shape");
  using V = hn::Vec<D>;
  const size_t N = hn::Lanes(d);
  // Named accumulators (query i, vector c: a<i><c>); queries and vectors beyond NQ and C alias
  // the first ones and are never touched. (Arrays of vectors compiled to slower code here.)
  float* o0 = out + x;
  float* o1 = out + std::min(1, NQ - 1) * hd + x;
  float* o2 = out + std::min(2, NQ - 1) * hd + x;
  float* o3 = out + std::min(3, NQ - 1) * hd + x;
  const float* p0 = p;
  const float* p1 = p + std::min(1, NQ - 1) * ld;
  const float* p2 = p + std::min(2, NQ - 1) * ld;
  const float* p3 = p + std::min(3, NQ - 1) * ld;
  const auto load = [&](const float* o, int c) {
    return hn::LoadU(d, o + std::min(c, C - 1) * N);
  };
  V a00 = load(o0, 0), a01 = load(o0, 1), a02 = load(o0, 2), a03 = load(o0, 3);
  V a10 = load(o1, 0), a11 = load(o1, 1), a12 = load(o1, 2), a13 = load(o1, 3);
  V a20 = load(o2, 0), a21 = load(o2, 1), a22 = load(o2, 2), a23 = load(o2, 3);
  V a30 = load(o3, 0), a31 = load(o3, 1), a32 = load(o3, 2), a33 = load(o3, 3);
  const T* row = v + x;
  // One query's weight of row j times the row's vectors.
  const auto step = [d](float w, V v0, V v1, V v2, V v3, V& c0, V& c1, V& c2, V& c3) {
    const auto vw = hn::Set(d, w);
    c0 = hn::MulAdd(vw, v0, c0);
    if constexpr (C > 1) c1 = hn::MulAdd(vw, v1, c1);
    if constexpr (C > 2) c2 = hn::MulAdd(vw, v2, c2);
    if constexpr (C > 3) c3 = hn::MulAdd(vw, v3, c3);
  };
  for (int64_t j = 0; j < n; ++j, row += v_stride) {
    const V v0 = LoadRow(d, row);
    const V v1 = C > 1 ? LoadRow(d, row + N) : v0;
    const V v2 = C > 2 ? LoadRow(d, row + 2 * N) : v0;
    const V v3 = C > 3 ? LoadRow(d, row + 3 * N) : v0;
    step(p0[j], v0, v1, v2, v3, a00, a01, a02, a03);
    if constexpr (NQ > 1) step(p1[j], v0, v1, v2, v3, a10, a11, a12, a13);
    if constexpr (NQ > 2) step(p2[j], v0, v1, v2, v3, a20, a21, a22, a23);
    if constexpr (NQ > 3) step(p3[j], v0, v1, v2, v3, a30, a31, a32, a33);
  }
  const auto put = [d, N](V c0, V c1, V c2, V c3, float* o) {
    hn::StoreU(c0, d, o);
    if constexpr (C > 1) hn::StoreU(c1, d, o + N);
    if constexpr (C > 2) hn::StoreU(c2, d, o + 2 * N);
    if constexpr (C > 3) hn::StoreU(c3, d, o + 3 * N);
  };
  put(a00, a01, a02, a03, o0);
  if constexpr (NQ > 1) put(a10, a11, a12, a13, o1);
  if constexpr (NQ > 2) put(a20, a21, a22, a23, o2);
  if constexpr (NQ > 3) put(a30, a31, a32, a33, o3);
}

// Every query, all of head_dim, over n rows: tiles of C vectors of head_dim, then single
// vectors for the rest.
template <int C, class D, class T>
HWY_NOINLINE void AccumulateRows(D d, const float* p, int n_q, int64_t ld, const T* v,
                                 int64_t v_stride, int64_t n, int hd, float* out) {
  const size_t N = hn::Lanes(d);
  // The tiles for 1-4 queries x C or 1 vectors of head_dim.
  using Tile = void (*)(D, const float*, int64_t, const T*, int64_t, int64_t, int, size_t, float*);
  static constexpr Tile kWide[4] = {&AccumulateTile<1, C, D, T>, &AccumulateTile<2, C, D, T>,
                                    &AccumulateTile<3, C, D, T>, &AccumulateTile<4, C, D, T>};
  static constexpr Tile kOne[4] = {&AccumulateTile<1, 1, D, T>, &AccumulateTile<2, 1, D, T>,
                                   &AccumulateTile<3, 1, D, T>, &AccumulateTile<4, 1, D, T>};
  for (int q0 = 0; q0 < n_q; q0 += 4) {
    const int g = std::min(4, n_q - q0);
    const float* pg = p + q0 * ld;
    float* og = out + static_cast<int64_t>(q0) * hd;
    size_t x = 0;
    for (; x + C * N <= static_cast<size_t>(hd); x += C * N) {
      kWide[g - 1](d, pg, ld, v, v_stride, n, hd, x, og);
    }
    for (; x < static_cast<size_t>(hd); x += N) kOne[g - 1](d, pg, ld, v, v_stride, n, hd, x, og);
  }
}

template <class D>
HWY_INLINE void AccumulateImpl(D d, const float* p, int n_q, int64_t ld, const uint16_t* v,
                               int64_t v_stride, int64_t n, int hd, float* out) {
  if (n_q < 8 || hd > kMaxStagedHeadDim) {
    AccumulateRows<kRowValueVectors>(d, p, n_q, ld, v, v_stride, n, hd, out);
    return;
  }
  // Many queries: each block of value rows is converted once, then swept by every query.
  const size_t N = hn::Lanes(d);
  HWY_ALIGN float staged[kValueBlock * kMaxStagedHeadDim];
  for (int64_t j0 = 0; j0 < n; j0 += kValueBlock) {
    const int64_t rows = std::min(kValueBlock, n - j0);
    for (int64_t r = 0; r < rows; ++r) {
      const uint16_t* src = v + (j0 + r) * v_stride;
      for (size_t x = 0; x < static_cast<size_t>(hd); x += N) {
        hn::Store(LoadRow(d, src + x), d, staged + r * hd + x);
      }
    }
    AccumulateRows<kStagedValueVectors>(d, p + j0, n_q, ld, static_cast<const float*>(staged), hd,
                                        rows, hd, out);
  }
}

// ---- Exported entry points (one per target).

void ScoreFp16Keys(const float* q, int n_q, const uint16_t* k, int64_t k_stride, int64_t n,
                   int head_dim, float scale, float* scores, int64_t ld) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 8> d8;
  if (head_dim % hn::Lanes(d) == 0) {
    ScoreImpl(d, q, n_q, k, k_stride, n, head_dim, scale, scores, ld);
  } else if (head_dim % hn::Lanes(d8) == 0) {
    ScoreImpl(d8, q, n_q, k, k_stride, n, head_dim, scale, scores, ld);
  } else {
    attention_impl::portable::ScoreFp16Keys(q, n_q, k, k_stride, n, head_dim, scale, scores, ld);
  }
}

void AccumulateFp16Values(const float* p, int n_q, int64_t ld, const uint16_t* v, int64_t v_stride,
                          int64_t n, int head_dim, float* out) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 8> d8;
  if (head_dim % hn::Lanes(d) == 0) {
    AccumulateImpl(d, p, n_q, ld, v, v_stride, n, head_dim, out);
  } else if (head_dim % hn::Lanes(d8) == 0) {
    AccumulateImpl(d8, p, n_q, ld, v, v_stride, n, head_dim, out);
  } else {
    attention_impl::portable::AccumulateFp16Values(p, n_q, ld, v, v_stride, n, head_dim, out);
  }
}

float ExpShiftSum(float* x, int64_t n, float max) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto vmax = hn::Set(d, max);
  auto sum = hn::Zero(d);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto e = hn::Exp(d, hn::Sub(hn::LoadU(d, x + j), vmax));
    hn::StoreU(e, d, x + j);
    sum = hn::Add(sum, e);
  }
  if (j < n) {  // the tail through the same vector code, so x[j]'s value does not depend on j
    const auto m = hn::FirstN(d, static_cast<size_t>(n - j));
    const auto e = hn::IfThenElseZero(m, hn::Exp(d, hn::Sub(hn::MaskedLoad(m, d, x + j), vmax)));
    hn::BlendedStore(e, m, d, x + j);
    sum = hn::Add(sum, e);
  }
  return SumLanes(d, sum);
}

float MaxOf(const float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto m0 = hn::Set(d, -HUGE_VALF), m1 = m0;
  int64_t j = 0;
  for (; j + 2 * N <= n; j += 2 * N) {
    m0 = hn::Max(m0, hn::LoadU(d, x + j));
    m1 = hn::Max(m1, hn::LoadU(d, x + j + N));
  }
  for (; j + N <= n; j += N) m0 = hn::Max(m0, hn::LoadU(d, x + j));
  float m = hn::GetLane(hn::MaxOfLanes(d, hn::Max(m0, m1)));
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  if constexpr (kHardwareFp16) {
    const hn::ScalableTag<float> d;
    const hn::Rebind<hwy::float16_t, decltype(d)> dh;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    for (; i + N <= n; i += N) {
      hn::StoreU(hn::DemoteTo(dh, hn::LoadU(d, src + i)), dh,
                 reinterpret_cast<hwy::float16_t*>(dst + i));
    }
  }
  attention_impl::portable::Fp32ToFp16Row(src + i, dst + i, n - i);
}

void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  if constexpr (kHardwareFp16) {
    const hn::ScalableTag<float> d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    for (; i + N <= n; i += N) hn::StoreU(LoadRow(d, src + i), d, dst + i);
  }
  attention_impl::portable::Fp16ToFp32Row(src + i, dst + i, n - i);
}

int64_t Target() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace qevict
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qevict::attention_impl::highway {

HWY_EXPORT(ScoreFp16Keys);
HWY_EXPORT(AccumulateFp16Values);
HWY_EXPORT(ExpShiftSum);
HWY_EXPORT(MaxOf);
HWY_EXPORT(Fp32ToFp16Row);
HWY_EXPORT(Fp16ToFp32Row);
HWY_EXPORT(Target);

namespace {

std::atomic<int64_t> forced_targets{0};

// Index into this file's dispatch tables of the best compiled target within `targets`.
// hwy::ChosenTarget is what HWY_DYNAMIC_DISPATCH uses, but here one is built per SIMD level, so
// switching levels never touches Highway's process-wide choice. (In Highway 1.0.3,
// SetSupportedTargetsForTest stores a plain process-wide mask and DeInit()s the global
// ChosenTarget so that the next HWY_DYNAMIC_DISPATCH re-chooses; and without a mask
// SupportedTargets() runs CPUID again, so it is called once here, not per call.)
size_t IndexOf(int64_t targets) {
  hwy::ChosenTarget chosen;
  chosen.Update(targets);
  return chosen.GetIndex();
}

struct LevelIndexes {
  size_t avx2;
  size_t best;
};

const LevelIndexes& Indexes() {
  static const LevelIndexes indexes = [] {
    const int64_t supported = hwy::SupportedTargets();
#if HWY_ARCH_X86
    // On x86 a lower bit is a wider target: drop everything above AVX2.
    const int64_t avx2 = supported & ~(HWY_AVX2 - 1);
#else
    const int64_t avx2 = supported;
#endif
    return LevelIndexes{IndexOf(avx2), IndexOf(supported)};
  }();
  return indexes;
}

size_t Index() {
  if (const int64_t forced = forced_targets.load(std::memory_order_relaxed)) {
    return IndexOf(forced);
  }
  return ActiveSimdLevel() == SimdLevel::kAvx2 ? Indexes().avx2 : Indexes().best;
}

}  // namespace

bool Enabled() {
#if HWY_ARCH_X86
  return ActiveSimdLevel() != SimdLevel::kPortable ||
         forced_targets.load(std::memory_order_relaxed) != 0;
#else
  return true;  // SimdLevel names x86 levels; elsewhere Highway's best target (NEON, SVE) runs
#endif
}

void ScoreFp16Keys(const float* q, int n_q, const uint16_t* k, int64_t k_stride, int64_t n,
                   int head_dim, float scale, float* scores, int64_t ld) {
  HWY_DISPATCH_TABLE(ScoreFp16Keys)[Index()](q, n_q, k, k_stride, n, head_dim, scale, scores, ld);
}

void AccumulateFp16Values(const float* p, int n_q, int64_t ld, const uint16_t* v, int64_t v_stride,
                          int64_t n, int head_dim, float* out) {
  HWY_DISPATCH_TABLE(AccumulateFp16Values)[Index()](p, n_q, ld, v, v_stride, n, head_dim, out);
}

float ExpShiftSum(float* x, int64_t n, float max) {
  return HWY_DISPATCH_TABLE(ExpShiftSum)[Index()](x, n, max);
}

float MaxOf(const float* x, int64_t n) { return HWY_DISPATCH_TABLE(MaxOf)[Index()](x, n); }

void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n) {
  HWY_DISPATCH_TABLE(Fp32ToFp16Row)[Index()](src, dst, n);
}

void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n) {
  HWY_DISPATCH_TABLE(Fp16ToFp32Row)[Index()](src, dst, n);
}

size_t DispatchIndex() { return Index(); }

int64_t ActiveTarget() { return Enabled() ? HWY_DISPATCH_TABLE(Target)[Index()]() : 0; }

void ForceTargetsForTest(int64_t targets) {
  forced_targets.store(targets, std::memory_order_relaxed);
}

}  // namespace qevict::attention_impl::highway
#endif  // HWY_ONCE
