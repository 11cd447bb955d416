// The training loop: the optimizer step, the loop over steps, and the evaluation, metrics row
// and checkpoint after a step when they are due (train/run_state.h: what the loop works on).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "src/io/snapshot.h"
#include "train/metrics.h"
#include "train/run_files.h"
#include "train/run_state.h"
#include "train/signals.h"
#include "wte/evaluate.h"
#include "wte/model.h"

namespace wte {

// Ranks that stopped at different steps would wait forever in the next step's collectives.
// One rank: stop_signal().
int agreed_stop_signal(Comm& comm) {
  int sig = stop_signal();
  if (comm.size() == 1) return sig;
  std::vector<int> all(static_cast<size_t>(comm.size()));
  comm.allgather(&sig, sizeof sig, all.data());
  return *std::max_element(all.begin(), all.end());
}

namespace {

// One optimizer step on the global batch's samples: forward and backward on this rank's
// slice, clip, AdamW. With several ranks (train/distributed/grad_sync.h, ZeRO-1): the ranks' gradients are
// reduce-scattered, each rank clips with the global norm and updates its block, and the updated
// parameters are all-gathered. A diverged step stops the run before it reaches the parameters
// (the loss and norm are the same on every rank, so every rank stops): the last checkpoint and
// the parameters in memory stay finite.
// The gradient is zeroed once per step (Model::zero_grad) and every backward adds into it. With
// train.grad_accum_steps = K > 1 the slice runs as K micro-batches in order, forward and backward
// into the same gradient: each micro-batch's loss gradient is divided by the slice's tokens
// (Model::forward's loss_tokens), so they sum to the gradient of the slice's mean loss with no
// scaling afterwards, and the loss is the token-weighted mean of theirs (in double).
StepResult train_step(Model& model, AdamW& optimizer, GradientSync& sync, const Config& cfg,
                      size_t step, StepBatch& batch) {
  const size_t T = cfg.data.seq_len, K = cfg.train.grad_accum_steps;
  const BatchSlice mine = sync.slice();
  const bool parallel = sync.ranks() > 1;
  StepResult r;
  model.zero_grad();
  if (K == 1) {
    batch.copy(mine.first, mine.count);
    r.loss = model.forward(batch.inputs.data(), batch.targets.data(), mine.count, T);
    model.backward();
  } else {
    const size_t tokens = mine.count * T;
    auto micro = [&](size_t k) { return std::pair{mine.count * k / K, mine.count * (k + 1) / K}; };
    size_t first = 0, last = K - 1;  // the first and last non-empty micro-batches
    while (micro(first).first == micro(first).second) ++first;
    while (micro(last).first == micro(last).second) --last;
    double loss_sum = 0.0;
    for (size_t k = first; k <= last; ++k) {
      const auto [a, b] = micro(k);
      if (a == b) continue;
      batch.copy(mine.first + a, b - a);
      const float l = model.forward(batch.inputs.data(), batch.targets.data(), b - a, T, tokens);
      model.backward();
      loss_sum += static_cast<double>(l) * static_cast<double>((b - a) * T);
    }
    r.loss = static_cast<float>(loss_sum / static_cast<double>(tokens));
  }
  // The step's row-sparse wte gradient (untied): the micro-batches' rows, merged by the model.
  const SparseRowGrad wte_rows = model.wte_grad_rows();
  if (parallel) r.loss = sync.reduce_scatter(model, r.loss, &wte_rows);
  // Global-norm clipping without a pass of its own: the norm's sums of squares of a tied wte's
  // gradient come from the last backward's scatter, which summed each block of the accumulated
  // gradient as it finished it (Model::grad_norm_head; one process: a reduce changes the gradient),
  // the rest is one vectorized read (wte::sum_of_squares; with several ranks, each rank's block,
  // combined in block order), and AdamW applies the clipping factor as it reads each gradient
  // (bit-identical to scaling them in place first, as clip_grad_norm does).
  r.grad_norm = parallel ? sync.grad_norm(model)
                         : grad_norm(model, wte_rows, model.grad_norm_head());
  r.lr = learning_rate(step, cfg.train.steps, cfg.optim);
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    char msg[320];
    std::snprintf(msg, sizeof msg,
                  "training diverged at step %zu: loss %g, gradient norm %g (learning rate %.3g "
                  "at that step); the update was not applied. Try a lower optim.lr, a larger "
                  "optim.eps or optim.beta2 closer to 1, or optim.grad_clip > 0",
                  step + 1, static_cast<double>(r.loss), r.grad_norm, static_cast<double>(r.lr));
    throw Error(msg);
  }
  const float scale = clip_scale(r.grad_norm, cfg.optim.grad_clip);
  if (parallel)
    sync.update(model, optimizer, r.lr, cfg.optim, scale);
  else
    optimizer.update(model, r.lr, cfg.optim, wte_rows, scale);
  return r;
}

// One step: the next batch, the optimizer step (timed), then rank 0's snapshot if one is due
// (not timed; the first step's is still part of the start-up, so it is recorded).
StepResult take_step(Run& run, size_t step, LoopState* s) {
  const Config& cfg = run.cfg;
  const auto t0 = Clock::now();
  run.loader.next_samples(cfg.train.batch_size, &s->batch.samples, run.trace.served());
  run.trace.write(step + 1);
  const StepResult r = train_step(run.model, run.optimizer, run.sync, cfg, step, s->batch);
  s->step_seconds += seconds_since(t0);
  if (run.writer && step == run.start_step) will_write_snapshot(run.opts, step + 1);
  if (run.writer) save_snapshot_if_due(cfg, run.opts.out_dir, run.model, run.d.tokenizer, step + 1);
  s->finished_step = step + 1;
  return r;
}

// The validation loss after step `done` (rank 0; the last step's evaluation covers the final
// windows). Its time goes into the ETA (EvalClock) and the summary, not into the steps' time.
double evaluate_after(Run& run, size_t done, bool last, LoopState* s) {
  const size_t T = run.cfg.data.seq_len;
  const size_t windows = last ? run.eval.all : run.eval.periodic;
  run.say("step %6zu/%zu | evaluating on %zu validation tokens%s...\n", done, run.cfg.train.steps,
          windows * T, windows == run.eval.split ? " (the whole split)" : "");
  const auto t_eval = Clock::now();
  pause_for_test("evaluation after step " + std::to_string(done));
  const double val_loss =
      evaluate_loss(run.model, run.d.val_ids, T, run.B_micro, windows);
  const double eval_s = seconds_since(t_eval);
  s->eval_clock.add(eval_s, windows);
  s->summary.eval_seconds += eval_s;
  s->summary.evaluations += 1;
  return val_loss;
}

// Step `done`'s row of metrics.csv and (when due) its log line, then the progress callback (one
// process only: under mpirun the ranks would disagree). Returns false if the callback asked the
// run to stop. A row that cannot be written (a full disk) stops the run, naming the file.
bool report_step(Run& run, size_t done, const StepResult& r, double val_loss, double tok_s,
                 bool evaluated, const LoopState& s) {
  const Config& cfg = run.cfg;
  const size_t steps_done = done - run.start_step;
  log_step(run.files.metrics, run.say, cfg, done, run.start_step, r, val_loss, tok_s,
           s.step_seconds, run.files.elapsed_before + seconds_since(s.t_start), evaluated,
           run.comm.size(),
           s.eval_clock.seconds_left(done, cfg.train.steps, cfg.train.eval_interval,
                                     run.eval.periodic, run.eval.all,
                                     s.step_seconds / static_cast<double>(steps_done) /
                                         static_cast<double>(cfg.train.batch_size)));
  if (run.writer && !run.files.metrics) throw Error(write_failed(run.files.metrics_path));
  return !(run.opts.progress && run.comm.size() == 1 &&
           !run.opts.progress(TrainProgress{done, cfg.train.steps, r.loss, val_loss, r.lr,
                                            r.grad_norm, tok_s, seconds_since(s.t_start)}));
}

// Step `done`'s checkpoint. Every rank gathers AdamW's m and v (complete only in each rank's
// block until then); rank 0 flushes metrics.csv, so the rows up to this checkpoint are on disk
// before it is, and writes it.
void checkpoint_after(Run& run, size_t done, float lr, LoopState* s) {
  run.sync.gather_optimizer_state(run.optimizer);
  if (!run.writer) return;
  run.files.metrics.flush();
  if (!run.files.metrics) throw Error(write_failed(run.files.metrics_path));
  write_checkpoint(run.cfg, run.opts, run.model, run.optimizer, run.d, run.loader, done, lr,
                   &s->summary);
}

}  // namespace

// The loop: a step, then (when due) an evaluation, its metrics row and log line, a checkpoint.
// It stops early, after that step's checkpoint, at --stop-at, when the progress callback asks, or
// on a SIGINT/SIGTERM any rank received (every rank stops after the same step).
void train_loop(Run& run, LoopState* s) {
  const Config& cfg = run.cfg;
  const size_t B = cfg.train.batch_size, T = cfg.data.seq_len;
  for (size_t step = run.start_step; step < cfg.train.steps; ++step) {
    const StepResult r = take_step(run, step, s);
    const size_t done = step + 1;
    const double tok_s = static_cast<double>((done - run.start_step) * B * T) / s->step_seconds;
    const bool last = done == cfg.train.steps;
    if (done == run.start_step + 1) first_step_finished(run.opts);
    const bool eval_now =
        last || (cfg.train.eval_interval > 0 && done % cfg.train.eval_interval == 0);
    const double val_loss = eval_now && run.writer ? evaluate_after(run, done, last, s) : -1.0;
    // Read after the evaluation, so a signal during it stops after this step, not the next one.
    bool stop_now = done == run.opts.stop_at || agreed_stop_signal(run.comm) != 0;
    if (!report_step(run, done, r, val_loss, tok_s, eval_now, *s)) stop_now = true;
    const bool checkpoint_now =
        last || stop_now || (cfg.checkpoint.interval > 0 && done % cfg.checkpoint.interval == 0);
    if (checkpoint_now) checkpoint_after(run, done, r.lr, s);
    // A signal during a periodic checkpoint's write: that checkpoint is this step's, so stop now
    // rather than after another step. (The last step's is read after the loop.)
    if (checkpoint_now && !stop_now && !last && agreed_stop_signal(run.comm) != 0) stop_now = true;
    if (last) s->summary.final_val_loss = val_loss;
    if (stop_now) {
      s->summary.stopped = true;
      break;
    }
  }
}

}  // namespace wte
