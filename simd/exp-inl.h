// exp(x) for the softmax kernels, whose arguments are x - max <= 0: the bits of Highway's hn::Exp
// (hwy/contrib/math/math-inl.h, Highway 1.0.3) in fewer instructions on AVX-512.
//
// hn::Exp(x) = 2^q · (1 + P(r)), q = trunc(x·log2(e) ± 0.5), r = x - q·ln2 (two FMAs), P a degree-7
// Estrin polynomial, then zero below x = -104. Two of its steps cost more than they must for x <= 0:
//   - q: ConvertTo adds a fix-up for floats beyond the int32 range (6 instructions on AVX3); for
//     -104 <= x <= 0, |x·log2(e)| < 151, so the plain truncating conversion gives the same q;
//   - 2^q: hn::Exp multiplies by 2^(q>>1) and then 2^(q - (q>>1)) (two exponent-field builds and two
//     multiplies, 8 instructions, so no factor under- or overflows); vscalefps multiplies by 2^q
//     in one instruction. The first of the two multiplies is exact (1 + P(r) lies in [0.7, 1.5]
//     and 2^(q>>1) >= 2^-76 is normal), so both forms round the exact product (1 + P(r))·2^q once,
//     to nearest even: the same float, subnormal results included.
// r, P(r) and the final mask are Highway's own code (impl::ExpImpl<float>), so they cannot drift.
// tests/simd/test_simd_kernels.cc (ExpNonPositive*) checks every target bit for bit against hn::Exp
// over [-110, 0] and at the edges; other targets (and partial vectors) call hn::Exp itself.
//
// A Highway "-inl.h" header: included once per target (after hwy/foreach_target.h and
// hwy/highway.h), hence the include guard toggled by HWY_TARGET_TOGGLE.

// Per-target include guard.
#if defined(WTE_SIMD_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WTE_SIMD_EXP_INL_H_
#undef WTE_SIMD_EXP_INL_H_
#else
#define WTE_SIMD_EXP_INL_H_
#endif

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// exp(x) lane-wise for x <= 0 (or NaN, or -inf): exactly hn::Exp(d, x) (within 1 ulp of exp;
/// 0 for x < -104, for -inf and for NaN). Positive x are outside the contract.
template <class D>
HWY_INLINE hn::Vec<D> ExpNonPositive(D d, hn::Vec<D> x) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if constexpr (sizeof(hn::Vec<D>) == 64) {  // a whole 512-bit vector of floats
    const hn::RebindToSigned<D> di;
    hn::impl::ExpImpl<float> impl;
    // hn::Exp's q, from the same MulAdd, without the out-of-range fix-up (see above).
    const auto half = hn::Or(hn::Set(d, 0.5f), hn::And(x, hn::Set(d, -0.0f)));
    const auto qx = hn::MulAdd(x, hn::Set(d, 1.442695040888963407359924681f), half);
    const hn::Vec<decltype(di)> q{_mm512_cvttps_epi32(qx.raw)};
    const auto y = hn::Add(impl.ExpPoly(d, impl.ExpReduce(d, x, q)), hn::Set(d, 1.0f));
    const hn::Vec<D> scaled{_mm512_scalef_ps(y.raw, hn::ConvertTo(d, q).raw)};
    return hn::IfThenElseZero(hn::Ge(x, hn::Set(d, -104.0f)), scaled);
  }
#endif
  return hn::Exp(d, x);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#endif  // WTE_SIMD_EXP_INL_H_ toggle
