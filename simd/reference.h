// Scalar references for the kernels in include/wte/kernels.h: the same math as plain loops, no SIMD and no
// threads, templated on the float type F (float or double). Tests compare every Highway target with
// these; the double instantiations are the ground truth for gradient checks.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace wte::ref {

/// hidden_states[b,t,:] = wte[ids[b,t],:] + wpe[t,:]. Shapes as wte::embedding_forward.
template <typename F>
void embedding_forward(F* hidden_states, const int32_t* ids, const F* wte, const F* wpe, size_t B,
                       size_t T, size_t C) {
  for (size_t b = 0; b < B; ++b) {
    for (size_t t = 0; t < T; ++t) {
      const size_t n = b * T + t;
      const F* wte_row = wte + static_cast<size_t>(ids[n]) * C;
      const F* wpe_row = wpe + t * C;
      F* out = hidden_states + n * C;
      for (size_t c = 0; c < C; ++c) out[c] = wte_row[c] + wpe_row[c];
    }
  }
}

/// dwte[ids[n],:] += dhidden[n,:]. Each touched row first sums its upstream rows in increasing n,
/// then adds the sum to dwte once: the order the SIMD kernel uses, so the results are bit-identical.
template <typename F>
void embedding_backward_wte(F* dwte, const F* dhidden, const int32_t* ids, size_t N, size_t C,
                            size_t V) {
  std::vector<std::vector<size_t>> rows(V);
  for (size_t n = 0; n < N; ++n) rows[static_cast<size_t>(ids[n])].push_back(n);
  std::vector<F> acc(C);
  for (size_t v = 0; v < V; ++v) {
    if (rows[v].empty()) continue;
    for (size_t c = 0; c < C; ++c) acc[c] = dhidden[rows[v][0] * C + c];
    for (size_t k = 1; k < rows[v].size(); ++k)
      for (size_t c = 0; c < C; ++c) acc[c] += dhidden[rows[v][k] * C + c];
    for (size_t c = 0; c < C; ++c) dwte[v * C + c] += acc[c];
  }
}

/// dwpe[t,:] += sum_b dhidden[b,t,:], summed over b in increasing order, then added once.
template <typename F>
void embedding_backward_wpe(F* dwpe, const F* dhidden, size_t B, size_t T, size_t C) {
  std::vector<F> acc(C);
  for (size_t t = 0; t < T; ++t) {
    for (size_t c = 0; c < C; ++c) acc[c] = dhidden[t * C + c];
    for (size_t b = 1; b < B; ++b)
      for (size_t c = 0; c < C; ++c) acc[c] += dhidden[(b * T + t) * C + c];
    for (size_t c = 0; c < C; ++c) dwpe[t * C + c] += acc[c];
  }
}

/// Stable softmax cross-entropy, in place: logits become grad_scale * (softmax - onehot).
template <typename F>
void softmax_cross_entropy(F* logits, F* losses, const int32_t* targets, size_t N, size_t V,
                           F grad_scale) {
  for (size_t n = 0; n < N; ++n) {
    F* row = logits + n * V;
    F maxval = row[0];
    for (size_t v = 1; v < V; ++v) maxval = row[v] > maxval ? row[v] : maxval;
    F sum = 0;
    for (size_t v = 0; v < V; ++v) sum += std::exp(row[v] - maxval);
    const size_t target = static_cast<size_t>(targets[n]);
    losses[n] = maxval + std::log(sum) - row[target];
    for (size_t v = 0; v < V; ++v) {
      const F p = std::exp(row[v] - maxval) / sum;
      row[v] = grad_scale * (p - (v == target ? F(1) : F(0)));
    }
  }
}

/// losses[n] = logsumexp(logits[n]) - logits[n, targets[n]]; logits unchanged.
template <typename F>
void cross_entropy_loss(F* losses, const F* logits, const int32_t* targets, size_t N, size_t V) {
  for (size_t n = 0; n < N; ++n) {
    const F* row = logits + n * V;
    F maxval = row[0];
    for (size_t v = 1; v < V; ++v) maxval = row[v] > maxval ? row[v] : maxval;
    F sum = 0;
    for (size_t v = 0; v < V; ++v) sum += std::exp(row[v] - maxval);
    losses[n] = maxval + std::log(sum) - row[static_cast<size_t>(targets[n])];
  }
}

/// AdamW step, PyTorch's formula (see wte::adamw_update). step is 1-based.
template <typename F>
void adamw_update(F* params, const F* grads, F* m, F* v, size_t n, F lr, F beta1, F beta2, F eps,
                  F weight_decay, int64_t step) {
  const F bias1 = F(1) - std::pow(beta1, static_cast<F>(step));
  const F bias2 = F(1) - std::pow(beta2, static_cast<F>(step));
  for (size_t i = 0; i < n; ++i) {
    const F g = grads[i];
    m[i] = beta1 * m[i] + (F(1) - beta1) * g;
    v[i] = beta2 * v[i] + (F(1) - beta2) * g * g;
    const F m_hat = m[i] / bias1;
    const F v_hat = v[i] / bias2;
    params[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * params[i]);
  }
}

}  // namespace wte::ref
