// Gradient accumulation (train.grad_accum_steps): the gradients of a step's K micro-batches summed
// into the gradient of the whole batch.
//
// Each micro-batch's Model::forward is given loss_tokens = the tokens of the whole batch, so its
// gradient is already divided by them: the whole batch's gradient (of the mean loss over every
// target token) is then the plain sum g = g_0 + g_1 + ... + g_{K-1}. Model::backward overwrites
// the gradient arena (no zero_grad), so the sum is kept beside it: acc = g_0, acc += g_k for
// k = 1 .. K-2, and after the last micro-batch the arena becomes g_{K-1} + acc, in that fixed order
// (elementwise: bit-identical for any thread count). An untied wte's row-sparse gradients are kept
// per micro-batch and merged at the end (merge_sparse_rows, micro-batch order). The dense sum costs
// one more arena (4 bytes per parameter); nothing is allocated when K = 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "wte/model.h"

namespace wte {

class GradAccumulator {
 public:
  /// For `micro_batches` >= 1 micro-batches per step of `model`. Throws wte::Error if 0.
  GradAccumulator(const Model& model, size_t micro_batches);

  /// After model.backward() of each micro-batch, in order: `first` for the step's first, `last` for
  /// its last (both for a step of one). The last leaves the step's whole gradient in the model's
  /// arena, and (untied) in wte_rows().
  void add(Model& model, bool first, bool last);

  /// The step's row-sparse wte gradient (untied models) after the last add(): the micro-batches'
  /// rows merged; with one micro-batch, the model's own. Tied: count 0.
  SparseRowGrad wte_rows(Model& model);

  /// Bytes held (the dense sum, 0 when micro_batches = 1).
  size_t bytes() const { return acc_.size() * sizeof(float); }

 private:
  size_t K_;
  std::vector<float> acc_;             // (num_parameters) dense sum of the earlier micro-batches
  std::vector<int32_t> all_ids_;       // untied: every micro-batch's touched ids, in order
  std::vector<float> all_rows_;        // untied: their rows
  std::vector<size_t> counts_;         // untied: rows per micro-batch
  std::vector<int32_t> ids_;           // untied: merged ids
  std::vector<float> rows_;            // untied: merged rows
  bool merged_ = false;
};

}  // namespace wte
