// The evaluation of a model as `wte train` runs it: the mean next-token cross-entropy over
// windows of a token stream or over rows (src/model/evaluate.cc). `wte eval`, the trainer and
// Python's Model.loss all call it, so their losses agree bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "wte/data.h"
#include "wte/model.h"

namespace wte {

/// The validation loss as `wte train` computes it: the mean next-token cross-entropy (nats/token)
/// of `model` over `windows` windows of T + 1 tokens, window w starting at tokens + w * stride
/// (inputs its first T tokens, targets the T after the first), B windows per forward pass
/// (Model::forward_losses), the per-token losses summed in double in window order and divided by
/// windows * T. stride T: the non-overlapping windows of one token stream (the trainer's
/// evaluation, `wte eval`); stride T + 1: separate rows (Python's Model.loss). The same tokens, T,
/// B and thread count give the same bits. `progress` (may be empty) is called after each forward
/// pass with (windows done, windows in all). Throws wte::Error if windows, T or B is 0.
double evaluate_windows(Model& model, const int32_t* tokens, size_t windows, size_t T,
                        size_t stride, size_t B,
                        const std::function<void(size_t done, size_t total)>& progress = {});

/// evaluate_windows over the first min(max_windows, (tokens.size() - 1) / T) non-overlapping
/// windows of the stream `tokens` (stride T): the loss of `wte train`'s evaluation and of
/// `wte eval`. `progress` as for evaluate_windows. Throws wte::Error if there is no whole window.
double evaluate_loss(Model& model, const std::vector<int32_t>& tokens, size_t T, size_t B,
                     size_t max_windows,
                     const std::function<void(size_t done, size_t total)>& progress = {});

/// evaluate_loss over a token stream (memory-mapped shards or ids in memory): the windows are read
/// from the stream B at a time, so memory does not grow with the stream; the same bits as
/// evaluate_loss over the same ids in a vector. Throws wte::Error if there is no whole window.
double evaluate_loss(Model& model, const TokenStream& tokens, size_t T, size_t B,
                     size_t max_windows,
                     const std::function<void(size_t done, size_t total)>& progress = {});

}  // namespace wte
