// Checks of a training run's inputs, made before any work (data preparation, the run directory):
// every error here names the value, where it came from (config file, command line, checkpoint)
// and what is allowed. Called by run_training (train/run.cc).
#pragma once

#include <cstdint>

#include "train/run.h"
#include "wte/checkpoint.h"
#include "wte/config.h"

namespace wte {

/// Every path the run reads or writes, before anything is computed: --out must be a directory
/// (or creatable) this process may write; data.train_tokens/data.val_tokens, or else data.text,
/// must be regular files; a tokenizer directory must hold encoder.json and vocab.bpe. Throws
/// wte::Error naming the key and the path (a directory, /dev/null or a FIFO is named as what it
/// is: src/io/file_checks.h).
void check_paths(const Config& cfg, const RunOptions& opts);

/// --resume: the checkpoint opts.resume must be whole and resumable (weights, AdamW moments, data
/// order, schedule position) and every setting that changes what a step computes must equal the
/// checkpoint's (resume_config_mismatches); train.steps must be above its step. Throws
/// UsageError (exit 2) naming each differing key, both values and where the new one came
/// from; wte::Error for an unreadable or weights-only file. Prints a note for each changeable key
/// that differs (resume_mutable_keys) and for a different thread count. Returns the checkpoint's
/// header.
CheckpointInfo check_resume(const Config& cfg, const RunOptions& opts);

/// --init-from: the checkpoint opts.init_from (any: the trainer's, a snapshot, an imported model)
/// must have the config's model shapes and structure (vocab_size, d_model, n_ctx, n_layer,
/// n_head, tie_embeddings, ln_f, ln_eps). Throws UsageError (exit 2) naming each differing key
/// with both values, where the new one came from and the options that would match; wte::Error for
/// an unreadable file. Returns the checkpoint's header.
CheckpointInfo check_init_from(const Config& cfg, const RunOptions& opts);

/// --stop-at (opts.stop_at, 0 = not given) must be after the start step (resume_step when
/// resuming, else 0) and before train.steps. Throws UsageError (exit 2).
void check_stop_at(const Config& cfg, const RunOptions& opts, bool resuming, int64_t resume_step);

/// A note on stderr naming train.snapshot_steps beyond train.steps (they will not be written).
void note_skipped_snapshots(const Config& cfg);
/// Prints a note on stderr when optim.warmup_steps >= train.steps: the run never leaves the
/// warmup, so its learning rate never reaches optim.lr.
void note_warmup_covers_run(const Config& cfg);

}  // namespace wte
