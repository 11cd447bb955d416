#include "wte/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "wte/kernels.h"

namespace wte {

AdamW::AdamW(const Model& model)
    : n_(model.num_parameters()), m_(allocate_floats(n_)), v_(allocate_floats(n_)) {}

void AdamW::update(Model& model, float lr, const OptimConfig& hp) {
  update(model, lr, hp, model.wte_grad_rows());
}

void AdamW::update(Model& model, float lr, const OptimConfig& hp, const SparseRowGrad& g) {
  ++step_;
  for (const TensorSpec& t : model.tensors()) {
    const AdamWParams p{lr, hp.beta1, hp.beta2, hp.eps, t.weight_decay ? hp.weight_decay : 0.0f,
                        step_};
    if (t.sparse_grad) {  // untied wte: lazy AdamW on the rows the step touched
      adamw_update_rows(model.param_data() + t.offset, m_.get() + t.offset, v_.get() + t.offset,
                        g.rows, g.ids, g.count, g.C, p);
      continue;
    }
    adamw_update(model.param_data() + t.offset, model.grad_data() + t.offset, m_.get() + t.offset,
                 v_.get() + t.offset, t.size, p);
  }
}

namespace {

// Sum of squares of g[0, n) in double, in fixed blocks independent of the thread count, partial sums
// combined in block order.
double sum_of_squares(const float* g, size_t n) {
  constexpr size_t kBlock = 1 << 16;
  const size_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks, 0.0);
#pragma omp parallel for schedule(static)
  for (size_t b = 0; b < blocks; ++b) {
    double s = 0.0;
    const size_t end = std::min(n, (b + 1) * kBlock);
    for (size_t i = b * kBlock; i < end; ++i) s += static_cast<double>(g[i]) * g[i];
    partial[b] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

void scale_all(float* g, size_t n, float scale) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) g[i] *= scale;
}

}  // namespace

double clip_grad_norm(Model& model, double max_norm) {
  return clip_grad_norm(model, max_norm, model.wte_grad_rows());
}

double clip_grad_norm(Model& model, double max_norm, const SparseRowGrad& sparse) {
  // The gradient is the arena, minus a row-sparse tensor's (unused) slot, plus its rows. Only an
  // untied wte is sparse, and it is tensor 0: the dense part is then [wte's end, n).
  const size_t n = model.num_parameters();
  const TensorSpec& first = model.tensors().front();
  const size_t dense_begin = first.sparse_grad ? first.offset + first.size : 0;
  double total = sum_of_squares(model.grad_data() + dense_begin, n - dense_begin);
  if (sparse.count > 0) total += sum_of_squares(sparse.rows, sparse.count * sparse.C);
  const double norm = std::sqrt(total);
  if (max_norm > 0.0 && norm > max_norm) {
    const float scale = static_cast<float>(max_norm / norm);
    scale_all(model.grad_data() + dense_begin, n - dense_begin, scale);
    if (sparse.count > 0) scale_all(sparse.rows, sparse.count * sparse.C, scale);
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
