// Highway versions of the gated activations (kernels/elementwise.h), written once for every
// target and chosen by the SIMD level like the attention kernels (attention_impl::highway).
// sigmoid(z) = 1 / (1 + exp(-z)) is evaluated with exp of a non-positive argument only:
// e = exp(-|z|); z >= 0 -> 1 / (1 + e), z < 0 -> e / (1 + e). elementwise.cc keeps the scalar
// references the tests compare with.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/attention_impl.h"
#include "kernels/hwy_targets.h"  // the targets compiled; before foreach_target.h

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/elementwise_hwy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace qevict {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
HWY_INLINE hn::Vec<D> Sigmoid(D d, hn::Vec<D> z) {
  const auto one = hn::Set(d, 1.0f);
  const auto e = hn::Exp(d, hn::Neg(hn::Abs(z)));
  const auto inv = hn::Div(one, hn::Add(one, e));
  return hn::IfThenElse(hn::Lt(z, hn::Zero(d)), hn::Mul(e, inv), inv);
}

inline float SigmoidScalar(float z) {
  const float e = std::exp(-std::fabs(z));
  return z >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

// gate[i] = f(gate[i]) * up[i] with f(x) = x * sigmoid(arg(x)): whole vectors, then the tail.
template <class Arg, class ArgScalar>
HWY_INLINE void GatedSigmoid(float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, int64_t n,
                             Arg arg, ArgScalar arg_scalar) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto x = hn::LoadU(d, gate + i);
    const auto f = hn::Mul(x, Sigmoid(d, arg(d, x)));
    hn::StoreU(hn::Mul(f, hn::LoadU(d, up + i)), d, gate + i);
  }
  for (; i < n; ++i) gate[i] = gate[i] * SigmoidScalar(arg_scalar(gate[i])) * up[i];
}

void SiluMul(float* gate, const float* up, int64_t n) {
  GatedSigmoid(
      gate, up, n, [](auto, auto x) { return x; }, [](float x) { return x; });
}

// gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
void GeluTanhMul(float* gate, const float* up, int64_t n) {
  constexpr float kA = 2.0f * 0.7978845608028654f;
  constexpr float kB = kA * 0.044715f;
  GatedSigmoid(
      gate, up, n,
      [](auto d, auto x) {
        return hn::Mul(x, hn::MulAdd(hn::Set(d, kB), hn::Mul(x, x), hn::Set(d, kA)));
      },
      [](float x) { return x * (kA + kB * x * x); });
}

}  // namespace HWY_NAMESPACE
}  // namespace qevict
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qevict::elementwise_impl::highway {

HWY_EXPORT(SiluMul);
HWY_EXPORT(GeluTanhMul);

namespace hw = attention_impl::highway;

// False when the SIMD level is portable: the caller runs the scalar reference then.
bool SiluMul(float* gate, const float* up, int64_t n) {
  if (!hw::Enabled()) return false;
  HWY_DISPATCH_TABLE(SiluMul)[hw::DispatchIndex()](gate, up, n);
  return true;
}

bool GeluTanhMul(float* gate, const float* up, int64_t n) {
  if (!hw::Enabled()) return false;
  HWY_DISPATCH_TABLE(GeluTanhMul)[hw::DispatchIndex()](gate, up, n);
  return true;
}

}  // namespace qevict::elementwise_impl::highway
#endif  // HWY_ONCE
