// `wte train --config FILE [--out DIR] [--resume PATH|auto] [--section.key=value ...]`
#include <boost/program_options.hpp>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fcntl.h>
#include <cstdio>
#include <filesystem>
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
#include "wte/train.h"

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
  bool help = false;     // --help was printed: nothing to do
  TrainRequest request;  // what wte::train runs
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
  TrainRequest& req = t.request;
  req.overrides = cl.overrides;
  req.config = resolve_config_path(file_option(vm, "config"));
  req.resume = vm.count("resume") ? vm["resume"].as<std::string>() : "";
  req.init_from = vm.count("init-from") ? vm["init-from"].as<std::string>() : "";
  const std::string& resume = req.resume;
  const std::string& init_from = req.init_from;
  if (!init_from.empty() && !resume.empty())
    throw UsageError("--init-from and --resume exclude each other: --resume continues a run "
                     "exactly, --init-from starts a new run from a checkpoint's weights");
  if (vm.count("init-from") && init_from.empty())
    throw UsageError("--init-from is empty; allowed: a checkpoint path");
  // A directory (a run's), /dev/null or a missing file, named with its option, before any work.
  if (!resume.empty() && resume != "auto") require_checkpoint_file("--resume", resume);
  if (!init_from.empty()) req.init_from = require_checkpoint_file("--init-from", init_from);
  req.quiet = vm.count("quiet") > 0;
  req.overwrite = vm.count("overwrite") > 0;
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
    req.stop_at = n;
  }
  // Without --out: the checkpoint's run directory for --resume PATH, else runs/<config name>.
  req.out_dir = vm.count("out") ? vm["out"].as<std::string>() : default_run_directory(req);
  return t;
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
  const TrainCommand t = parse_train_options(argc, argv);
  if (t.help) return 0;
  try {
    const TrainSummary summary = train(t.request);  // include/wte/train.h
    // Stopped by SIGINT/SIGTERM after a checkpoint: the shell's code for a process ended by that
    // signal (130, 143), so scripts see the run did not finish; the same code for a signal
    // received in the last step (the run is complete and says so), as a process that received it.
    return summary.signal != 0 ? 128 + summary.signal : 0;
  } catch (const Interrupted& e) {
    // A start-up stopped by SIGINT/SIGTERM: what it made in a run directory it created is gone
    // (the message says what); the shell's code for a process ended by that signal.
    std::fprintf(stderr, "wte train: %s\n", e.what());
    return 128 + e.signal();
  }
}

}  // namespace

}  // namespace wte::cli
