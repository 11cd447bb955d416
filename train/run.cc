// The run, stage by stage: run_training reads as the run goes (check the request, start the
// workers, prepare the data, restore the data loader, load or initialise the model, write the run
// files, describe the run, the loop, finish the run). The structs of train/run_state.h carry what
// one stage hands the next.
#include "train/run.h"

#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "src/analysis/loss_curve.h"
#include "src/io/invocation.h"
#include "src/io/snapshot.h"
#include "train/distributed/grad_sync.h"
#include "train/memory.h"
#include "train/metrics.h"
#include "train/omp_env.h"
#include "train/run_directory.h"
#include "train/run_files.h"
#include "train/run_state.h"
#include "train/signals.h"
#include "train/start_checks.h"
#include "wte/checkpoint.h"
#include "wte/error.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

// What the caller asked for, checked: a fresh run, a resume or an init-from, and the checkpoint
// the latter two name (its metadata only; the parameters are read once everything is checked).
struct RunRequest {
  bool resuming = false;   // opts.resume: continue that run exactly
  bool initing = false;    // opts.init_from: a fresh run from a checkpoint's weights
  CheckpointInfo ckpt;     // the checkpoint resume or init_from names (default: neither)
  size_t start_step = 0;   // the first step this run trains from: the resumed checkpoint's, or 0

  // The checkpoint whose tokenizer the run uses (prepare_data), nullptr for a fresh run.
  const CheckpointInfo* checkpoint() const { return resuming || initing ? &ckpt : nullptr; }
};

// Every check that needs no work, before anything is read beyond checkpoint metadata or written,
// in the order their errors come: bad usage first (exit 2; the stop step against the resume step
// once the checkpoint is read), the paths, --resume against --init-from, the checkpoint named.
RunRequest check_run_request(const Config& cfg, const RunOptions& opts) {
  check_stop_at(cfg, opts, false, 0);  // bad usage first (exit 2); the resume step is checked below
  check_paths(cfg, opts);
  RunRequest req;
  req.resuming = !opts.resume.empty();
  req.initing = !opts.init_from.empty();
  if (req.resuming && req.initing)
    throw Error("--resume and --init-from exclude each other: --resume continues a run, "
                "--init-from starts a new one from a checkpoint's weights");
  if (req.resuming) req.ckpt = check_resume(cfg, opts);
  if (req.initing) req.ckpt = check_init_from(cfg, opts);
  check_stop_at(cfg, opts, req.resuming, req.ckpt.step);
  req.start_step = req.resuming ? static_cast<size_t>(req.ckpt.step) : 0;
  return req;
}

// This process's threads: train.threads, the memory check (before any data is read or file
// written, train/run_directory.h) and the thread team started; then the config's notes, printed
// by rank 0 only (`writer`), once per run rather than once per rank.
void start_workers(const Config& cfg, bool writer) {
  if (cfg.train.threads > 0) omp_set_num_threads(static_cast<int>(cfg.train.threads));
  check_training_memory(cfg);
  start_thread_team(cfg);
  throw_if_stop_requested("start-up");
  if (writer) {
    note_skipped_snapshots(cfg);
    note_warmup_covers_run(cfg);
  }
}

// The loader of the train split's batches: it must hold a whole batch of distinct sequences, and
// a resumed run continues the checkpoint's data order. Prints the token counts of the data.
BatchLoader restore_data_loader(const Config& cfg, const RunOptions& opts, const RunRequest& req,
                                const RunData& d, const Say& say) {
  const size_t B = cfg.train.batch_size, T = cfg.data.seq_len;
  BatchLoader loader(d.train_ids, T, /*shuffle=*/true, cfg.train.seed ^ 0x5eed0da7aULL);
  if (loader.num_samples() < B)
    throw Error("train.batch_size = " + std::to_string(B) + " but the train split has only " +
                std::to_string(loader.num_samples()) + " sequences of data.seq_len = " +
                std::to_string(T) + " tokens (" + std::to_string(d.train_ids.size()) +
                " tokens): every batch would repeat sequences; lower train.batch_size or "
                "data.seq_len, or give more data");
  if (req.resuming) loader.restore(req.ckpt.resume.data, "checkpoint '" + opts.resume + "'");
  say("tokens: %zu train, %zu validation (%.2f bytes/token); %zu train sequences of %zu; "
      "prepared in %.1f s\n",
      d.train_ids.size(), d.val_ids.size(),
      static_cast<double>(d.train_bytes) / static_cast<double>(d.train_ids.size()),
      loader.num_samples(), T, seconds_since(d.t_prep));
  return loader;
}

// The model's and optimizer's starting point: everything from the resumed checkpoint, or an
// init-from checkpoint's weights with a fresh AdamW, or init_weights. load_checkpoint reads into
// temporaries first, so a failure changes nothing; nothing has been written yet. Then (rank 0) a
// fresh run's directory, or another directory a resume goes into with --overwrite, is cleared of
// an earlier run's checkpoints (clear_earlier_run).
void load_or_init_model(const Config& cfg, const RunOptions& opts, const RunRequest& req,
                        bool writer, const BatchLoader& loader, Model& model, AdamW& optimizer,
                        const Say& say) {
  if (req.resuming) {
    load_checkpoint(opts.resume, model, &optimizer);
    say("resumed: %s at step %zu (epoch %llu, sample %llu of %zu in this epoch's order)\n",
        opts.resume.c_str(), req.start_step, static_cast<unsigned long long>(loader.epoch()),
        static_cast<unsigned long long>(loader.cursor()), loader.num_samples());
  } else {
    if (req.initing) {
      load_checkpoint(opts.init_from, model, /*optimizer=*/nullptr);  // weights only: fresh AdamW
      say("init-from: %s (its step %lld): its weights, a new optimizer, step 0\n",
          opts.init_from.c_str(), static_cast<long long>(req.ckpt.step));
    } else {
      model.init_weights(cfg.train.seed);
    }
    throw_if_stop_requested("start-up (building the model)");
    if (writer) clear_earlier_run(opts, say);
  }
  // Resumed into another directory with --overwrite: its earlier checkpoints go, as for a fresh
  // run.
  if (req.resuming && writer && opts.overwrite && !in_run_directory(opts.resume, opts.out_dir)) {
    throw_if_stop_requested("start-up (building the model)");
    clear_earlier_run(opts, say);
  }
}

// Rank 0 writes the run files (write_run_files: config.ini, tokenizer/, train.bin, val.bin,
// metrics.csv opened) and, for a run that starts at step 0, the step-0 snapshot if one is due.
RunFiles write_start_files(const Config& cfg, const RunOptions& opts, const RunRequest& req,
                           const RunData& d, const Model& model, bool writer, const Say& say) {
  RunFiles files;
  if (writer)
    files.metrics = write_run_files(cfg, opts, d, req.start_step, say, &files.metrics_path,
                                    &files.elapsed_before);
  if (!req.resuming && writer) {
    will_write_snapshot(opts, 0);
    save_snapshot_if_due(cfg, opts.out_dir, model, d.tokenizer, 0);
  }
  return files;
}

// The lines that say what runs: the model's shape and workers, which GEMMs run, and what the run
// holds in memory (print_memory, which also sizes the model's buffers for micro-batches of
// B_micro and runs a warm-up pass).
void describe_run(const Config& cfg, Model& model, const Comm& comm, const GradientSync& sync,
                  size_t B_micro, size_t resident_before_model, const Say& say) {
  // "1 thread", "2 threads", "2 ranks x 1 thread" (threads per rank).
  const int threads = omp_get_max_threads();
  const std::string workers =
      (comm.size() > 1 ? std::to_string(comm.size()) + " ranks x " : std::string()) +
      std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  say("model: vocab_size %zu, d_model %zu, n_ctx %zu, n_layer %zu, n_head %zu, ln_f %s, %s; "
      "%zu parameters; %s%s (%s)\n",
      cfg.model.vocab_size, cfg.model.d_model, cfg.model.n_ctx, cfg.model.n_layer,
      cfg.model.n_head, cfg.model.ln_f ? "on" : "off",
      cfg.model.tie_embeddings ? "tied lm_head" : "untied lm_head", model.num_parameters(),
      workers.c_str(), sync.describe().c_str(), wait_policy_description());
  // Which GEMMs run: model.matmul_precision, the kernel oneDNN picks for it on this CPU (its ISA),
  // or why bf16 fell back to float32.
  say("gemms: %s\n", model.gemm_precision_note().c_str());
  print_memory(model, cfg, B_micro, cfg.data.seq_len, resident_before_model, say);
}

EvalWindows plan_evaluations(const Config& cfg, const RunData& d) {
  const size_t T = cfg.data.seq_len;
  EvalWindows w;
  w.split = (d.val_ids.size() - 1) / T;
  const size_t eval_cap = eval_token_cap(cfg);
  w.all = eval_cap == 0 ? w.split : std::min(w.split, std::max<size_t>(1, eval_cap / T));
  w.periodic = w.all;
  return w;
}

// After the loop: the signal check the loop no longer sees, metrics.csv closed and loss.svg drawn
// (rank 0), then how the run ended. A signal before the last step: how to continue (stderr).
// --stop-at or the progress callback: where it stopped and how to continue. Complete: the summary
// (print_summary), and if a signal came in or after the last step, that nothing is left to do.
TrainSummary finish_run(Run& run, LoopState* s) {
  const Config& cfg = run.cfg;
  const RunOptions& opts = run.opts;
  TrainSummary& summary = s->summary;
  const size_t finished_step = s->finished_step;
  // Read once more: a signal during the last step's evaluation or checkpoint, which the loop's
  // check no longer sees. A signal in or after the last step stops nothing: the run is complete,
  // ends as a finished run does (the summary) and then says so (exit status 128 + the signal).
  const int received = agreed_stop_signal(run.comm);
  remove_stop_signals();
  const bool complete = finished_step == cfg.train.steps;
  if (complete) summary.stopped = false;
  if (run.writer) {
    run.files.metrics.close();
    if (run.files.metrics.fail()) throw Error(write_failed(run.files.metrics_path));
    write_loss_curve(run.files.metrics_path, (fs::path(opts.out_dir) / "loss.svg").string(),
                     cfg.train.batch_size * cfg.data.seq_len,
                     "loss of " + opts.out_dir);  // src/analysis/loss_curve.h
  }
  summary.train_seconds = s->step_seconds;
  summary.start_step = run.start_step;
  summary.finished_step = finished_step;
  summary.signal = received;
  if (summary.signal != 0 && !complete) {
    if (run.writer)
      std::fprintf(stderr,
                 "wte train: %s received: finished step %zu of %zu and wrote checkpoint %s; "
                 "continue with: %s train --resume auto --out %s\n",
                 signal_name(summary.signal), finished_step, cfg.train.steps,
                 summary.last_checkpoint.c_str(), io::invoked_program().c_str(),
                 opts.out_dir.c_str());
    return summary;
  }
  if (summary.stopped) {
    std::printf("stopped at step %zu of %zu (%s) after %s; checkpoint %s; continue with: "
                "%s train --resume %s\n",
                finished_step, cfg.train.steps,
                finished_step == opts.stop_at ? "--stop-at" : "the progress callback asked",
                format_duration(s->step_seconds).c_str(), summary.last_checkpoint.c_str(),
                io::invoked_program().c_str(), summary.last_checkpoint.c_str());
    run.sync.print_share(s->step_seconds, finished_step - run.start_step);
    return summary;
  }
  if (run.writer)
    print_summary(cfg, run.d, run.eval.all, cfg.train.steps - run.start_step,
                  run.files.metrics_path, &summary);
  run.sync.print_share(s->step_seconds, cfg.train.steps - run.start_step);
  if (summary.signal != 0 && run.writer) {
    std::fflush(stdout);  // after the summary, also when both go to one file
    std::fprintf(stderr,
                 "wte train: %s received in the last step: the run is complete (step %zu of %zu, "
                 "final checkpoint %s); nothing to continue\n",
                 signal_name(summary.signal), finished_step, cfg.train.steps,
                 summary.last_checkpoint.c_str());
  }
  return summary;
}

}  // namespace

void first_step_finished(const RunOptions& opts) {
  if (opts.run_dir == nullptr) return;
  opts.run_dir->training_started();
  set_second_signal_note("wte train: stopped at once by a second signal; every checkpoint in '" +
                         opts.out_dir + "' is whole: continue with " + io::invoked_program() +
                         " train --resume auto --out " +
                         opts.out_dir + " (from step 0 if none was written yet)\n");
}

TrainSummary run_training(const Config& cfg, const RunOptions& opts) {
  // Set-up: every check that needs no work, then the data, then the model. Nothing is written
  // before all of them pass. SIGINT/SIGTERM before step 1 stops the start-up at its next stage
  // (Interrupted, a failed start-up); from step 1 on, after a step and a checkpoint.
  const StopSignalScope stop_signals;  // train/signals.h
  const RunRequest req = check_run_request(cfg, opts);
  // Data-parallel ranks (mpirun -np R): every rank serves the same global batches and trains on
  // its slice; only rank 0 writes files and evaluates (the other ranks' stdout is closed in
  // cmd_train). One rank: exactly the single-process run.
  Comm& comm = Comm::world();
  GradientSync sync(comm, cfg.train.batch_size);  // checks R <= train.batch_size
  const bool writer = comm.rank() == 0;
  start_workers(cfg, writer);
  const Say say{opts.quiet};
  const RunData d = prepare_data(cfg, opts, req.checkpoint(), say);
  BatchLoader loader = restore_data_loader(cfg, opts, req, d, say);

  const size_t resident_before_model = resident_bytes();  // for the memory line (print_memory)
  Model model(cfg.model);
  AdamW optimizer(model);
  load_or_init_model(cfg, opts, req, writer, loader, model, optimizer, say);
  RunFiles files = write_start_files(cfg, opts, req, d, model, writer, say);
  test_hooks::SampleTrace trace(writer);
  // Sequences per forward: a micro-batch of the batch (a rank's micro-batches are no larger);
  // evaluation runs batches of this size too, so no forward needs more memory than a micro-batch.
  const size_t B_micro = cfg.train.batch_size / cfg.train.grad_accum_steps;
  describe_run(cfg, model, comm, sync, B_micro, resident_before_model, say);

  Run run{cfg,    opts,  d,   comm,   sync,           model,   optimizer,
          loader, trace, files, say, writer, req.start_step, B_micro, plan_evaluations(cfg, d)};
  LoopState state(loader, B_micro * cfg.data.seq_len, req.start_step);
  // From here SIGINT/SIGTERM finish the step, write a checkpoint and exit (train/signals.h).
  throw_if_stop_requested("start-up (writing the run files)");
  train_loop(run, &state);
  return finish_run(run, &state);
}

}  // namespace wte
