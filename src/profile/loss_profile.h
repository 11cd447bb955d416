// `wte profile loss`: the loss of one training step (unembedding + cross-entropy, forward and
// backward: losses, dh and dW from h (N, C), W (V, C) and targets) on the fused, chunked path
// (src/model/unembedding.h) beside the unfused one (the (N, V) logits, softmax_cross_entropy in
// place, then the two gradient GEMMs, as Model runs it), at given N, V, C and rows per block:
// median time of each, timed interleaved (fused, unfused, fused, ...) so their ratio sees the same
// machine, and the peak resident memory each one's first call adds (its outputs dh and dW, its
// logits or workspace), measured as the growth of the process's peak RSS (VmHWM, reset before each
// through /proc/self/clear_refs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/model/unembedding.h"

namespace wte::profile {

/// What profile_loss measures (checked by the caller: V, C, N >= 1, repeat >= 1, each chunk and
/// the tile within model.loss_chunk's and model.loss_vocab_tile's ranges).
struct LossProfileSettings {
  size_t V = 50257, C = 768, N = 8192;
  std::vector<size_t> chunks;  // one fused path per entry: rows per block (0: auto_loss_rows(V))
  size_t vocab_tile = 0;       // vocabulary ids per tile of every fused path (0: automatic)
  bool unfused = true;         // also run the unfused path (last)
  size_t repeat = 5;           // timed runs of each path (median), after the first
  uint64_t seed = 1234;        // of h ~ N(0, 1), W ~ N(0, 0.02²) and the uniform targets
};

/// One path: its name and blocking, known before anything is allocated.
struct LossPath {
  std::string name;        // "fused 64 x 4096" (rows x tile) or "unfused"
  UnembeddingTiles tiles;  // rows 0: unfused
};

/// The paths `settings` asks for, in the order they run: a fused path per chunk (tiles resolved
/// as model.loss_chunk and model.loss_vocab_tile are for N target tokens), then the unfused one.
std::vector<LossPath> loss_paths(const LossProfileSettings& settings);

/// Floats of the loss buffer a path allocates besides its outputs: the fused workspace
/// (unembedding_workspace_floats) or the unfused (N, V) logits.
size_t loss_path_buffer_floats(const LossPath& path, size_t N, size_t V, size_t C);

/// One path's measurements.
struct LossPathResult {
  LossPath path;
  double first_run_seconds = 0;  // the first run: buffers allocated, primitives created
  double peak_bytes = 0;         // growth of the peak RSS over the RSS before the first run
  std::vector<double> samples;   // seconds of each timed run
  // Max |difference| of the losses, dh and dW relative to the largest unfused value (fused paths
  // beside an unfused one; else 0).
  bool compared = false;
  double diff_loss = 0, diff_dh = 0, diff_dW = 0;
};

/// The measurements of every path.
struct LossProfile {
  std::vector<LossPathResult> paths;  // loss_paths order
  bool peak_reset = true;  // false: /proc/self/clear_refs could not be written, so a later path's
                           // peak_bytes is its growth over an earlier path's peak (may read 0)
};

/// Allocates and fills h (N, C), W (V, C) and the targets from settings.seed, runs each of `paths`
/// once from a reset peak RSS (its own memory), then `repeat` rounds of all paths interleaved, and
/// compares each fused path's outputs with the unfused one's (the last path, when
/// settings.unfused). Runs at the current OpenMP thread count. Throws what the GEMMs throw.
LossProfile profile_loss(const LossProfileSettings& settings, const std::vector<LossPath>& paths);

}  // namespace wte::profile
