// ln_f through oneDNN's layer normalization (GPT-2's norm(): biased variance, epsilon inside the
// square root). ln_f stays on oneDNN so the zero-block model keeps its bits; the blocks' ln_1 and
// ln_2 use the kernels layernorm_forward/backward (include/wte/kernels.h).
#pragma once

#include <cstddef>
#include <oneapi/dnnl/dnnl.hpp>

namespace wte {

/// oneDNN layer_normalization primitives for one (N, C), created once and reused.
class OnednnLayerNorm {
 public:
  OnednnLayerNorm(size_t N, size_t C, float eps);

  /// out (N,C) = (inp - mean) / sqrt(var + eps) · g + b; mean, var (N) written (saved for
  /// backward: oneDNN keeps the variance, not rstd). Asynchronous on `stream`.
  void forward(float* out, float* mean, float* var, const float* inp, const float* g,
               const float* b, dnnl::stream& stream);

  /// dinp (N,C), dg, db (C) all written (oneDNN overwrites, does not accumulate); dout, inp (N,C);
  /// g, b (C) (oneDNN 2.6 asks for b; the math does not use it); mean, var from forward.
  void backward(float* dinp, float* dg, float* db, const float* dout, const float* inp,
                const float* g, const float* b, const float* mean, const float* var,
                dnnl::stream& stream);

 private:
  dnnl::layer_normalization_forward fwd_;
  dnnl::layer_normalization_backward bwd_;
  dnnl::memory src_, dst_, mean_, variance_, scale_, shift_, diff_src_, diff_dst_, diff_scale_,
      diff_shift_;
};

}  // namespace wte
