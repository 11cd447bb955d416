// One training run, one call: wte::train runs a whole `wte train` job. The command line
// (cli/cmd_train.cc) and Python's wte.train (python/model.cc) turn their options into a
// TrainRequest and call it; docs/training.md describes the run and its directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "wte/config.h"
#include "wte/error.h"

namespace wte {

/// One finished optimizer step, as TrainRequest::progress sees it (the values of metrics.csv's
/// row for that step).
struct TrainProgress {
  size_t step = 0;                // steps done (1-based), of `steps` (train.steps)
  size_t steps = 0;
  double loss = 0;                // the step's training loss, nats/token
  double val_loss = -1;           // the evaluation after this step, nats/token (< 0: none)
  double lr = 0;                  // learning rate of the step
  double grad_norm = 0;           // global gradient norm before clipping
  double tokens_per_second = 0;   // training tokens per second of step time, this run so far
  double elapsed_seconds = 0;     // wall time since the loop started
};

/// What to train and where. Every field has the meaning of the `wte train` option of that name
/// (docs/cli.md); messages name the options (--resume, --overwrite, ...) as the command line does.
struct TrainRequest {
  /// INI config file, or "" for the built-in defaults; with `resume` or `init_from` and "", the
  /// checkpoint's own stored config.
  std::string config;
  /// "--section.key=value" overrides, in order (the first of a key wins); they win over `config`.
  std::vector<std::string> overrides;
  /// How messages about the overrides name them ("the command line", "keyword argument").
  OverridesFrom overrides_from = OverridesFrom::command_line;
  /// The run directory; "" for default_run_directory(*this).
  std::string out_dir;
  /// "" (a fresh run), a checkpoint path (continue that run exactly, bit for bit with the same
  /// thread count), or "auto": the newest valid checkpoint in out_dir (broken ones are named and
  /// skipped; none at all: the run starts again from step 0).
  std::string resume;
  /// A checkpoint (of wte train, a snapshot, or a model made by wte import): a fresh run (step 0,
  /// new optimizer, new data order) from its weights and with its tokenizer. Excludes `resume`.
  std::string init_from;
  /// Start afresh in a directory that holds an earlier run (deleting its checkpoints and
  /// snapshots once every check has passed), or files a run writes that wte did not write.
  bool overwrite = false;
  /// If > 0: after this step write a checkpoint and return (the schedule still spans train.steps).
  size_t stop_at = 0;
  /// No progress lines on stdout (errors and the final summary still print).
  bool quiet = false;
  /// Called after every step (and its evaluation, before its checkpoint) in a single-process run
  /// (not under mpirun, where the ranks would disagree). Returning false stops the run after that
  /// step with a checkpoint, as stop_at does. An exception it throws is not caught: the caller
  /// must catch it inside the callback and return false (python/model.cc does so).
  std::function<bool(const TrainProgress&)> progress;
};

/// How a run ended and what it measured.
struct TrainSummary {
  std::string out_dir;            // the run directory used
  double final_val_loss = 0;      // nats/token on the validation split (at most train.eval_tokens)
  double unigram_baseline = 0;    // nats/token, unigram model counted on the train split
  double tokens_per_second = 0;   // training tokens per second of step time
  double train_seconds = 0;       // wall time of the optimizer steps (excludes data preparation)
  std::string last_checkpoint;    // the newest checkpoint this run wrote ("" if none)
  size_t start_step = 0;          // the step this run trained from (the resumed checkpoint's)
  size_t finished_step = 0;       // the last step trained (train.steps when complete)
  bool stopped = false;           // stopped at stop_at or by the progress callback, before the end
  bool already_complete = false;  // resume "auto" found the run finished: nothing was trained
  bool earlier_run_deleted = false;  // overwrite deleted an earlier run's checkpoints or snapshots
  int signal = 0;                 // SIGINT/SIGTERM received (0: none): it stopped the run after a
                                  // checkpoint, or, received in the last step, the run is complete
  size_t evaluations = 0;         // validation losses computed by this run (or resume)
  double eval_seconds = 0;        // wall time they took (not part of train_seconds)
  size_t checkpoints_written = 0;
  double checkpoint_seconds = 0;  // wall time spent writing checkpoints (write, fsync, rename)
};

/// A start-up (before step 1) stopped by SIGINT/SIGTERM: nothing was trained, and what the start-up
/// had written into a run directory it created was removed (the message says what was removed or
/// kept). `signal()` is the signal's number (`wte train` exits with 128 + it).
class Interrupted : public Cancelled {
 public:
  Interrupted(int sig, const std::string& what) : Cancelled(what), sig_(sig) {}
  int signal() const { return sig_; }

 private:
  int sig_;
};

/// The run directory a request without out_dir uses: the directory of `resume` when it is a
/// checkpoint path, runs/<config file's name> with a config, runs/from_<checkpoint name> for an
/// init_from without one, else runs/default. Throws UsageError for resume "auto" with neither
/// out_dir nor config (there is no directory to look in).
std::string default_run_directory(const TrainRequest& request);

/// Runs a whole training job in this process: reads the config, checks every input and the run
/// directory before any work, locks the directory (a second run on it fails at once), prepares
/// the data (reads data.text, splits it, trains or loads the tokenizer, encodes), trains
/// train.steps AdamW steps from step 0, the resumed step or init_from's weights, evaluates, and
/// writes into the run directory: config.ini (resolved), tokenizer/{encoder.json,vocab.bpe},
/// train.bin and val.bin (int32 ids), metrics.csv (step,train_loss,val_loss,lr,grad_norm,
/// tokens_per_s_avg,elapsed_s,ranks), loss.svg, snapshot_<step>.h5 (train.snapshot_steps) and
/// checkpoint_<step>.h5 (every checkpoint.interval steps and at the end; older ones beyond
/// checkpoint.keep_last are deleted). Progress lines go to stdout (unless quiet), notes and
/// warnings to stderr.
/// SIGINT/SIGTERM during the run finish the step, write a checkpoint and return with `signal`
/// set; a second one ends the process at once (every checkpoint stays whole). The handlers are
/// installed for the call only (the caller's are not restored: see python/model.cc).
/// Throws UsageError for bad usage (a config value, options that exclude each other, a run
/// directory that holds files the run would replace), wte::Error for a run-time failure (a
/// missing or broken file, a disk that fills, a diverged step), Interrupted for a signal before
/// step 1. A failure before the first step has finished removes what the start-up wrote into a
/// run directory it created, and only that (the message says what); from then on the directory
/// and its checkpoints are kept.
/// Data-parallel under mpirun: every rank calls it; rank 0 alone writes and prints.
TrainSummary train(const TrainRequest& request);

}  // namespace wte
