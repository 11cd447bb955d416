// AdamW update, Highway with dynamic dispatch. Contract: simd/kernels.h (wte::adamw_update);
// scalar reference: ref::adamw_update<float> in simd/reference.h.
//
// Bit-identical to ref::adamw_update<float> on every target: the bias corrections are computed once
// in scalar float exactly as the reference does (1 - std::pow(beta, step) in float), and each
// element goes through the same IEEE operations in the same order: Mul, Add, Div and Sqrt are
// correctly rounded on every Highway target (SCALAR uses sqrtf), and we never fuse a multiply-add.
//
// That needs the compiler not to contract a*b+c into an FMA behind our back. g++ (12) defaults to
// -ffp-contract=fast for C++ even in ISO mode, and the AVX2/AVX3 targets have FMA, so it did fuse
// the m and v updates here (2 roundings become 1: results differed from the reference in the last
// bit). The pragma turns contraction off for this file only; the Highway math in other files
// (hn::Exp uses MulAdd on purpose) is unaffected. It must precede every include so all inlined
// functions carry the same option.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "simd/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/adamw.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Scalar constants of one step, computed once in float like the reference.
struct AdamWConstants {
  float lr, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay, bias1, bias2;
};

// Updates elements [i, i + Lanes(d)). Operation order mirrors ref::adamw_update line by line.
template <class D>
HWY_INLINE void AdamWStep(D d, float* HWY_RESTRICT params, const float* HWY_RESTRICT grads,
                          float* HWY_RESTRICT m, float* HWY_RESTRICT v, size_t i,
                          const AdamWConstants& k) {
  const auto g = hn::LoadU(d, grads + i);
  // m = beta1*m + (1-beta1)*g
  const auto m_new = hn::Add(hn::Mul(hn::Set(d, k.beta1), hn::LoadU(d, m + i)),
                             hn::Mul(hn::Set(d, k.one_minus_beta1), g));
  // v = beta2*v + ((1-beta2)*g)*g   (left to right, as the reference's expression parses)
  const auto v_new = hn::Add(hn::Mul(hn::Set(d, k.beta2), hn::LoadU(d, v + i)),
                             hn::Mul(hn::Mul(hn::Set(d, k.one_minus_beta2), g), g));
  hn::StoreU(m_new, d, m + i);
  hn::StoreU(v_new, d, v + i);
  const auto m_hat = hn::Div(m_new, hn::Set(d, k.bias1));
  const auto v_hat = hn::Div(v_new, hn::Set(d, k.bias2));
  // param -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * param)
  const auto p = hn::LoadU(d, params + i);
  const auto update = hn::Add(hn::Div(m_hat, hn::Add(hn::Sqrt(v_hat), hn::Set(d, k.eps))),
                              hn::Mul(hn::Set(d, k.weight_decay), p));
  hn::StoreU(hn::Sub(p, hn::Mul(hn::Set(d, k.lr), update)), d, params + i);
}

void AdamWUpdate(float* HWY_RESTRICT params, const float* HWY_RESTRICT grads, float* HWY_RESTRICT m,
                 float* HWY_RESTRICT v, size_t n, const AdamWParams& hp) {
  AdamWConstants k;
  k.lr = hp.lr;
  k.beta1 = hp.beta1;
  k.beta2 = hp.beta2;
  k.one_minus_beta1 = 1.0f - hp.beta1;
  k.one_minus_beta2 = 1.0f - hp.beta2;
  k.eps = hp.eps;
  k.weight_decay = hp.weight_decay;
  k.bias1 = 1.0f - std::pow(hp.beta1, static_cast<float>(hp.step));
  k.bias2 = 1.0f - std::pow(hp.beta2, static_cast<float>(hp.step));

  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const size_t num_vectors = n / L;
  // Blocks of vectors per OpenMP chunk; elements are independent, so any split gives the same bits.
#pragma omp parallel for schedule(static)
  for (size_t j = 0; j < num_vectors; ++j) AdamWStep(d, params, grads, m, v, j * L, k);
  const hn::CappedTag<float, 1> d1;
  for (size_t i = num_vectors * L; i < n; ++i) AdamWStep(d1, params, grads, m, v, i, k);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(AdamWUpdate);

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                  const AdamWParams& hp) {
  HWY_DYNAMIC_DISPATCH(AdamWUpdate)(params, grads, m, v, n, hp);
}

}  // namespace wte
#endif  // HWY_ONCE
