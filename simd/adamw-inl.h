// One AdamW step on one vector of elements, shared by the dense kernel (simd/adamw.cc,
// wte::adamw_update) and the lazy row update of an untied wte (simd/embedding.cc,
// wte::embedding_backward_adamw_lazy). Scalar reference: ref::adamw_update<float> in
// src/reference/kernels.h; both kernels are bit-identical to it on every target.
//
// Bit-exactness needs every including file compiled without FMA contraction: the wte_simd target is
// built with -ffp-contract=off (CMakeLists.txt), and simd/adamw.cc also says so with a pragma.
//
// A Highway "-inl.h" header: included once per target by each file that uses it (after
// hwy/foreach_target.h and hwy/highway.h), hence the include guard toggled by HWY_TARGET_TOGGLE
// instead of #pragma once.

// Per-target include guard.
#if defined(WTE_SIMD_ADAMW_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WTE_SIMD_ADAMW_INL_H_
#undef WTE_SIMD_ADAMW_INL_H_
#else
#define WTE_SIMD_ADAMW_INL_H_
#endif

#include <cmath>
#include <cstddef>

#include "hwy/highway.h"
#include "wte/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Scalar constants of one step, computed once in float exactly as ref::adamw_update does
// (bias corrections 1 - std::pow(beta, step) in float). grad_scale is the clipping factor applied
// to each gradient as it is loaded (1: none; x * 1.0f is exact, so the bits are those of no scale).
struct AdamWConstants {
  float lr, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay, bias1, bias2,
      grad_scale;
  explicit AdamWConstants(const AdamWParams& hp, float scale = 1.0f)
      : lr(hp.lr), beta1(hp.beta1), beta2(hp.beta2), one_minus_beta1(1.0f - hp.beta1),
        one_minus_beta2(1.0f - hp.beta2), eps(hp.eps), weight_decay(hp.weight_decay),
        bias1(1.0f - std::pow(hp.beta1, static_cast<float>(hp.step))),
        bias2(1.0f - std::pow(hp.beta2, static_cast<float>(hp.step))), grad_scale(scale) {}
};

// Updates params, m and v at elements [i, i + Lanes(d)) from grads at the same elements, and
// returns the new params (for a caller that also stores their bf16 copy). Operation order mirrors
// ref::adamw_update line by line: Mul, Add, Div and Sqrt are correctly rounded on every Highway
// target (SCALAR uses sqrtf), and nothing is fused.
template <class D>
HWY_INLINE hn::Vec<D> AdamWStep(D d, float* HWY_RESTRICT params, const float* HWY_RESTRICT grads,
                          float* HWY_RESTRICT m, float* HWY_RESTRICT v, size_t i,
                          const AdamWConstants& k) {
  // g = grads[i] * grad_scale: the one float multiply clip_grad_norm's in-place scaling made
  const auto g = hn::Mul(hn::LoadU(d, grads + i), hn::Set(d, k.grad_scale));
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
  const auto p_new = hn::Sub(p, hn::Mul(hn::Set(d, k.lr), update));
  hn::StoreU(p_new, d, params + i);
  return p_new;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#endif  // WTE_SIMD_ADAMW_INL_H_ per-target guard
