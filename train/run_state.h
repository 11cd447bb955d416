// What the stages of a training run hand each other (train/run.cc sets them up, train/loop.cc
// trains with them): the data, the run files, the evaluation plan, the step's batch, the loop's
// state. Private to train/.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "src/hooks/test_hooks.h"
#include "src/profile/clock.h"
#include "train/distributed/grad_sync.h"
#include "train/run.h"
#include "wte/checkpoint.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "wte/tokenizer.h"

namespace wte {

// printf to stdout unless the run is quiet (progress lines; errors and the summary always print).
struct Say {
  bool quiet;
  template <typename... Args>
  void operator()(const char* fmt, Args... args) const {
    if (quiet) return;
    errno = 0;
    std::printf(fmt, args...);
    // A progress line that cannot be written (a full disk, /dev/full) stops the run here rather
    // than at its end: the lines a user asked for are lost, and so would be the end's summary.
    // A closed pipe (EPIPE) is SIGPIPE's: the run stops after the step as for SIGTERM.
    if ((std::fflush(stdout) != 0 || std::ferror(stdout)) && errno != EPIPE) {
      const int err = errno;
      // The error below reports this failure: cleared, so that `wte`'s exit check (cli/main.cc),
      // which reports a stdout left in error, does not say it a second time. (A failed fflush
      // has already dropped the buffered bytes, so nothing is retried.)
      std::clearerr(stdout);
      throw Error(std::string("cannot write standard output: ") +
                  (err != 0 ? std::strerror(err) : "a write failed") +
                  "; the run stops (its last checkpoint, if any, is whole)");
    }
  }
};

// The run's tokenizer and token streams, every id checked.
struct RunData {
  Tokenizer tokenizer;
  TokenStream train_ids, val_ids;  // memory-mapped when read from token files
  uint64_t train_hash = 0, val_hash = 0;
  size_t train_bytes = 0;  // bytes of the train split's text (0 from token files)
  Clock::time_point t_prep;
};

// metrics.csv as the loop writes it. Ranks other than 0 write nothing: theirs stays closed.
struct RunFiles {
  std::string metrics_path;
  std::ofstream metrics;
  double elapsed_before = 0;  // elapsed_s of the rows kept from before a resume
};

// The validation windows (of T + 1 tokens) the evaluations cover. Every evaluation, the final one
// too, covers the same first windows of the split (train.eval_tokens, eval_token_cap).
struct EvalWindows {
  size_t split = 0;     // whole windows in the validation split
  size_t all = 0;       // the final evaluation's
  size_t periodic = 0;  // the evaluations every train.eval_interval steps
};

// Time spent in evaluations, to put the evaluations still to come into the ETA.
struct EvalClock {
  double seconds = 0;
  size_t windows = 0;
  void add(double s, size_t w) { seconds += s, windows += w; }
  // Seconds the evaluations after step `done` will take: the periodic ones at multiples of
  // `interval` below `steps` and the final one over the whole split. Per window: as measured, or
  // before the first evaluation a third of a training step's time per sequence (forward only).
  double seconds_left(size_t done, size_t steps, size_t interval, size_t periodic_windows,
                      size_t all_windows, double train_seconds_per_window) const {
    if (done >= steps) return 0;
    const size_t periodic = interval > 0 ? (steps - 1) / interval - done / interval : 0;
    const double per_window = windows > 0 ? seconds / static_cast<double>(windows)
                                          : train_seconds_per_window / 3.0;
    return per_window * static_cast<double>(periodic * periodic_windows + all_windows);
  }
};

struct StepResult {
  float loss;
  double grad_norm;  // before clipping
  float lr;
};

// The step's batch: the loader's samples of the whole (global) batch, and the ids of the part
// being run, copied just before its forward (StepBatch::copy), so that a run holds the ids of one
// micro-batch of its rank's slice, not of the batch: gradient accumulation needs no more memory
// than one micro-batch (the memory plan counts these buffers: src/model/memory_plan.cc).
struct StepBatch {
  StepBatch(const BatchLoader& l, size_t micro_tokens)
      : loader(l), inputs(micro_tokens), targets(micro_tokens) {}
  // Copies samples [first, first + count) of the batch into inputs and targets (count, T).
  void copy(size_t first, size_t count) {
    loader.copy_samples(samples.data() + first, count, inputs.data(), targets.data());
  }
  const BatchLoader& loader;
  std::vector<uint32_t> samples;         // (B) of the step
  std::vector<int32_t> inputs, targets;  // (B_micro, T)
};

// What the loop works on, set up by the start-up. The loop changes what the references name (the
// model's parameters, the loader's position, metrics.csv), never which objects they are.
struct Run {
  const Config& cfg;
  const RunOptions& opts;
  const RunData& d;
  Comm& comm;
  GradientSync& sync;
  Model& model;
  AdamW& optimizer;
  BatchLoader& loader;
  test_hooks::SampleTrace& trace;
  RunFiles& files;
  const Say& say;
  bool writer;        // rank 0: writes the files and evaluates
  size_t start_step;  // the first step of this run
  size_t B_micro;     // sequences per forward: a micro-batch of the batch, evaluation's too
  EvalWindows eval;
};

// The loop's running totals and its batch buffers.
struct LoopState {
  LoopState(const BatchLoader& loader, size_t micro_tokens, size_t start_step)
      : batch(loader, micro_tokens), t_start(Clock::now()), finished_step(start_step) {}
  StepBatch batch;
  TrainSummary summary;
  EvalClock eval_clock;
  double step_seconds = 0.0;  // wall time of the optimizer steps of this run so far
  Clock::time_point t_start;  // the loop's start (elapsed_s goes on from elapsed_before)
  size_t finished_step;       // steps done, of train.steps
};

/// The run's tokenizer and token streams (train/run_data.cc): data.text split, the tokenizer
/// trained or loaded and the splits encoded, or the token files read; every id checked against
/// model.vocab_size. With `ckpt` (resume or init_from) its tokenizer is always the one used (a
/// data.tokenizer directory must hold the same one); resuming, the streams must have the
/// checkpoint's lengths and hashes. Throws wte::Error naming what differs; Interrupted between
/// its stages on SIGINT/SIGTERM.
RunData prepare_data(const Config& cfg, const RunOptions& opts, const CheckpointInfo* ckpt,
                     const Say& say);

/// The loop (train/loop.cc): from run.start_step to train.steps, each step followed when due by
/// an evaluation, its metrics row and log line, and a checkpoint. Stops early, after that step's
/// checkpoint, at --stop-at, when the progress callback asks, or on a SIGINT/SIGTERM any rank
/// received (every rank stops after the same step).
void train_loop(Run& run, LoopState* s);

/// The SIGINT/SIGTERM any rank received (0: none), the same on every rank (train/loop.cc).
int agreed_stop_signal(Comm& comm);

/// Called once the first step of this run has finished (train/run.cc): from now on the run
/// directory is kept whatever happens, and a second signal's note says how to continue.
void first_step_finished(const RunOptions& opts);

}  // namespace wte
