// Prototype, for the benchmark only: Q4_1 and Q8_0 weight rows against kQ8Block32 activations,
// written once over Highway 1.0.3 (Debian 12), compiled by foreach_target.h for AVX2, AVX-512
// (AVX3, and AVX3_DL for the experiment below) and the portable fallback here; NEON/SVE on ARM
// (see the note on arrays below). Figures and conclusions: bench/vec_dot_hwy_bench.cc.
//
// Highway 1.0.3 has no u8 x i8 multiply-add (x86 vpmaddubsw; SatWidenMulPairwiseAdd, added to
// Highway in 2023, google/highway#1622) and no 8-bit dot product into 32-bit lanes (AVX-512
// VNNI vpdpbusd, ARM sdot; SumOfMulQuadAccumulate, google/highway#1637). Its narrowest integer
// multiply-add is ReorderWidenMulAccumulate on int16 (x86 vpmaddwd + an add; NEON smlal). So
// codes are widened to int16 first:
//   - weights: Q8_0 codes sign-extended (PromoteTo i8 -> i16); Q4_1 nibbles zero-extended
//     (PromoteTo u8 -> i16 of the packed bytes, then And 0x0f / ShiftRight 4);
//   - activations: sign-extended once per kernel call into a per-thread buffer
//     (Variant::kStaged: a decode call covers >= 16 weight rows, so the cost is shared), or at
//     every use (Variant::kDirect).
// AVX-512 (32 int16 lanes) takes two blocks per step, the same half of each side by side, so
// int32 lanes 0-7 of the multiply-add belong to one block and 8-15 to the next, and one
// conversion and one FMA (by the two blocks' d_weight * d_act, a TableLookupLanes of the
// group's 16 gathered scales times the activation's repeated scales) serve two blocks, as in
// the hand-written AVX-512 kernel. Narrower vectors (AVX2: two ymm per block) take one block
// per step and broadcast its scale from a small array computed per group of 8 blocks. Two
// accumulators per token (even and odd steps) keep the FMAs independent. The Q4_1 min is
// added once per group as m * (d_act * sum of the activation codes), as in the hand-written
// code; block headers are read with one gather per group of 8 (AVX2) or 16 (AVX-512) blocks.
//
// Variant::kNativeShim is an experiment outside Highway 1.0.3, to measure what the missing op
// costs: the same code with the 8-bit multiply-add as one intrinsic on the raw vector
// (vpmaddubsw on the AVX2 target, vpdpbusd on AVX3_DL).
//
// Arrays of vectors (per-token accumulators, pieces of a block) keep the code short; SVE's
// sizeless vectors would need them spelled out as named variables (as kernels/attention_hwy.cc
// does).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bench/vec_dot_hwy.h"
#include "quant/vec_dot_simd.h"

// AVX3_DL (Ice Lake and later: AVX-512 VNNI) is compiled too, for the kNativeShim experiment.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
// As in kernels/attention_hwy.cc: AVX2 is the lowest x86 SIMD level; the baseline target
// (SCALAR with this compiler's x86-64 baseline) stays as the portable fallback.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/vec_dot_hwy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/cache_control.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
// Highway 1.0.3's AVX3_DL target string names avxvnni but not avx512vnni.
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC target("avx512vnni")
#endif
namespace qevict::vec_dot_hwy {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kPrefetchDistance = 2048;  // as the hand-written kernels (simd_helpers_*.h)
constexpr int kMaxPassTokens = 4;        // tokens per pass (register budget)

struct Q4_1 {
  static constexpr int kBlockBytes = 20, kQsOffset = 4;
  static constexpr bool kHasMin = true;
};
struct Q8_0 {
  static constexpr int kBlockBytes = 34, kQsOffset = 2;
  static constexpr bool kHasMin = false;
};

using D16 = hn::CappedTag<int16_t, 32>;  // one block (AVX-512) or a piece of one
using DG = hn::CappedTag<float, 16>;     // per-block scales: one lane per block of a group

// One token's activation row as the kernel reads it.
struct Act {
  const int8_t* qs;      // kQ8Block32 codes
  const float* d_wide;   // kQ8Block32 scales, each repeated 8 times
  const float* sums;     // d * sum of codes, one per block
  const int16_t* wide;   // staged: codes as int16
  const float* d;        // staged: one scale per block, zero padded to a whole group
  const float* sums_pad; // staged: sums, zero padded to a whole group
};

// Per-thread staging buffers (Variant::kStaged).
struct Staging {
  std::vector<int16_t> wide;
  std::vector<float> d, sums;
};
Staging& ThreadStaging() {
  static thread_local Staging staging;
  return staging;
}

// The floats whose fp16 bits are the low 16 bits of each 32-bit lane.
HWY_INLINE hn::Vec<DG> HalvesToFloat(DG dg, hn::Vec<hn::RebindToSigned<DG>> bits) {
  const hn::RebindToSigned<DG> di;
  const hn::Rebind<uint16_t, DG> du16;
  const hn::Rebind<hwy::float16_t, DG> dh;
  const auto h = hn::DemoteTo(du16, hn::And(bits, hn::Set(di, 0xffff)));
  return hn::PromoteTo(dg, hn::BitCast(dh, h));
}

constexpr size_t kLanes16 = hn::MaxLanes(D16());
// AVX-512 (32 int16 lanes): a vector holds the same half of two blocks side by side, so that
// after the multiply-add int32 lanes 0-7 belong to one block and 8-15 to the next, and one
// conversion and one FMA (by a vector of the two blocks' scales) serve two blocks, as in the
// hand-written AVX-512 kernel. Narrower vectors take one block at a time in element order.
constexpr bool kPairs = kLanes16 >= 32;
constexpr int kStepBlocks = kPairs ? 2 : 1;
constexpr size_t kPieces = 32 * kStepBlocks / kLanes16;  // int16 vectors per step

// The weight codes of a step (block a, and block b when kPairs) as int16: kPieces vectors in
// the order the staged activations use (pairs: [a 0-15, b 0-15], [a 16-31, b 16-31]; single
// blocks: element order).
template <class F>
HWY_INLINE void WeightPieces(D16 d16, const uint8_t* a, const uint8_t* b, hn::Vec<D16>* out) {
  const hn::Rebind<uint8_t, D16> du8;
  const hn::Rebind<int8_t, D16> di8;
#if HWY_TARGET != HWY_SCALAR
  if constexpr (kPairs) {
    const hn::Half<decltype(du8)> du8h;
    const hn::Half<decltype(di8)> di8h;
    if constexpr (F::kHasMin) {  // Q4_1: low nibbles are elements 0-15, high 16-31
      const auto bytes = hn::PromoteTo(
          d16, hn::Combine(du8, hn::LoadU(du8h, b + F::kQsOffset), hn::LoadU(du8h, a + F::kQsOffset)));
      out[0] = hn::And(bytes, hn::Set(d16, 0x0f));
      out[1] = hn::ShiftRight<4>(bytes);
    } else {  // Q8_0
      const auto* qa = reinterpret_cast<const int8_t*>(a + F::kQsOffset);
      const auto* qb = reinterpret_cast<const int8_t*>(b + F::kQsOffset);
      out[0] = hn::PromoteTo(d16, hn::Combine(di8, hn::LoadU(di8h, qb), hn::LoadU(di8h, qa)));
      out[1] = hn::PromoteTo(d16, hn::Combine(di8, hn::LoadU(di8h, qb + 16), hn::LoadU(di8h, qa + 16)));
    }
    return;
  }
#endif
  (void)b;
  for (size_t p = 0; p < kPieces; ++p) {
    if constexpr (F::kHasMin) {
      constexpr size_t kHalf = kPieces / 2;  // pieces of the low nibbles
      const auto bytes = hn::PromoteTo(d16, hn::LoadU(du8, a + F::kQsOffset + (p % kHalf) * kLanes16));
      out[p] = p < kHalf ? hn::And(bytes, hn::Set(d16, 0x0f)) : hn::ShiftRight<4>(bytes);
    } else {
      out[p] = hn::PromoteTo(d16, hn::LoadU(di8, reinterpret_cast<const int8_t*>(a + F::kQsOffset) + p * kLanes16));
    }
  }
}

// The activation codes of blocks a (and b) in the order of WeightPieces, widened to int16;
// b_present false gives zeros for block b.
HWY_INLINE void WidenActivation(D16 d16, const int8_t* a, const int8_t* b, bool b_present, hn::Vec<D16>* out) {
  const hn::Rebind<int8_t, D16> di8;
#if HWY_TARGET != HWY_SCALAR
  if constexpr (kPairs) {
    const hn::Half<decltype(di8)> di8h;
    for (size_t h = 0; h < 2; ++h) {
      const auto hi = b_present ? hn::LoadU(di8h, b + 16 * h) : hn::Zero(di8h);
      out[h] = hn::PromoteTo(d16, hn::Combine(di8, hi, hn::LoadU(di8h, a + 16 * h)));
    }
    return;
  }
#endif
  (void)b;
  (void)b_present;
  for (size_t p = 0; p < kPieces; ++p) out[p] = hn::PromoteTo(d16, hn::LoadU(di8, a + p * kLanes16));
}

// ---- Variant::kNativeShim (an experiment, not Highway-only code): vpmaddubsw (+ vpmaddwd by 1)
// on AVX2, vpdpbusd on AVX3_DL, applied to the raw vectors; weights unpacked to bytes with
// Highway ops, activations used as stored. Not offered on other targets (Tile returns null).
#if HWY_TARGET == HWY_AVX2
constexpr int kNativeKind = 1;
using DW8 = hn::Full256<uint8_t>;  // one block of weight codes as bytes
#elif HWY_TARGET == HWY_AVX3_DL
constexpr int kNativeKind = 2;
using DW8 = hn::Full512<uint8_t>;  // two blocks
#else
constexpr int kNativeKind = 0;
using DW8 = hn::CappedTag<uint8_t, 32>;
#endif

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3_DL
// Nibbles of 16 packed bytes in element order (low nibbles, then high), in each 256-bit half
// of the result: [qs_a, qs_a] (and [qs_b, qs_b]) shifted right by 0 or 4 per 128-bit block.
HWY_INLINE hn::Vec<DW8> NibbleBytes(const uint8_t* qs_a, const uint8_t* qs_b) {
  const DW8 d8;
  const hn::Repartition<uint32_t, DW8> d32;
  alignas(64) static constexpr uint32_t kShifts[16] = {0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4};
  auto v = hn::LoadDup128(d8, qs_a);
#if HWY_TARGET == HWY_AVX3_DL
  v = hn::IfThenElse(hn::FirstN(d8, 32), v, hn::LoadDup128(d8, qs_b));
#else
  (void)qs_b;
#endif
  return hn::And(hn::BitCast(d8, hn::Shr(hn::BitCast(d32, v), hn::Load(d32, kShifts))), hn::Set(d8, 0x0f));
}

// Weight codes of block a (and b on AVX3_DL) as bytes: Q4_1 nibbles; Q8_0 signed codes as
// they are (AVX2: |w| and the sign moved to the activation) or + 128 (AVX3_DL, corrected by
// -128 * d * activation sum like a min).
template <class F>
HWY_INLINE hn::Vec<DW8> NativeWeights(const uint8_t* a, const uint8_t* b) {
  const DW8 d8;
  if constexpr (F::kHasMin) return NibbleBytes(a + F::kQsOffset, b + F::kQsOffset);
#if HWY_TARGET == HWY_AVX2
  (void)b;
  return hn::LoadU(d8, a + F::kQsOffset);
#else
  const hn::Full256<uint8_t> d8h;
  const auto v = hn::Combine(d8, hn::LoadU(d8h, b + F::kQsOffset), hn::LoadU(d8h, a + F::kQsOffset));
  return hn::Xor(v, hn::Set(d8, 0x80));
#endif
}

// The int32 dot products of the step's weight bytes with the activation codes at act (lanes
// of block a, then of block b); two false: block b absent.
template <class F>
HWY_INLINE hn::Vec<hn::Repartition<int32_t, DW8>> NativeDot(hn::Vec<DW8> w, const int8_t* act, bool two) {
  const hn::Repartition<int8_t, DW8> di8;
  auto a = hn::LoadU(di8, act);
#if HWY_TARGET == HWY_AVX2
  (void)two;
  __m256i p;
  if constexpr (F::kHasMin) {
    p = _mm256_maddubs_epi16(w.raw, a.raw);
  } else {
    p = _mm256_maddubs_epi16(_mm256_abs_epi8(w.raw), _mm256_sign_epi8(a.raw, w.raw));
  }
  return hn::Vec256<int32_t>{_mm256_madd_epi16(p, _mm256_set1_epi16(1))};
#else
  if (!two) a = hn::IfThenElseZero(hn::FirstN(di8, 32), a);
  return hn::Vec512<int32_t>{_mm512_dpbusd_epi32(_mm512_setzero_si512(), w.raw, a.raw)};
#endif
}
#endif

// out[t] = W . A_t for one weight row of nb blocks and T (<= kMaxPassTokens) tokens.
template <class F, int T, Variant kV>
HWY_INLINE void RowDot(int64_t nb, const uint8_t* w, const Act* act, float* out) {
  const D16 d16;
  const hn::Repartition<int32_t, D16> d32;
  const hn::Rebind<float, decltype(d32)> df;
  const DG dg;
  const hn::RebindToSigned<DG> dgi;
  constexpr size_t G = hn::MaxLanes(DG());
  constexpr bool kStaged = kV == Variant::kStaged;
  constexpr bool kNative = kV == Variant::kNativeShim && kNativeKind != 0;
  // The per-group constant term: Q4_1's min, Q8_0's -128 * d on the vpdpbusd path.
  constexpr bool kMinTerm = F::kHasMin || (kNative && kNativeKind == 2);
  static_assert(32 % kLanes16 == 0 && G <= 16 && (!kPairs || G % 2 == 0), "whole pieces and pairs per group");

  HWY_ALIGN float scale[T][16] = {};
  // Two accumulators per token (even and odd steps), so that consecutive steps' FMAs do not
  // wait on each other.
  hn::Vec<decltype(df)> acc[T], acc_odd[T];
  hn::Vec<DG> acc_min[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = acc_odd[t] = hn::Zero(df);
    acc_min[t] = hn::Zero(dg);
  }
  const auto iota = hn::Iota(dgi, 0);
  const auto offsets = hn::Mul(iota, hn::Set(dgi, F::kBlockBytes));
  const auto stride8 = hn::Mul(iota, hn::Set(dgi, 8));
  for (int64_t g = 0; g < nb; g += G) {
    const int count = static_cast<int>(std::min<int64_t>(G, nb - g));
    const bool full = count == static_cast<int>(G);
    const uint8_t* base = w + g * F::kBlockBytes;
    // The first 4 bytes of each block: d (and m for Q4_1) as fp16. A partial group gathers
    // its last block again in the lanes past the end (never read past the row).
    const auto last = hn::Set(dgi, count - 1);
    const auto head = hn::GatherOffset(dgi, reinterpret_cast<const int32_t*>(base),
                                       full ? offsets : hn::Min(offsets, hn::Mul(last, hn::Set(dgi, F::kBlockBytes))));
    const auto d_w = HalvesToFloat(dg, head);
    hn::Vec<DG> m;
    if constexpr (F::kHasMin) {
      m = HalvesToFloat(dg, hn::BitCast(dgi, hn::ShiftRight<16>(hn::BitCast(hn::RebindToUnsigned<DG>(), head))));
    } else {
      m = hn::Mul(d_w, hn::Set(dg, -128.0f));
    }
    if (kMinTerm && !full) m = hn::IfThenElseZero(hn::FirstN(dg, static_cast<size_t>(count)), m);
    for (int t = 0; t < T; ++t) {
      hn::Vec<DG> sums;
      if (kStaged) {
        sums = hn::LoadU(dg, act[t].sums_pad + g);
      } else {
        sums = full ? hn::LoadU(dg, act[t].sums + g) : hn::MaskedLoad(hn::FirstN(dg, static_cast<size_t>(count)), dg, act[t].sums + g);
      }
      if constexpr (kMinTerm) acc_min[t] = hn::MulAdd(m, sums, acc_min[t]);
      if constexpr (!kPairs) {  // per-block scales d_w * d_act, broadcast from memory below
        hn::Vec<DG> d_a;
        if (kStaged) {
          d_a = hn::LoadU(dg, act[t].d + g);
        } else {
          d_a = hn::GatherIndex(dg, act[t].d_wide + 8 * g, full ? stride8 : hn::Min(stride8, hn::Mul(last, hn::Set(dgi, 8))));
        }
        hn::Store(hn::Mul(d_w, d_a), dg, scale[t]);
      }
    }
    // The integer dot product of step j (block g + j, and g + j + 1 for pairs) with every
    // token, scaled into acc (or acc_odd).
    auto step = [&](int j, hn::Vec<decltype(df)>* into) HWY_ATTR __attribute__((always_inline)) {
      const uint8_t* blk = base + j * F::kBlockBytes;
      const bool two = kPairs && (full || j + 1 < count);
      for (int k = 0; k < kStepBlocks * F::kBlockBytes; k += 64) hwy::Prefetch(blk + kPrefetchDistance + k);
      const int64_t b = g + j;
      hn::Vec<D16> wq[kPieces];
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3_DL
      hn::Vec<DW8> wb;
      if constexpr (kNative) {
        wb = NativeWeights<F>(blk, two ? blk + F::kBlockBytes : blk);
      } else
#endif
      {
        WeightPieces<F>(d16, blk, two ? blk + F::kBlockBytes : blk, wq);
      }
      hn::Vec<decltype(df)> step_scale;
      if constexpr (kPairs) {  // lanes 0-7: d_w of block j, 8-15: of block j + 1
        const auto pair_index = hn::ShiftRight<3>(iota);
        step_scale = hn::TableLookupLanes(d_w, hn::IndicesFromVec(dg, hn::Add(pair_index, hn::Set(dgi, j))));
      }
      for (int t = 0; t < T; ++t) {
        auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3_DL
        if constexpr (kNative) {
          sum0 = NativeDot<F>(wb, act[t].qs + 32 * b, two);
        } else
#endif
        {
          hn::Vec<D16> aq[kPieces];
          if constexpr (kStaged) {
            for (size_t p = 0; p < kPieces; ++p) aq[p] = hn::LoadU(d16, act[t].wide + 32 * b + p * kLanes16);
          } else {
            WidenActivation(d16, act[t].qs + 32 * b, act[t].qs + 32 * b + 32, two, aq);
          }
          for (size_t p = 0; p < kPieces; ++p) sum0 = hn::ReorderWidenMulAccumulate(d32, wq[p], aq[p], sum0, sum1);
        }
        hn::Vec<decltype(df)> s;
        if constexpr (kPairs) {  // d_act of the two blocks, each stored 8 times
          auto d_a = hn::LoadU(df, act[t].d_wide + 8 * b);
          if (!two) d_a = hn::IfThenElseZero(hn::FirstN(df, 8), d_a);
          s = hn::Mul(step_scale, d_a);
        } else {
          s = hn::Set(df, scale[t][j]);
        }
        into[t] = hn::MulAdd(hn::ConvertTo(df, hn::Add(sum0, sum1)), s, into[t]);
      }
    };
    if (full) {  // unrolled: the block indices (and pair-scale permutations) become constants
#pragma GCC unroll 16
      for (int j = 0; j < static_cast<int>(G); j += 2 * kStepBlocks) {
        step(j, acc);
        // A one-lane group (the scalar target) has no odd step: never read past the group.
        if (j + kStepBlocks < static_cast<int>(G)) step(j + kStepBlocks, acc_odd);
      }
    } else {
      int j = 0;
      for (; j + kStepBlocks < count; j += 2 * kStepBlocks) {
        step(j, acc);
        step(j + kStepBlocks, acc_odd);
      }
      if (j < count) step(j, acc);
    }
  }
  for (int t = 0; t < T; ++t) {
    acc[t] = hn::Add(acc[t], acc_odd[t]);
    if constexpr (kMinTerm && hn::MaxLanes(df) == G) {  // one reduction where the lanes match
      acc[t] = hn::Add(acc[t], acc_min[t]);
      out[t] = hn::GetLane(hn::SumOfLanes(df, acc[t]));
    } else {
      out[t] = hn::GetLane(hn::SumOfLanes(df, acc[t]));
      if constexpr (kMinTerm) out[t] += hn::GetLane(hn::SumOfLanes(dg, acc_min[t]));
    }
  }
}

template <class F, int T, Variant kV>
void Rows(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const Act* act, float* out,
          int64_t out_stride) {
  for (int r = 0; r < n_rows; ++r) {
    float result[T];
    RowDot<F, T, kV>(n / 32, w + r * w_stride, act, result);
    for (int t = 0; t < T; ++t) out[t * out_stride + r] = result[t];
  }
}

template <class F, Variant kV>
void TileImpl(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act,
              size_t act_stride, int n_tok, float* out, int64_t out_stride) {
  constexpr bool kStaged = kV == Variant::kStaged;
  const int64_t nb = n / 32;
  const int64_t nb_pad = (nb + 15) / 16 * 16;
  Act a[kMaxTileTokens];
  Staging* staging = kStaged ? &ThreadStaging() : nullptr;
  if (kStaged) {
    staging->wide.resize(static_cast<size_t>(nb_pad * 32 * n_tok));
    staging->d.assign(static_cast<size_t>(nb_pad * n_tok), 0.0f);
    staging->sums.assign(static_cast<size_t>(nb_pad * n_tok), 0.0f);
  }
  for (int t = 0; t < n_tok; ++t) {
    const uint8_t* row = act + t * act_stride;
    a[t].qs = reinterpret_cast<const int8_t*>(row);
    a[t].d_wide = reinterpret_cast<const float*>(row + vec_dot::ActScaleOffset(n));
    a[t].sums = reinterpret_cast<const float*>(row + vec_dot::ActSumOffset32(n));
    if (kStaged) {
      int16_t* wide = staging->wide.data() + t * nb_pad * 32;
      float* d = staging->d.data() + t * nb_pad;
      float* sums = staging->sums.data() + t * nb_pad;
      const D16 d16;
      for (int64_t b = 0; b < nb; b += kStepBlocks) {
        hn::Vec<D16> v[kPieces];
        WidenActivation(d16, a[t].qs + 32 * b, a[t].qs + 32 * b + 32, b + 1 < nb, v);
        for (size_t p = 0; p < kPieces; ++p) hn::StoreU(v[p], d16, wide + 32 * b + p * kLanes16);
      }
      for (int64_t b = 0; b < nb; ++b) {
        d[b] = a[t].d_wide[8 * b];
        sums[b] = a[t].sums[b];
      }
      a[t].wide = wide;
      a[t].d = d;
      a[t].sums_pad = sums;
    }
  }
  for (int t0 = 0; t0 < n_tok; t0 += kMaxPassTokens) {
    float* o = out + t0 * out_stride;
    switch (std::min(n_tok - t0, kMaxPassTokens)) {
      case 1: Rows<F, 1, kV>(n, w, w_stride, n_rows, a + t0, o, out_stride); break;
      case 2: Rows<F, 2, kV>(n, w, w_stride, n_rows, a + t0, o, out_stride); break;
      case 3: Rows<F, 3, kV>(n, w, w_stride, n_rows, a + t0, o, out_stride); break;
      default: Rows<F, 4, kV>(n, w, w_stride, n_rows, a + t0, o, out_stride); break;
    }
  }
}

void TileQ4_1Staged(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act,
                    size_t act_stride, int n_tok, float* out, int64_t out_stride) {
  TileImpl<Q4_1, Variant::kStaged>(n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
}
void TileQ4_1Direct(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act,
                    size_t act_stride, int n_tok, float* out, int64_t out_stride) {
  TileImpl<Q4_1, Variant::kDirect>(n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
}
void TileQ8_0Staged(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act,
                    size_t act_stride, int n_tok, float* out, int64_t out_stride) {
  TileImpl<Q8_0, Variant::kStaged>(n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
}
void TileQ8_0Direct(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act,
                    size_t act_stride, int n_tok, float* out, int64_t out_stride) {
  TileImpl<Q8_0, Variant::kDirect>(n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
}

void TileQ4_1Native(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act,
                    size_t act_stride, int n_tok, float* out, int64_t out_stride) {
  TileImpl<Q4_1, Variant::kNativeShim>(n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
}
void TileQ8_0Native(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* act,
                    size_t act_stride, int n_tok, float* out, int64_t out_stride) {
  TileImpl<Q8_0, Variant::kNativeShim>(n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
}

int64_t Target() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace qevict::vec_dot_hwy
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qevict::vec_dot_hwy {

HWY_EXPORT(TileQ4_1Staged);
HWY_EXPORT(TileQ4_1Direct);
HWY_EXPORT(TileQ8_0Staged);
HWY_EXPORT(TileQ8_0Direct);
HWY_EXPORT(TileQ4_1Native);
HWY_EXPORT(TileQ8_0Native);
HWY_EXPORT(Target);

namespace {

// Index into the dispatch tables of `target`, or -1 when it is not compiled or not supported.
int IndexOf(int64_t target) {
  if ((SupportedTargets() & target) == 0) return -1;
  hwy::ChosenTarget chosen;
  chosen.Update(target);
  const size_t index = chosen.GetIndex();
  return HWY_DISPATCH_TABLE(Target)[index]() == target ? static_cast<int>(index) : -1;
}

}  // namespace

bool HasNativeShim(int64_t target) { return target == HWY_AVX2 || target == HWY_AVX3_DL; }

int64_t SupportedTargets() { return hwy::SupportedTargets() & HWY_TARGETS; }

const char* TargetName(int64_t target) { return hwy::TargetName(target); }

DotTileFn Tile(GgmlType type, Variant variant, int64_t target) {
  const int index = IndexOf(target);
  if (index < 0) return nullptr;
  const bool q4 = type == GgmlType::kQ4_1;
  if (!q4 && type != GgmlType::kQ8_0) return nullptr;
  switch (variant) {
    case Variant::kStaged:
      return q4 ? HWY_DISPATCH_TABLE(TileQ4_1Staged)[index] : HWY_DISPATCH_TABLE(TileQ8_0Staged)[index];
    case Variant::kDirect:
      return q4 ? HWY_DISPATCH_TABLE(TileQ4_1Direct)[index] : HWY_DISPATCH_TABLE(TileQ8_0Direct)[index];
    case Variant::kNativeShim:
      if (!HasNativeShim(target)) return nullptr;
      return q4 ? HWY_DISPATCH_TABLE(TileQ4_1Native)[index] : HWY_DISPATCH_TABLE(TileQ8_0Native)[index];
    default:
      return nullptr;
  }
}

}  // namespace qevict::vec_dot_hwy
#endif  // HWY_ONCE
