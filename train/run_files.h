// The files of a run directory as a run writes them: config.ini, tokenizer/, the token files and
// metrics.csv at start-up, checkpoints and their pruning, and what goes before them (an earlier
// run's checkpoints with --overwrite, the one sweep of unfinished writes, the later checkpoints a
// resume replaces). The directory's lock and the start-up's clean-up: train/run_directory.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "train/run_state.h"

namespace wte {

/// A fresh run never mixes with an earlier run's checkpoints (--resume auto would later pick the
/// newest of them, which may belong to the other run): with opts.overwrite they are deleted (and
/// the run directory notes it), else wte::Error naming them and what to do.
void clear_earlier_run(const RunOptions& opts, const Say& say);

/// Everything a later tool needs to read this run: config.ini, tokenizer/, train.bin, val.bin,
/// after the sweep of unfinished checkpoint and snapshot writes; returns metrics.csv opened for
/// appending (a run resumed in its own directory keeps its rows up to `start_step` and sets
/// *elapsed_before to the last kept row's elapsed_s; with --overwrite the checkpoints of later
/// steps are deleted). Each file is recorded with the run directory before it is written.
std::ofstream write_run_files(const Config& cfg, const RunOptions& opts, const RunData& d,
                              size_t start_step, const Say& say, std::string* metrics_path,
                              double* elapsed_before);

/// Records snapshot_<step>.h5 (and its temporary name) with the run directory: a snapshot written
/// before the first step has finished is part of the start-up.
void will_write_snapshot(const RunOptions& opts, size_t step);

/// Writes checkpoint_<done>.h5 with everything an exact resume needs (the loader's position, the
/// token streams' lengths and hashes, the schedule), counts it in `summary`, then deletes the
/// oldest checkpoints of steps <= done beyond checkpoint.keep_last (later steps' are kept).
void write_checkpoint(const Config& cfg, const RunOptions& opts, const Model& model,
                      const AdamW& optimizer, const RunData& d, const BatchLoader& loader,
                      size_t done, float lr, TrainSummary* summary);

}  // namespace wte
