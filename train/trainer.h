// The training loop behind `wte train`.
#pragma once

#include <functional>
#include <string>
#include <cstdint>
#include <vector>

#include "wte/config.h"

namespace wte {

/// One finished optimizer step, as RunOptions::on_step sees it (the values of metrics.csv's row).
struct StepProgress {
  size_t step = 0;                 // steps done (1-based), of `steps` (train.steps)
  size_t steps = 0;
  double loss = 0;                 // the step's training loss, nats/token
  double val_loss = -1;            // the evaluation after this step, nats/token (< 0: none)
  double lr = 0;                   // learning rate of the step
  double grad_norm = 0;            // global gradient norm before clipping
  double tokens_per_second = 0;    // training tokens per second of step time, this run so far
  double elapsed_seconds = 0;      // wall time since the loop started
};

/// Options of one training run that are not part of the model's config.
struct RunOptions {
  std::string out_dir;   // metrics.csv, config.ini, tokenizer/, checkpoints
  bool quiet = false;    // no progress lines (errors and the final summary still print)
  std::string resume;    // checkpoint to continue from (empty: a fresh run); see run_training
  std::string config_file;  // the --config file, if one was given (named in error hints)
  std::vector<std::string> overrides;  // the command line's --section.key=value, in order (to
                                       // name where a value came from in notes and errors)
  std::string init_from; // a fresh run (step 0, new AdamW) from this checkpoint's weights (any
                         // checkpoint, snapshot or `wte import`ed model); excludes `resume`
  size_t stop_at = 0;    // if > 0: after this step, write a checkpoint and return (the schedule
                         // still spans train.steps), as a pre-empted job would; resume continues
  bool overwrite = false;  // a fresh run (or a resume into another directory) deletes the earlier
                           // checkpoints and snapshots in out_dir, a resume in its own directory
                           // the checkpoints of later steps, after every check passed; without it,
                           // cmd_train refuses such a directory (train/run_directory.h)
  std::string overwrite_reason = "--overwrite";  // what set `overwrite`, as the note names it
  bool* earlier_run_deleted = nullptr;  // if set: made true once --overwrite deleted an earlier
                                        // run's checkpoints or snapshots in out_dir
  std::function<bool(const StepProgress&)> on_step;
      // called after every step (and its evaluation, before its checkpoint) in one process (not
      // under mpirun: the ranks would disagree); returning false stops the run after that step
      // with a checkpoint, as stop_at does (the Python module's progress callback)
  std::function<void()> on_first_step;  // called once the first step of this run has finished
                                        // (cmd_train: the run directory is kept from then on)
  std::function<void(const std::string& path, bool directory)> will_create;
      // called before the start-up (up to the end of the first step) creates a file, or with
      // `directory` a directory, in out_dir, with its path (a temporary name too): cmd_train
      // records it (RunDirectory::will_create), so a failed start-up removes exactly what it wrote
};

/// What a finished run measured.
struct RunSummary {
  double final_val_loss = 0;      // nats/token on the validation split (at most train.eval_tokens)
  double unigram_baseline = 0;    // nats/token, unigram model counted on the train split
  double tokens_per_second = 0;   // training tokens per second of step time
  double train_seconds = 0;       // wall time of the optimizer steps (excludes data preparation)
  std::string last_checkpoint;
  bool stopped = false;           // stopped at opts.stop_at, before train.steps
  int signal = 0;                 // SIGINT/SIGTERM received (0: none): it stopped the run after a
                                  // checkpoint, or, received in the last step, the run is complete
  size_t evaluations = 0;         // validation losses computed by this run (or resume)
  double eval_seconds = 0;        // wall time they took (not part of train_seconds)
  size_t checkpoints_written = 0;
  double checkpoint_seconds = 0;  // wall time spent in save_checkpoint (write, fsync, rename)
};

class Model;

/// The validation loss as wte train computes it: the mean next-token cross-entropy (nats/token)
/// of `model` over the first min(max_windows, (tokens.size() - 1) / T) non-overlapping windows of
/// `tokens` (inputs tokens[w*T, w*T+T), targets one further), B windows per forward pass, summed
/// in double in window order. The same tokens, T, B and thread count give the same bits as the
/// run's evaluation (`wte eval` relies on it). `progress` (may be empty) is called after each
/// forward pass with (windows done, windows in all). Throws wte::Error if there is no whole window.
double evaluate_loss(Model& model, const std::vector<int32_t>& tokens, size_t T, size_t B,
                     size_t max_windows,
                     const std::function<void(size_t done, size_t total)>& progress = {});

/// Runs a whole training job: prepares the data (reads data.text, splits it, trains or loads the
/// tokenizer, encodes), trains cfg.train.steps AdamW steps, evaluates, and writes into
/// opts.out_dir: config.ini, tokenizer/{encoder.json,vocab.bpe}, train.bin and val.bin (int32 ids),
/// metrics.csv (step,train_loss,val_loss,lr,grad_norm,tokens_per_s,elapsed_s) and checkpoints
/// checkpoint_XXXXXXXX.h5 (every checkpoint.interval steps and at the end).
/// Throws wte::Error before any training for a missing file, a tokenizer whose size is not
/// model.vocab_size, or a corpus too small for one batch.
///
/// Resume (opts.resume = a checkpoint path): continues that run exactly, from its step to
/// cfg.train.steps. Before anything is computed or written it checks, each failure a wte::Error:
/// the file is a whole, resumable checkpoint (read_checkpoint_info); every config key outside
/// resume_mutable_keys() equals the checkpoint's (the error lists each differing key with both
/// values); a tokenizer directory holds the checkpoint's tokenizer (which is always the one used);
/// the train and validation token streams have the checkpoint's lengths and FNV-1a hashes; the
/// step is below train.steps. Then parameters, AdamW m/v/step, the data order and the schedule's
/// position (the step) are restored; metrics.csv keeps its rows up to the step and continues;
/// unfinished checkpoint_*.h5.tmp files in the run directory are removed. With the same thread
/// count the result is bit-identical to a run that was never stopped.
/// Init-from (opts.init_from = a checkpoint path): a fresh run whose parameters are the
/// checkpoint's instead of init_weights. Before any work: the file validates (read_checkpoint_info);
/// its model keys (vocab_size, d_model, n_ctx, n_layer, n_head, tie_embeddings, ln_f, ln_eps)
/// equal cfg.model's (else wte::Error naming each differing key with both values); the checkpoint's
/// tokenizer is the one used (a data.tokenizer directory must hold the same one). The optimizer,
/// step, schedule and data order start fresh.
/// After each checkpoint, older ones beyond checkpoint.keep_last are deleted (see
/// prune_checkpoints in trainer.cc: only checkpoints of steps <= the current one are counted).
RunSummary run_training(const Config& cfg, const RunOptions& opts);

}  // namespace wte
