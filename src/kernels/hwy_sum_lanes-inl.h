// Horizontal sums for the *_hwy.cc kernels (included once per Highway target, after
// hwy/highway.h): SumLanes, and SumLanes4, four reductions for the shuffles of about one.

// Per-target include guard (Highway's convention for -inl headers).
#if defined(QEVICT_KERNELS_HWY_SUM_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QEVICT_KERNELS_HWY_SUM_LANES_INL_H_
#undef QEVICT_KERNELS_HWY_SUM_LANES_INL_H_
#else
#define QEVICT_KERNELS_HWY_SUM_LANES_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace qevict {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
HWY_INLINE float SumLanes(D d, hn::Vec<D> v) {
  return hn::GetLane(hn::SumOfLanes(d, v));
}

#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
// Adds the halves of v until 4 lanes remain; stores them to out[0..3].
template <class D>
HWY_INLINE void StoreFoldedTo4(D d, hn::Vec<D> v, float* HWY_RESTRICT out) {
  if constexpr (hn::MaxLanes(d) > 4) {
    const hn::Half<D> dh;
    StoreFoldedTo4(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)), out);
  } else {
    hn::StoreU(v, d, out);
  }
}
#endif

// out[0..3] = the sums of the lanes of a, b, c, e: four reductions for the shuffles of about
// one. Each sum's order depends only on lane positions, not on the other three vectors.
template <class D>
HWY_INLINE void SumLanes4(D d, hn::Vec<D> a, hn::Vec<D> b, hn::Vec<D> c, hn::Vec<D> e,
                          float* HWY_RESTRICT out) {
#if HWY_HAVE_SCALABLE || HWY_TARGET == HWY_SCALAR
  out[0] = SumLanes(d, a);
  out[1] = SumLanes(d, b);
  out[2] = SumLanes(d, c);
  out[3] = SumLanes(d, e);
#else
  if constexpr (hn::MaxLanes(d) < 4) {
    out[0] = SumLanes(d, a);
    out[1] = SumLanes(d, b);
    out[2] = SumLanes(d, c);
    out[3] = SumLanes(d, e);
  } else {
    // Lanes alternate a, b (then c, e); then pairs alternate (a, b), (c, e): lane i holds a
    // partial sum of vector i % 4.
    const hn::Repartition<uint64_t, D> d64;
    const auto ab =
        hn::BitCast(d64, hn::Add(hn::InterleaveLower(d, a, b), hn::InterleaveUpper(d, a, b)));
    const auto ce =
        hn::BitCast(d64, hn::Add(hn::InterleaveLower(d, c, e), hn::InterleaveUpper(d, c, e)));
    StoreFoldedTo4(d,
                   hn::Add(hn::BitCast(d, hn::InterleaveLower(d64, ab, ce)),
                           hn::BitCast(d, hn::InterleaveUpper(d64, ab, ce))),
                   out);
  }
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace qevict
HWY_AFTER_NAMESPACE();

#endif  // QEVICT_KERNELS_HWY_SUM_LANES_INL_H_
