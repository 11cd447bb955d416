#include "wte/optimizer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "wte/error.h"
#include "wte/kernels.h"

namespace wte {

AdamW::AdamW(const Model& model)
    : n_(model.num_parameters()), m_(allocate_floats(n_)), v_(allocate_floats(n_)) {}

void AdamW::update(Model& model, float lr, const OptimConfig& hp) {
  update(model, lr, hp, model.wte_grad_rows());
}

void AdamW::update(Model& model, float lr, const OptimConfig& hp, const SparseRowGrad& g,
                   float grad_scale) {
  update_part(model, lr, hp, 0, n_, g, grad_scale);
}

void AdamW::update_part(Model& model, float lr, const OptimConfig& hp, size_t begin, size_t end,
                        const SparseRowGrad& g, float grad_scale) {
  if (begin > end || end > n_)
    throw Error("AdamW::update_part: floats [" + std::to_string(begin) + ", " +
                std::to_string(end) + ") are not a range of the " + std::to_string(n_) +
                "-float parameter arena");
  ++step_;
  // Under bf16 GEMMs, a whole-arena update also writes the weights' bf16 copy (the same bits as
  // the forward's conversion), so the next forward skips that pass. A part of the arena (the
  // data-parallel update, whose other parts arrive by all-gather) leaves the copy stale.
  uint16_t* params16 = begin == 0 && end == n_ ? model.params_bf16() : nullptr;
  const bool was_current = model.params_bf16_current();
  float* params = model.param_data();  // marks the copy stale until the end
  bool current = params16 != nullptr;
  for (const TensorSpec& t : model.tensors()) {
    const AdamWParams p{lr, hp.beta1, hp.beta2, hp.eps, t.weight_decay ? hp.weight_decay : 0.0f,
                        step_};
    if (t.sparse_grad) {  // untied wte: lazy AdamW on the rows the step touched
      adamw_update_rows(params + t.offset, m_.get() + t.offset, v_.get() + t.offset, g.rows, g.ids,
                        g.count, g.C, p, grad_scale);
      // The other rows did not change: their copies are current if the whole copy was.
      if (!was_current) current = false;
      if (current)
        for (size_t k = 0; k < g.count; ++k) {
          const size_t row = t.offset + static_cast<size_t>(g.ids[k]) * g.C;
          convert_f32_to_bf16(params16 + row, params + row, g.C);
        }
      continue;
    }
    // The tensor's elements inside [begin, end) (all of them for update()).
    const size_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.size);
    if (lo >= hi) continue;
    adamw_update(params + lo, model.grad_data() + lo, m_.get() + lo, v_.get() + lo, hi - lo, p,
                 grad_scale, params16 != nullptr ? params16 + lo : nullptr);
  }
  if (current) model.mark_params_bf16_current();
}


void squared_norm_partials(const float* g, size_t n, double* partial) {
  sum_of_squares_partials(g, n, partial);
}

void scale_gradient(float* g, size_t n, float scale) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) g[i] *= scale;
}

double grad_norm(const Model& model, const SparseRowGrad& sparse) {
  // The gradient is the arena, minus a row-sparse tensor's (unused) slot, plus its rows. Only an
  // untied wte is sparse, and it is tensor 0: the dense part is then [wte's end, n).
  const size_t n = model.num_parameters();
  const TensorSpec& first = model.tensors().front();
  const size_t dense_begin = first.sparse_grad ? first.offset + first.size : 0;
  double total = sum_of_squares(model.grad_data() + dense_begin, n - dense_begin);
  if (sparse.count > 0) total += sum_of_squares(sparse.rows, sparse.count * sparse.C);
  return std::sqrt(total);
}

double grad_norm(const Model& model, const SparseRowGrad& sparse, const GradNormHead& head) {
  if (head.count == 0) return grad_norm(model, sparse);
  const size_t n = model.num_parameters();
  if (model.tensors().front().sparse_grad || head.count * kSumOfSquaresBlock > n)
    throw Error("grad_norm: " + std::to_string(head.count) +
                " block sums given for a gradient arena of " + std::to_string(n) + " floats" +
                (model.tensors().front().sparse_grad ? " whose first tensor is row-sparse" : ""));
  // The rest of the blocks, then every block's sum in block order from 0.0: sum_of_squares'
  // combination (n > kSumOfSquaresBlock here), plus the row-sparse part (none: the head is a tied wte's).
  const size_t done = head.count * kSumOfSquaresBlock;
  std::vector<double> rest((n - done + kSumOfSquaresBlock - 1) / kSumOfSquaresBlock);
  if (!rest.empty()) squared_norm_partials(model.grad_data() + done, n - done, rest.data());
  double total = 0.0;
  for (size_t b = 0; b < head.count; ++b) total += head.sums[b];
  for (double s : rest) total += s;
  if (sparse.count > 0) total += sum_of_squares(sparse.rows, sparse.count * sparse.C);
  return std::sqrt(total);
}

float clip_scale(double norm, double max_norm) {
  return max_norm > 0.0 && norm > max_norm ? static_cast<float>(max_norm / norm) : 1.0f;
}

double clip_grad_norm(Model& model, double max_norm) {
  return clip_grad_norm(model, max_norm, model.wte_grad_rows());
}

double clip_grad_norm(Model& model, double max_norm, const SparseRowGrad& sparse) {
  const double norm = grad_norm(model, sparse);
  const float scale = clip_scale(norm, max_norm);
  if (scale != 1.0f) {
    const size_t n = model.num_parameters();
    const TensorSpec& first = model.tensors().front();
    const size_t dense_begin = first.sparse_grad ? first.offset + first.size : 0;
    scale_gradient(model.grad_data() + dense_begin, n - dense_begin, scale);
    if (sparse.count > 0) scale_gradient(sparse.rows, sparse.count * sparse.C, scale);
  }
  return norm;
}

float learning_rate(size_t step, size_t total_steps, const OptimConfig& optim) {
  if (step < optim.warmup_steps)
    return optim.lr * static_cast<float>(step + 1) / static_cast<float>(optim.warmup_steps);
  const size_t decay_steps = total_steps > optim.warmup_steps ? total_steps - optim.warmup_steps : 1;
  const double progress =
      std::min(1.0, static_cast<double>(step - optim.warmup_steps) /
                        static_cast<double>(decay_steps > 1 ? decay_steps - 1 : 1));
  const double cosine = 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
  return static_cast<float>(optim.min_lr + (optim.lr - optim.min_lr) * cosine);
}

}  // namespace wte
