// Snapshots of wte during training: the series from the initial noise (step 0) to the end that
// `wte geometry` draws. A snapshot is a weights-only checkpoint (include/wte/checkpoint.h: no /optimizer,
// no resume state), so every checkpoint reader opens it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "wte/config.h"
#include "wte/model.h"
#include "wte/tokenizer.h"

namespace wte {

/// DIR/snapshot_XXXXXXXX.h5, the step zero-padded to 8 digits.
std::string snapshot_path(const std::string& dir, uint64_t step);

/// The trainer's hook: if `step` (optimizer steps taken so far; 0 = after init, before any update)
/// is in cfg.train.snapshot_steps, writes snapshot_path(out_dir, step) with save_checkpoint (no
/// optimizer; atomic) and returns true; otherwise does nothing and returns false.
/// Throws wte::Error naming the path if the file cannot be written.
bool save_snapshot_if_due(const Config& cfg, const std::string& out_dir, const Model& model,
                          const Tokenizer& tokenizer, uint64_t step);

/// Files in `dir` named <prefix><digits>.h5 (never *.tmp), as (step, path) sorted by step: the
/// snapshots, or with prefix "checkpoint_" the trainer's checkpoints. Not validated.
/// Throws wte::Error if `dir` is not a directory.
std::vector<std::pair<uint64_t, std::string>> list_snapshots(const std::string& dir,
                                                            const std::string& prefix = "snapshot_");

}  // namespace wte
