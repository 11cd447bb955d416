// `wte train --config FILE [--out DIR] [--resume PATH|auto] [--section.key=value ...]`
#include <boost/program_options.hpp>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fcntl.h>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <optional>
#include <string>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/error.h"
#include "train/distributed/comm.h"
#include "cli/build_info.h"
#include "cli/options.h"
#include "src/io/invocation.h"
#include "cli/config_path.h"
#include "cli/commands.h"
#include "src/io/hdf5_util.h"
#include "src/io/snapshot.h"
#include "train/run_directory.h"
#include "train/signals.h"
#include "train/trainer.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace wte::cli {
namespace {
int train_main(int argc, char** argv);

}  // namespace

// Under mpirun every rank runs this; rank 0 alone prints progress (the others' stdout goes to
// /dev/null) and writes files. An error on any rank is printed with its rank and ends the whole
// job (MPI_Abort), so no rank waits forever in a collective for one that has left.
int cmd_train(int argc, char** argv) {
  Comm& comm = Comm::world();
  if (comm.rank() != 0) {
    std::fflush(stdout);
    const int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      ::dup2(devnull, STDOUT_FILENO);
      ::close(devnull);
    }
  }
  int rc = 0;
  try {
    rc = train_main(argc, argv);
  } catch (const std::exception& e) {
    if (comm.size() == 1) {
      comm.finalize();
      throw;
    }
    std::fprintf(stderr, "wte train: error on rank %d of %d: %s\n", comm.rank(), comm.size(),
                 e.what());
    // Most start-up errors (a config every rank reads, train.batch_size < ranks) reach every rank.
    // Rank 0 has then already unwound (removing a run directory it created, train/run_directory.h)
    // when it aborts; another rank that aborted first could kill it mid-way and leave the
    // directory behind. So the other ranks wait until rank 0 has ended the job itself or, past
    // its start-up, entered its first collective (an error on this rank alone); no fixed delay,
    // which a loaded machine can outlast (test_mpi_train.sh stalls rank 0 to check this).
    if (comm.rank() != 0) comm.wait_for_rank0();
    comm.abort(dynamic_cast<const UsageError*>(&e) != nullptr ? 2 : 1);  // 2: bad usage
  }
  if (comm.size() > 1 && rc != 0) comm.abort(rc);
  comm.finalize();
  return rc;
}

namespace {

// wte train --help: what the command does and writes.
constexpr const char* kTrainUsage =
      "Usage: wte train --config FILE [--out DIR] [--section.key=value ...]\n"
      "       wte train --init-from CHECKPOINT [--config FILE] [--out DIR] "
      "[--section.key=value ...]\n"
      "       wte train --resume PATH|auto [--config FILE] [--out DIR] "
      "[--section.key=value ...]\n\n"
      "Trains a GPT-2-style model (wte + wpe -> transformer blocks -> ln_f -> lm_head,\n"
      "tied to wte unless model.tie_embeddings = false) on a text corpus, on the CPU.\n"
      "Prints a progress line (step, loss, tokens/s, ETA including the evaluations) and\n"
      "says when it evaluates; writes DIR/metrics.csv, DIR/loss.svg (the loss curve),\n"
      "DIR/config.ini (resolved), DIR/tokenizer/, int32 token files DIR/{train,val}.bin\n"
      "and HDF5 checkpoints DIR/checkpoint_<step>.h5, and ends with the final validation\n"
      "loss beside the unigram baseline.\n\n"
      "metrics.csv columns: step, train_loss (this step's batch), val_loss (empty between\n"
      "evaluations), lr, grad_norm (before clipping), tokens_per_s_avg (a running average:\n"
      "tokens trained since the run or resume began over the time of those steps, without\n"
      "evaluations and checkpoints), elapsed_s (wall time of the run, continued across\n"
      "resumes: a resumed run adds its time to the last kept row's).\n\n"
      "Data-parallel: mpirun -np R wte train ... runs R ranks (processes, one or more\n"
      "machines); each trains on its slice of every batch of train.batch_size samples\n"
      "and the gradients are summed in rank order, so the loss curve is that of one\n"
      "process up to rounding. Rank 0 prints and writes the run directory; set\n"
      "train.threads per rank. See docs/distributed.md.\n\n"
      "Memory: at start-up wte train prints its memory plan (parameters, gradients, AdamW\n"
      "moments, activations, loss workspace, other buffers) and what was resident before\n"
      "the model (program, tokenizer, tokens), and\n"
      "refuses, before reading data or writing any file, a run that needs more than the\n"
      "memory available (MemAvailable, or the cgroup's limit), naming the largest part and\n"
      "the setting to change. Large vocabularies: model.loss_chunk (the fused loss, no\n"
      "(tokens, vocab_size) logits) and train.grad_accum_steps (micro-batches). See\n"
      "docs/training.md (Memory, Gradient accumulation).\n\n";

// `wte train`'s command line, parsed and checked before any work (exit 2 for bad usage).
struct TrainCommand {
  bool help = false;               // --help was printed: nothing to do
  std::string config_path;         // --config (--resume auto may set it to DIR/config.ini)
  std::string user_config_path;    // --config as given
  std::string resume, init_from;   // --resume PATH|auto, --init-from PATH
  bool overwrite_given = false;    // --overwrite
  std::vector<std::string> overrides;  // --section.key=value, in order
  RunOptions opts;                 // out_dir, stop_at, quiet, overwrite, init_from, config
};

TrainCommand parse_train_options(int argc, char** argv) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "print this help")(
      "config,c", po::value<std::string>(), "INI config file, or the name of a shipped config: "
      "-c default (configs/default.ini, the Quick start's job); without one, every key comes from "
      "its default (the same values but data.text) and the command line")(
      "out,o", po::value<std::string>(),
      "run directory for metrics.csv, checkpoints, tokenizer (default: runs/<config name>)")(
      "resume,r", po::value<std::string>(),
      "continue a run from checkpoint PATH, or 'auto': from the newest valid checkpoint in the run "
      "directory, by the step stored in it (broken ones are named and skipped; a fresh start if "
      "it has none). Without --config the checkpoint's own config is "
      "used; --section.key=value may change train.steps, the log/eval/checkpoint intervals, "
      "train.eval_tokens, train.snapshot_steps, checkpoint.keep_last and the data paths (nothing "
      "that alters what a step computes), and how a step is cut into work: train.threads, "
      "model.loss_chunk, model.loss_vocab_tile, train.grad_accum_steps (the same loss and "
      "gradient up to float rounding, so then not bit-identical; memory differs)")(
      "init-from", po::value<std::string>(),
      "start a fresh run (step 0, new optimizer, new data order) from the weights of checkpoint "
      "PATH: a checkpoint or snapshot of wte train, a run directory (its newest checkpoint), or a "
      "model made by wte import. Its model keys "
      "(vocab_size, d_model, n_ctx, n_layer, n_head, tie_embeddings, ln_f, ln_eps) must equal the "
      "config's (each difference is named); its tokenizer is used. Without --config the "
      "checkpoint's own config is used (give --data.text=... and any other keys)")(
      "stop-at", po::value<std::string>(),
      "write a checkpoint after step N and exit, as a pre-empted job would (the learning-rate "
      "schedule still spans train.steps); continue with --resume")(
      "overwrite", "start afresh in a run directory that holds an earlier run's checkpoints and "
      "snapshots, deleting them (only after every check passed), or files a run writes "
      "(config.ini, metrics.csv, loss.svg, train.bin, val.bin, tokenizer/) that no earlier wte "
      "run wrote, replacing them; without it either is an error. The --config file itself is "
      "never replaced")(
      "quiet,q", "no progress lines");
  CommandSpec spec;
  spec.usage = kTrainUsage;
  // After the options: every config key with its default (configs/default.ini's values).
  spec.example = "Config keys: INI sections [model] [data] [train] [optim] [checkpoint]; any key\n"
                 "can be overridden on the command line as --section.key=value (the command line\n"
                 "wins). Keys, built-in defaults (used for keys a config file does not set) and\n"
                 "allowed values:\n" +
                 config_help() +
                 "\nThe built-in defaults are configs/default.ini's values (the Quick start's model\n"
                 "and job); that file also names the corpus, data.text, which has no default.\n"
                 "-c NAME (no '/') is the config NAME.ini shipped with wte: share/wte/configs of\n"
                 "an installed wte, the source tree's configs/ for a binary in its build directory.\n"
                 "\nExample:\n  wte train -c default --train.steps=200 --out runs/short\n";
  spec.config_overrides = true;
  const CommandLine cl = parse_command_line(argc, argv, desc, spec);
  if (cl.help) {
    TrainCommand t;
    t.help = true;
    return t;
  }
  const po::variables_map& vm = cl.vm;
  TrainCommand t;
  t.overwrite_given = vm.count("overwrite") > 0;
  t.overrides = cl.overrides;
  t.config_path = resolve_config_path(file_option(vm, "config"));
  t.user_config_path = t.config_path;  // --resume auto may read DIR/config.ini
  t.resume = vm.count("resume") ? vm["resume"].as<std::string>() : "";
  t.init_from = vm.count("init-from") ? vm["init-from"].as<std::string>() : "";
  const std::string& config_path = t.config_path;
  const std::string& resume = t.resume;
  const std::string& init_from = t.init_from;
  if (!init_from.empty() && !resume.empty())
    throw UsageError("--init-from and --resume exclude each other: --resume continues a run "
                     "exactly, --init-from starts a new run from a checkpoint's weights");
  if (vm.count("init-from") && init_from.empty())
    throw UsageError("--init-from is empty; allowed: a checkpoint path");
  // A directory (a run's), /dev/null or a missing file, named with its option, before any work.
  if (!resume.empty() && resume != "auto") require_checkpoint_file("--resume", resume);
  if (!init_from.empty()) t.init_from = require_checkpoint_file("--init-from", init_from);
  RunOptions& opts = t.opts;
  opts.quiet = vm.count("quiet") > 0;
  opts.overwrite = vm.count("overwrite") > 0;
  if (vm.count("stop-at")) {
    const std::string text = vm["stop-at"].as<std::string>();
    size_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    const char* allowed = "; allowed: a whole number >= 1, after the start step and before "
                          "train.steps";
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
        end != text.data() + text.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
      throw UsageError("--stop-at = '" + text + "' is not a whole number" + allowed);
    if (ec != std::errc() || n == 0)
      throw UsageError("--stop-at = '" + text + "' is out of range" + allowed);
    opts.stop_at = n;
  }
  if (vm.count("out")) {
    opts.out_dir = vm["out"].as<std::string>();
  } else if (!resume.empty() && resume != "auto") {
    opts.out_dir = fs::path(resume).parent_path().string();  // continue in the checkpoint's run
    if (opts.out_dir.empty()) opts.out_dir = ".";
  } else if (resume == "auto" && config_path.empty()) {
    throw UsageError("--resume auto needs the run directory: give --out DIR (or --config FILE, "
                     "whose run directory is runs/<config name>)");
  } else {
    opts.out_dir = (fs::path("runs") / (config_path.empty()
                                            ? (init_from.empty()
                                                   ? std::string("default")
                                                   : "from_" + fs::path(init_from).stem().string())
                                            : fs::path(config_path).stem().string()))
                       .string();
  }
  opts.init_from = init_from;
  opts.config_file = config_path;
  opts.overrides = t.overrides;
  // --resume auto without --config continues the run in --out: a directory that must exist.
  if (resume == "auto" && config_path.empty() && !fs::exists(opts.out_dir))
    throw Error("--resume auto: the run directory '" + opts.out_dir + "' does not exist; give "
                "the --out of an earlier run, or --config FILE to start a run there from step 0");
  return t;
}

// --resume auto: sets opts.resume to the valid, resumable checkpoint of the highest stored step
// in opts.out_dir and returns that step; -1 when there is none (then the run starts again from
// step 0 with opts.overwrite set, its config from DIR/config.ini when config_path is empty).
// Throws wte::Error when checkpoints exist but none is valid, UsageError for a config.ini that
// wte did not write.
int64_t resolve_resume_auto(RunOptions& opts, std::string& config_path) {
  int64_t auto_step = -1;
    // The valid, resumable checkpoint of the highest stored step (choose_resume_checkpoint: file
    // names are not trusted, each file is validated in a child process first, a locked one stops
    // the search); broken ones are reported, never silently used or silently replaced by a fresh
    // start.
    const ResumeChoice choice = choose_resume_checkpoint(opts.out_dir);
    opts.resume = choice.path;
    auto_step = choice.step;
    std::string skipped;
    std::vector<std::pair<uint64_t, std::string>> broken;  // (file name's step, path)
    for (const ResumeChoice::Skipped& s : choice.skipped) {
      std::fprintf(stderr, "wte train: --resume auto: skipping %s\n", s.error.c_str());
      skipped += "\n  " + s.error;
      broken.emplace_back(s.name_step, s.path);
    }
    if (!opts.resume.empty() && !broken.empty()) {
      // Said once, with the commands that set the broken files aside: wte never deletes or
      // renames a file it could not read (it may be the only copy of those steps), and the run
      // writes a checkpoint of the same name over it when it reaches that step.
      std::string moves, names;
      auto quoted = [](const std::string& path) {
        std::string q = "'";
        for (char c : path) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        return q + "'";
      };
      for (auto b = broken.rbegin(); b != broken.rend(); ++b) {
        names += (names.empty() ? "" : ", ") + fs::path(b->second).filename().string();
        moves += "\n  mv " + quoted(b->second) + " " + quoted(b->second + ".corrupt");
      }
      std::fprintf(stderr,
                   "wte train: --resume auto: resuming from '%s' (step %lld), the newest valid "
                   "checkpoint; skipped %zu that do%s not validate: %s. They are left as they "
                   "are (the run writes over a file of the same name when it reaches that step); "
                   "to keep them aside for inspection:%s\n",
                   opts.resume.c_str(), static_cast<long long>(auto_step), broken.size(),
                   broken.size() == 1 ? "es" : "", names.c_str(), moves.c_str());
    }
    if (opts.resume.empty() && choice.considered > 0)
      throw Error("--resume auto: none of the " + std::to_string(choice.considered) +
                  " checkpoint(s) in '" + opts.out_dir + "' is valid:" + skipped +
                  "\n(not starting from scratch; remove the run directory to do that)");
    if (opts.resume.empty() && config_path.empty()) {
      // No checkpoint to take the config from: the run directory's own resolved config.ini
      // (written before the first step) is the run's config.
      const fs::path run_config = fs::path(opts.out_dir) / "config.ini";
      if (!fs::is_regular_file(run_config))
        throw Error("--resume auto: '" + opts.out_dir + "' holds no checkpoint and no config.ini; "
                    "give --config FILE to start the run from step 0");
      // Another program's (or the user's) config.ini: the restart would replace it by the
      // resolved config (train/run_directory.h).
      if (!is_written_config(run_config.string()))
        throw UsageError("--resume auto: '" + opts.out_dir + "' holds no checkpoint, and its "
                         "config.ini is not one wte train wrote: starting a run there would "
                         "replace it by the resolved config. Give --config FILE and another --out");
      config_path = run_config.string();
    }
    if (opts.resume.empty()) {
      // Nothing to resume: a run stopped before its first checkpoint (only its step-0 snapshot
      // and prepared files, if anything). Start it again from step 0; its snapshots are replaced
      // by the same ones (same config and seed).
      const size_t snapshots = list_snapshots(opts.out_dir).size();
      if (!opts.overwrite) opts.overwrite_reason = "--resume auto (restarting from step 0)";
      opts.overwrite = true;
      if (!opts.quiet)
        std::printf("--resume auto: no checkpoint in '%s'; starting from step 0%s\n",
                    opts.out_dir.c_str(),
                    snapshots ? (" (replacing " + std::to_string(snapshots) +
                                 " snapshot(s) of the run that stopped before its first checkpoint)")
                                    .c_str()
                              : "");
    }
  return auto_step;
}

// A start-up stopped by SIGINT/SIGTERM: removes what it made in a run directory it created, says
// what it removed or kept, and returns the shell's code for a process ended by that signal.
int report_interrupted(const Interrupted& e, std::optional<RunDirectory>& run_dir,
                       const std::string& out_dir, bool earlier_run_deleted) {
  // As a failed start-up: what it made in a run directory it created is removed; then the
  // shell's code for a process ended by that signal.
  const std::string what = run_dir ? run_dir->remove_start_up_files() : "";
  run_dir.reset();
  // An existing directory is kept; with --overwrite its earlier run may already be gone.
  const std::string kept =
      "the run directory '" + out_dir + "' existed before and is kept" +
      (earlier_run_deleted
           ? ", but --overwrite had already deleted the earlier run's checkpoints and snapshots "
             "there (its config.ini and token files may be this start-up's): start the run "
             "again, with --overwrite"
           : "");
  std::fprintf(stderr, "wte train: %s; %s\n", e.what(),
               what.empty() ? kept.c_str() : what.c_str());
  return 128 + e.signal();
}

// `wte train` without arguments: how to start, naming the default (stderr; exit status 2).
int print_short_usage() {
  std::string configs;
  for (const std::string& d : config_search_dirs()) {
    std::error_code ec;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".ini") names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    if (names.empty()) continue;
    configs += "\nConfigs (-c NAME, from " + d + "):";
    for (const std::string& n : names) configs += " " + n;
    break;
  }
  const char* prog = io::invoked_program().c_str();
  std::fprintf(stderr,
               "Usage: %s train -c CONFIG [--out DIR] [--section.key=value ...]\n\n"
               "The default model: %s train -c default\n"
               "  a GPT-2 with 4 blocks, 4 heads, d_model 256, n_ctx 128, vocab_size 8192 (tied),\n"
               "  600 steps of 16 x 128 tokens on the King James Bible, into runs/default;\n"
               "  make the corpus first with datasets/make_kjv.sh (configs/default.ini; every\n"
               "  built-in default is its value).%s\n\n"
               "Every option and config key: %s train --help\n",
               prog, prog, configs.c_str(), prog);
  return 2;
}

int train_main(int argc, char** argv) {
  if (argc <= 1) return print_short_usage();
  TrainCommand t = parse_train_options(argc, argv);
  if (t.help) return 0;
  RunOptions& opts = t.opts;
  std::string& config_path = t.config_path;
  const std::string& user_config_path = t.user_config_path;
  const std::string& resume = t.resume;
  bool earlier_run_deleted = false;  // set by the trainer (--overwrite)
  opts.earlier_run_deleted = &earlier_run_deleted;
  // The user's config is read before the stop handlers and the run directory exist: one that
  // blocks (a FIFO nobody writes to) ends at the first Ctrl-C, and leaves nothing behind.
  // A fresh run without --config is the built-in defaults and the command line: read here too, so
  // a mistyped key is reported before anything about the run directory.
  std::optional<Config> user_cfg;
  if (!config_path.empty() || (resume.empty() && t.init_from.empty()))
    user_cfg = usage_errors_of_overrides([&] { return load_config(config_path, t.overrides); });
  // SIGINT/SIGTERM from before the directory exists: the start-up stops at its next stage and
  // removes what it made (train/signals.h), instead of dying and leaving it.
  const StopSignalScope stop_signals;
  // The run directory is locked from here to the end of the run (train/run_directory.h): a second
  // `wte train` on it fails now, before it reads or writes anything there.
  // Under mpirun only rank 0 writes, so only rank 0 locks (and may create) the directory.
  std::optional<RunDirectory> run_dir;
  if (Comm::world().rank() == 0) run_dir.emplace(opts.out_dir);
  // What a second Ctrl-C/SIGTERM, which ends the process at once, leaves (train/signals.h).
  if (run_dir)
    set_second_signal_note(
        "wte train: stopped at once by a second signal, before step 1: nothing was trained; '" +
        opts.out_dir + "' may hold files the start-up wrote (config.ini, token files, a step-0 "
        "snapshot): " + (run_dir->created() ? "this run created it; remove it"
                                            : "remove them, or start again with --overwrite") +
        "\n");
  opts.on_first_step = [&run_dir, &opts] {
    if (!run_dir) return;
    run_dir->training_started();
    set_second_signal_note("wte train: stopped at once by a second signal; every checkpoint in '" +
                           opts.out_dir + "' is whole: continue with wte train --resume auto --out " +
                           opts.out_dir + " (from step 0 if none was written yet)\n");
  };
  opts.will_create = [&run_dir](const std::string& path, bool directory) {
    if (run_dir) run_dir->will_create(path, directory);
  };
  // An error from here until the first step has finished is a failed start-up: what it made in a
  // run directory it created is removed (only that: train/run_directory.h), and its message says what.
  auto removed = [&run_dir]() -> std::string {
    const std::string what = run_dir ? run_dir->remove_start_up_files() : "";
    return what.empty() ? what : "; " + what;
  };
  try {
    int64_t auto_step = -1;
    if (resume == "auto")
      auto_step = resolve_resume_auto(opts, config_path);
    else
      opts.resume = resume;
    // Files in the run directory that wte did not write, and an earlier run's checkpoints, are
    // never replaced without --overwrite, and the input config is never the output
    // (train/run_directory.h); before any work.
    if (run_dir)
      check_run_files(opts.out_dir, user_config_path, opts.resume, t.overwrite_given,
                      opts.overwrite);
    // Without --config a resumed run takes the checkpoint's own resolved config (paths absolute).
    const Config cfg = user_cfg ? *user_cfg : usage_errors_of_overrides([&] {
      // --init-from without --config: the checkpoint's own config, as --resume does.
      const std::string own = !opts.resume.empty() ? opts.resume : opts.init_from;
      return (!own.empty() && config_path.empty())
                 ? parse_config(read_checkpoint_info(own).config_ini,
                                "the config stored in '" + own + "'", t.overrides)
                 : load_config(config_path, t.overrides);
    });
    if (auto_step >= 0 && static_cast<uint64_t>(auto_step) >= cfg.train.steps) {
      // --resume auto of a run that already finished (e.g. killed after its last checkpoint):
      // nothing to do, and that is success.
      std::printf("--resume auto: the run in '%s' is complete (checkpoint %s at step %lld of "
                  "train.steps = %zu); nothing to train\n",
                  opts.out_dir.c_str(), opts.resume.c_str(), static_cast<long long>(auto_step),
                  cfg.train.steps);
      if (run_dir) run_dir->training_started();
      return 0;
    }
    throw_if_stop_requested("start-up");
    const RunSummary summary = run_training(cfg, opts);
    // Printed by run_training. Stopped by SIGINT/SIGTERM after a checkpoint: the shell's code for
    // a process ended by that signal (130, 143), so scripts see the run did not finish; the same
    // code for a signal received in the last step (the run is complete and says so), as a process
    // that received it.
    return summary.signal != 0 ? 128 + summary.signal : 0;
  } catch (const Interrupted& e) {
    return report_interrupted(e, run_dir, opts.out_dir, earlier_run_deleted);
  } catch (const UsageError& e) {
    throw UsageError(e.what() + removed());
  } catch (const Error& e) {
    throw Error(e.what() + removed());
  } catch (const fs::filesystem_error& e) {
    throw Error(e.what() + removed());
  } catch (const std::exception&) {
    const std::string what = removed();
    if (!what.empty()) std::fprintf(stderr, "wte train: %s\n", what.c_str() + 2);
    throw;
  }
}

}  // namespace

}  // namespace wte::cli
