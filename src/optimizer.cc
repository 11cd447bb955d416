#include "src/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "simd/kernels.h"

namespace wte {

AdamW::AdamW(const Model& model)
    : n_(model.num_parameters()), m_(allocate_floats(n_)), v_(allocate_floats(n_)) {}

void AdamW::update(Model& model, float lr, const OptimConfig& hp) {
  ++step_;
  for (const TensorSpec& t : model.tensors()) {
    const AdamWParams p{lr, hp.beta1, hp.beta2, hp.eps, t.weight_decay ? hp.weight_decay : 0.0f,
                        step_};
    adamw_update(model.param_data() + t.offset, model.grad_data() + t.offset, m_.get() + t.offset,
                 v_.get() + t.offset, t.size, p);
  }
}

double clip_grad_norm(Model& model, double max_norm) {
  // Fixed blocks, independent of the thread count; partial sums combined in block order.
  constexpr size_t kBlock = 1 << 16;
  const size_t n = model.num_parameters();
  const size_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks, 0.0);
  const float* g = model.grad_data();
#pragma omp parallel for schedule(static)
  for (size_t b = 0; b < blocks; ++b) {
    double s = 0.0;
    const size_t end = std::min(n, (b + 1) * kBlock);
    for (size_t i = b * kBlock; i < end; ++i) s += static_cast<double>(g[i]) * g[i];
    partial[b] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  const double norm = std::sqrt(total);
  if (max_norm > 0.0 && norm > max_norm) {
    const float scale = static_cast<float>(max_norm / norm);
    float* gm = model.grad_data();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) gm[i] *= scale;
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
