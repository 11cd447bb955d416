// The training loop behind `wte train`.
#pragma once

#include <string>

#include "src/config.h"

namespace wte {

/// Options of one training run that are not part of the model's config.
struct RunOptions {
  std::string out_dir;   // metrics.csv, config.ini, tokenizer/, checkpoints
  bool quiet = false;    // no progress lines (errors and the final summary still print)
};

/// What a finished run measured.
struct RunSummary {
  double final_val_loss = 0;      // nats/token on the whole validation split
  double unigram_baseline = 0;    // nats/token, unigram model counted on the train split
  double tokens_per_second = 0;   // training tokens per second of step time
  double train_seconds = 0;       // wall time of the optimizer steps (excludes data preparation)
  std::string last_checkpoint;
};

/// Runs a whole training job: prepares the data (reads data.text, splits it, trains or loads the
/// tokenizer, encodes), trains cfg.train.steps AdamW steps, evaluates, and writes into
/// opts.out_dir: config.ini, tokenizer/{encoder.json,vocab.bpe}, train.bin and val.bin (int32 ids),
/// metrics.csv (step,train_loss,val_loss,lr,grad_norm,tokens_per_s,elapsed_s) and checkpoints
/// checkpoint_XXXXXXXX.h5 (every checkpoint.interval steps and at the end).
/// Throws wte::Error before any training for a missing file, a tokenizer whose size is not
/// model.vocab_size, or a corpus too small for one batch.
RunSummary run_training(const Config& cfg, const RunOptions& opts);

}  // namespace wte
