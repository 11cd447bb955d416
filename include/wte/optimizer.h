// AdamW over the model's parameter arena, global-norm gradient clipping and the learning-rate
// schedule.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wte/config.h"
#include "wte/kernels.h"
#include "wte/model.h"

namespace wte {

/// AdamW state: first and second moments m, v in the parameter arena's layout, and the step count.
/// The update is wte::adamw_update (include/wte/kernels.h) applied per tensor, so weight decay applies to
/// the tensors whose TensorSpec::weight_decay is set (wte, wpe, lm_head) and never to ln_f.
/// A row-sparse tensor (an untied wte, TensorSpec::sparse_grad) gets a lazy AdamW instead
/// (wte::adamw_update_rows): only the rows the step looked up are read or written; the others'
/// m and v do not decay and weight decay does not shrink them that step; bias correction uses the
/// global step. E.g. one row, lr 0.1, betas (0.9, 0.999), eps 1e-8, no decay, gradients 1, then
/// not looked up twice: dense AdamW gives -0.1, -0.167006, -0.218802; lazy gives -0.1, -0.1, -0.1.
class AdamW {
 public:
  explicit AdamW(const Model& model);
  /// One update with learning rate `lr`; increments step() first (bias correction uses 1, 2, ...).
  void update(Model& model, float lr, const OptimConfig& hp);
  /// The same with an untied wte's row-sparse gradient given explicitly (data-parallel training:
  /// the ranks' merged rows) instead of model.wte_grad_rows(), and every gradient read as
  /// g * grad_scale: the clipping factor (clip_scale) applied inside the update, so clipping makes
  /// no pass of its own over the gradients. Gradients are not modified. With the scale that
  /// clip_grad_norm would apply, the result is bit-identical to clip_grad_norm followed by update
  /// (the same float multiply; x * 1.0f is exact).
  void update(Model& model, float lr, const OptimConfig& hp, const SparseRowGrad& wte_rows,
              float grad_scale = 1.0f);
  /// One update of part of the model (ZeRO-1 data-parallel training: each rank updates its block
  /// of the arena): the dense tensors' elements in arena floats [begin, end) and the row-sparse
  /// wte_rows (an untied wte; count 0: none), every gradient read as g * grad_scale. Increments
  /// step() first. Element for element the same operations as update(), so the ranks' parts
  /// together give update()'s bits. Throws wte::Error if begin > end or end > size().
  void update_part(Model& model, float lr, const OptimConfig& hp, size_t begin, size_t end,
                   const SparseRowGrad& wte_rows, float grad_scale = 1.0f);
  int64_t step() const { return step_; }
  void set_step(int64_t s) { step_ = s; }
  float* m() { return m_.get(); }
  float* v() { return v_.get(); }
  const float* m() const { return m_.get(); }
  const float* v() const { return v_.get(); }
  size_t size() const { return n_; }

 private:
  size_t n_;
  Model::Buffer m_, v_;
  int64_t step_ = 0;
};

/// L2 norm of the whole gradient (the arena, with a row-sparse tensor's rows in place of its
/// slot): sqrt of wte::sum_of_squares over the dense part plus that of the rows, in double, in a
/// fixed order (bit-identical on every target and for any thread count). Reads each gradient once;
/// writes nothing.
double grad_norm(const Model& model, const SparseRowGrad& wte_rows);
/// The same, given the sums of squares of the gradient's first head.count blocks (Model::
/// grad_norm_head() straight after backward(): the tied wte's scatter computed them): reads only
/// the gradient after those blocks. Bit-identical to grad_norm(model, wte_rows) when the sums are
/// the current gradient's. Throws wte::Error if head.count > 0 and the gradient arena does not
/// start with the blocks (an untied wte) or has fewer blocks.
double grad_norm(const Model& model, const SparseRowGrad& wte_rows, const GradNormHead& head);
/// The factor global-norm clipping multiplies every gradient by (Pascanu et al. 2013; PyTorch's
/// clip_grad_norm_ without its 1e-6): float(max_norm / norm) if max_norm > 0 and norm > max_norm,
/// else exactly 1. Pass it to AdamW::update.
float clip_scale(double norm, double max_norm);
/// grad_norm, then (if clip_scale < 1) every gradient scaled in place by clip_scale: a second pass.
/// Training uses grad_norm + AdamW::update(..., clip_scale) instead; this stays for callers that
/// need the clipped gradients themselves. Returns the norm before clipping.
double clip_grad_norm(Model& model, double max_norm);
/// The same with an untied wte's row-sparse gradient given explicitly (scaled in place).
double clip_grad_norm(Model& model, double max_norm, const SparseRowGrad& wte_rows);

// The gradient's squared norm (grad_norm, clip_grad_norm, and the ranks' blocks in ZeRO-1
// training) is summed in double over consecutive blocks of wte::kSumOfSquaresBlock floats (from
// the start of the dense gradient), each in wte::sum_of_squares's fixed order, then the block sums
// are added in block order.

/// partials[b] = Σ g[i]² over block b = [b·kSumOfSquaresBlock, min(n, (b+1)·kSumOfSquaresBlock)) of g[0, n), in
/// double, in wte::sum_of_squares's order within the block (wte::sum_of_squares_partials):
/// ceil(n / kSumOfSquaresBlock) values; added in block order they give sum_of_squares(g, n) bit for bit
/// (OpenMP over blocks; bit-identical for any thread count and Highway target).
void squared_norm_partials(const float* g, size_t n, double* partials);

/// g[0, n) *= scale (clipping's scaling, OpenMP).
void scale_gradient(float* g, size_t n, float scale);

/// Learning rate at 0-based `step` of `total_steps`: linear warmup to optim.lr over warmup_steps
/// (lr·(step+1)/warmup_steps), then cosine decay to optim.min_lr at the last step
/// (Loshchilov & Hutter 2017, SGDR, without restarts).
float learning_rate(size_t step, size_t total_steps, const OptimConfig& optim);

}  // namespace wte
