// The evaluation of wte train, `wte eval` and Python's Model.loss (include/wte/evaluate.h).
#include <algorithm>
#include <string>
#include <vector>

#include "wte/error.h"
#include "wte/evaluate.h"
#include "wte/model.h"

namespace wte {

namespace {

// The evaluation loop: windows in order, B per forward pass; fill(w, b_now, inputs, targets) writes
// windows [w, w + b_now) as b_now rows of T inputs and T targets. The per-token losses are summed in
// double in window order.
template <class Fill>
double evaluate_batches(Model& model, size_t windows, size_t T, size_t B, const Fill& fill,
                        const std::function<void(size_t done, size_t total)>& progress) {
  if (windows == 0 || T == 0 || B == 0)
    throw Error("evaluate_windows: needs at least one window of T + 1 tokens, T >= 1 and B >= 1 "
                "(have " + std::to_string(windows) + " windows, T " + std::to_string(T) + ", B " +
                std::to_string(B) + ")");
  B = std::min(B, windows);
  std::vector<int32_t> inputs(B * T), targets(B * T);
  std::vector<float> losses(B * T);
  double total = 0.0;
  for (size_t w = 0; w < windows; w += B) {
    const size_t b_now = std::min(B, windows - w);
    fill(w, b_now, inputs.data(), targets.data());
    model.forward_losses(inputs.data(), targets.data(), b_now, T, losses.data());
    for (size_t i = 0; i < b_now * T; ++i) total += losses[i];
    if (progress) progress(w + b_now, windows);
  }
  return total / static_cast<double>(windows * T);
}

}  // namespace

double evaluate_windows(Model& model, const int32_t* tokens, size_t windows, size_t T,
                        size_t stride, size_t B,
                        const std::function<void(size_t done, size_t total)>& progress) {
  auto fill = [&](size_t w, size_t b_now, int32_t* inputs, int32_t* targets) {
    for (size_t b = 0; b < b_now; ++b) {
      const int32_t* src = tokens + (w + b) * stride;
      std::copy(src, src + T, inputs + b * T);
      std::copy(src + 1, src + T + 1, targets + b * T);
    }
  };
  return evaluate_batches(model, windows, T, B, fill, progress);
}

double evaluate_loss(Model& model, const std::vector<int32_t>& tokens, size_t T, size_t B,
                     size_t max_windows,
                     const std::function<void(size_t done, size_t total)>& progress) {
  if (T == 0 || B == 0 || tokens.size() < T + 1 || max_windows == 0)
    throw Error("evaluate_loss: needs at least one window of " + std::to_string(T + 1) +
                " tokens (have " + std::to_string(tokens.size()) + ")");
  const size_t windows = std::min(max_windows, (tokens.size() - 1) / T);
  return evaluate_windows(model, tokens.data(), windows, T, T, B, progress);
}

double evaluate_loss(Model& model, const TokenStream& tokens, size_t T, size_t B,
                     size_t max_windows,
                     const std::function<void(size_t done, size_t total)>& progress) {
  if (T == 0 || B == 0 || tokens.size() < T + 1 || max_windows == 0)
    throw Error("evaluate_loss: needs at least one window of " + std::to_string(T + 1) +
                " tokens (have " + std::to_string(tokens.size()) + ")");
  const size_t windows = std::min(max_windows, (tokens.size() - 1) / T);
  std::vector<int32_t> span;  // the ids of b_now consecutive windows: b_now * T + 1
  auto fill = [&](size_t w, size_t b_now, int32_t* inputs, int32_t* targets) {
    span.resize(b_now * T + 1);
    tokens.read(w * T, span.size(), span.data());
    for (size_t b = 0; b < b_now; ++b) {
      std::copy(span.begin() + static_cast<long>(b * T), span.begin() + static_cast<long>(b * T + T),
                inputs + b * T);
      std::copy(span.begin() + static_cast<long>(b * T + 1),
                span.begin() + static_cast<long>(b * T + T + 1), targets + b * T);
    }
  };
  return evaluate_batches(model, windows, T, B, fill, progress);
}

}  // namespace wte
