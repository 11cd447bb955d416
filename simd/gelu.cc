// GELU forward and backward, GPT-2's tanh form, Highway with dynamic dispatch. Contracts:
// include/wte/kernels.h; scalar references: ref::gelu_forward/backward in src/reference/kernels.h.
//
// The same function, written without tanh. With u = sqrt(2/pi)·(x + 0.044715·x³) and
// σ(z) = 1/(1 + exp(-z)), the identity 0.5·(1 + tanh(u)) = σ(2u) gives
//   gelu(x)  = x · σ(2u)
//   gelu'(x) = σ(2u) + 2·x·σ(2u)·(1 - σ(2u)) · sqrt(2/pi)·(1 + 3·0.044715·x²)
// (0.5·(1 - tanh²(u)) = 2·σ(2u)·(1 - σ(2u))). We evaluate σ from e = exp(-|2u|) in (0, 1], which
// never overflows (Highway's Exp is valid up to +104 only) and loses nothing to cancellation:
//   r = 1/(1 + e);  σ(2u) = r if u >= 0, else e·r;  σ(2u)·(1 - σ(2u)) = e·r²  (either sign).
// The reference's float form 0.5·(1 + tanh(u)) cancels for negative x (at x = -5 half its digits
// are lost); this one keeps a small relative error everywhere. One exp (hn::Exp, 1 ulp) and one
// division per element instead of tanh's expm1 and division.
//
// For |x| > ~1e19, x² overflows and gelu'(x) is NaN, as in the reference; gelu(x) is x for large
// positive x and -0 for large negative x. tests/simd/test_block_kernels.cc derives the error bounds.

#include <cstddef>
#include <cstdint>

#include "wte/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/gelu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/bf16-inl.h"   // StoreBf16, StoreBf16x2 (optional bf16 copies)
#include "simd/loops-inl.h"  // ParallelForEachVector, ParallelForEachVectorPair
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kCubic = 0.044715f;
constexpr float kCubic3 = 0.134145f;  // 3 · 0.044715, as the reference's F(3 * 0.044715)

// σ(2u) and σ(2u)·(1 - σ(2u)) = e·r² for one vector x (see the top).
template <class V>
struct GeluTerms {
  V sigma;
  V e_r2;
};
template <class D, class V>
HWY_INLINE GeluTerms<V> ComputeGeluTerms(D d, V x) {
  // u = k · (x + ((c·x)·x)·x), the reference's order.
  const V cubic = hn::Mul(hn::Mul(hn::Mul(hn::Set(d, kCubic), x), x), x);
  const V u = hn::Mul(hn::Set(d, kSqrt2OverPi), hn::Add(x, cubic));
  const V two_abs_u = hn::Abs(hn::Add(u, u));
  const V e = hn::Exp(d, hn::Neg(two_abs_u));
  const V r = hn::Div(hn::Set(d, 1.0f), hn::Add(hn::Set(d, 1.0f), e));
  const V er = hn::Mul(e, r);
  return {hn::IfThenElse(hn::Ge(u, hn::Zero(d)), r, er), hn::Mul(er, r)};
}

template <class D>
HWY_INLINE hn::Vec<D> GeluValue(D d, const float* HWY_RESTRICT inp, size_t i) {
  const auto x = hn::LoadU(d, inp + i);
  return hn::Mul(x, ComputeGeluTerms(d, x).sigma);
}

void GeluForward(float* out, const float* inp, size_t n, uint16_t* out16) {
  // Elements are independent: any split among threads gives the same bits. out may alias inp:
  // each element is read before it is written.
  const auto one = [&](auto d, size_t i) {
    const auto y = GeluValue(d, inp, i);
    if (out != nullptr) hn::StoreU(y, d, out + i);
    if (out16 != nullptr) StoreBf16(d, y, out16 + i);
  };
  if (out16 == nullptr) return ParallelForEachVector(n, one);
  // With the bf16 copy: two vectors at a time, whose copies are rounded and stored together.
  ParallelForEachVectorPair(
      n,
      [&](auto d, size_t i) {
        const size_t L = hn::Lanes(d);
        const auto y0 = GeluValue(d, inp, i), y1 = GeluValue(d, inp, i + L);
        if (out != nullptr) {
          hn::StoreU(y0, d, out + i);
          hn::StoreU(y1, d, out + i + L);
        }
        StoreBf16x2(d, y0, y1, out16 + i);
      },
      one);
}

template <class D>
HWY_INLINE hn::Vec<D> GeluGradient(D d, const float* HWY_RESTRICT inp, const float* dout,
                                   size_t i) {
  const auto x = hn::LoadU(d, inp + i);
  const auto terms = ComputeGeluTerms(d, x);
  // slope = k · (1 + ((3c)·x)·x);  gelu' = σ + ((2x) · e_r2) · slope
  const auto slope = hn::Mul(hn::Set(d, kSqrt2OverPi),
                             hn::Add(hn::Set(d, 1.0f),
                                     hn::Mul(hn::Mul(hn::Set(d, kCubic3), x), x)));
  const auto grad = hn::Add(terms.sigma, hn::Mul(hn::Mul(hn::Add(x, x), terms.e_r2), slope));
  return hn::Mul(hn::LoadU(d, dout + i), grad);
}

void GeluBackward(float* dinp, const float* inp, const float* dout, size_t n, uint16_t* dinp16) {
  // dinp may alias dout: each element is read before it is written.
  const auto one = [&](auto d, size_t i) {
    const auto dx = GeluGradient(d, inp, dout, i);
    hn::StoreU(dx, d, dinp + i);
    if (dinp16 != nullptr) StoreBf16(d, dx, dinp16 + i);
  };
  if (dinp16 == nullptr) return ParallelForEachVector(n, one);
  // With the bf16 copy: two vectors at a time, as the forward. Both are computed before either is
  // stored, so an aliased dout is still read before it is written.
  ParallelForEachVectorPair(
      n,
      [&](auto d, size_t i) {
        const size_t L = hn::Lanes(d);
        const auto dx0 = GeluGradient(d, inp, dout, i), dx1 = GeluGradient(d, inp, dout, i + L);
        hn::StoreU(dx0, d, dinp + i);
        hn::StoreU(dx1, d, dinp + i + L);
        StoreBf16x2(d, dx0, dx1, dinp16 + i);
      },
      one);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(GeluForward);
HWY_EXPORT(GeluBackward);

void gelu_forward(float* out, const float* inp, size_t n, uint16_t* out16) {
  HWY_DYNAMIC_DISPATCH(GeluForward)(out, inp, n, out16);
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n, uint16_t* dinp16) {
  HWY_DYNAMIC_DISPATCH(GeluBackward)(dinp, inp, dout, n, dinp16);
}

}  // namespace wte
#endif  // HWY_ONCE
