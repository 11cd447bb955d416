// Transformer block kernels: PLACEHOLDER scalar versions that call the references in
// simd/reference.h, so the model can be built while the Highway versions are written.
// Contracts: include/wte/kernels.h. To be replaced by Highway kernels (one file per kernel family).
#include "simd/reference.h"
#include "wte/kernels.h"

namespace wte {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* g,
                       const float* b, size_t N, size_t C, float eps) {
  ref::layernorm_forward<float>(out, mean, rstd, inp, g, b, N, C, eps);
}
void layernorm_backward(float* dinp, float* dg, float* db, const float* dout, const float* inp,
                        const float* g, const float* mean, const float* rstd, size_t N, size_t C) {
  ref::layernorm_backward<float>(dinp, dg, db, dout, inp, g, mean, rstd, N, C);
}
void gelu_forward(float* out, const float* inp, size_t n) { ref::gelu_forward<float>(out, inp, n); }
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  ref::gelu_backward<float>(dinp, inp, dout, n);
}
void attention_softmax_forward(float* att, const float* preatt, size_t Z, size_t T, float scale) {
  ref::attention_softmax_forward<float>(att, preatt, Z, T, scale);
}
void attention_softmax_backward(float* dpreatt, const float* datt, const float* att, size_t Z,
                                size_t T, float scale) {
  ref::attention_softmax_backward<float>(dpreatt, datt, att, Z, T, scale);
}
void residual_forward(float* out, const float* a, const float* b, size_t n) {
  ref::residual_forward<float>(out, a, b, n);
}
void bias_backward(float* dbias, const float* dout, size_t N, size_t OC) {
  ref::bias_backward<float>(dbias, dout, N, OC);
}

}  // namespace wte
