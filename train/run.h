// A training run as wte::train (train/train.cc) hands it on once the request is resolved: the
// options every stage of the run reads, and run_training, which runs the stages (train/run.cc).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "wte/config.h"
#include "wte/train.h"

namespace wte {

class RunDirectory;

/// A TrainRequest resolved by wte::train: the run directory chosen and locked, "auto" replaced by
/// the checkpoint it found.
struct RunOptions {
  std::string out_dir;   // metrics.csv, config.ini, tokenizer/, checkpoints
  bool quiet = false;    // no progress lines (errors and the final summary still print)
  std::string resume;    // checkpoint to continue from (empty: a fresh run)
  std::string config_file;  // the config file, if one was given (named in error hints)
  std::vector<std::string> overrides;  // the --section.key=value overrides, in order (to name
                                       // where a value came from in notes and errors)
  std::string init_from; // a fresh run (step 0, new AdamW) from this checkpoint's weights
  size_t stop_at = 0;    // if > 0: after this step, write a checkpoint and return
  bool overwrite = false;  // a fresh run (or a resume into another directory) deletes the earlier
                           // checkpoints and snapshots in out_dir, a resume in its own directory
                           // the checkpoints of later steps, after every check passed
  std::string overwrite_reason = "--overwrite";  // what set `overwrite`, as the note names it
  RunDirectory* run_dir = nullptr;  // rank 0's locked run directory (train/run_directory.h): the
                                    // start-up records what it creates there and says when the
                                    // first step has finished; null on the other ranks
  std::function<bool(const TrainProgress&)> progress;  // TrainRequest::progress
};

/// The stages of a run (train/run.cc), in order: check the request, start the workers, prepare
/// the data, restore the data loader, load or initialise the model, write the run files, describe
/// the run, the loop (train/loop.cc), finish. Throws as wte::train documents (include/wte/train.h);
/// the caller owns the run directory's lock and clean-up. Returns the summary (out_dir,
/// already_complete and earlier_run_deleted are the caller's to fill).
TrainSummary run_training(const Config& cfg, const RunOptions& opts);

}  // namespace wte
