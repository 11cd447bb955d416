// wte::train (include/wte/train.h): a TrainRequest resolved into a run. In order: the run
// directory named, the user's config read, the stop signals installed, the directory locked,
// --resume auto resolved, the directory's files checked, the run's config chosen, then the run
// (train/run.cc); a start-up that fails removes what it wrote into a directory it created.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/io/config_usage_errors.h"
#include "src/io/snapshot.h"
#include "train/distributed/comm.h"
#include "train/run.h"
#include "train/run_directory.h"
#include "train/signals.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/error.h"
#include "wte/train.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

// "'PATH'" quoted for a shell.
std::string shell_quoted(const std::string& path) {
  std::string q = "'";
  for (char c : path) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The checkpoints --resume auto skipped, said once, with the commands that set them aside: wte
// never deletes or renames a file it could not read (it may be the only copy of those steps), and
// the run writes a checkpoint of the same name over it when it reaches that step.
void note_skipped_checkpoints(const ResumeChoice& choice) {
  std::string moves, names;
  for (auto b = choice.skipped.rbegin(); b != choice.skipped.rend(); ++b) {
    names += (names.empty() ? "" : ", ") + fs::path(b->path).filename().string();
    moves += "\n  mv " + shell_quoted(b->path) + " " + shell_quoted(b->path + ".corrupt");
  }
  const size_t n = choice.skipped.size();
  std::fprintf(stderr,
               "wte train: --resume auto: resuming from '%s' (step %lld), the newest valid "
               "checkpoint; skipped %zu that do%s not validate: %s. They are left as they "
               "are (the run writes over a file of the same name when it reaches that step); "
               "to keep them aside for inspection:%s\n",
               choice.path.c_str(), static_cast<long long>(choice.step), n, n == 1 ? "es" : "",
               names.c_str(), moves.c_str());
}

// --resume auto with no checkpoint to resume: a run stopped before its first checkpoint (only its
// step-0 snapshot and prepared files, if anything) starts again from step 0, its config from
// DIR/config.ini when none was given; its snapshots are replaced by the same ones.
void restart_from_step_0(RunOptions& opts, std::string& config_path) {
  if (config_path.empty()) {
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

// --resume auto: sets opts.resume to the valid, resumable checkpoint of the highest stored step
// in opts.out_dir (choose_resume_checkpoint: file names are not trusted, each file is validated
// in a child process first, a locked one stops the search) and returns that step; -1 when there
// is none (restart_from_step_0). Broken checkpoints are reported, never silently used or silently
// replaced by a fresh start: wte::Error when checkpoints exist but none is valid.
int64_t resolve_resume_auto(RunOptions& opts, std::string& config_path) {
  const ResumeChoice choice = choose_resume_checkpoint(opts.out_dir);
  opts.resume = choice.path;
  std::string skipped;
  for (const ResumeChoice::Skipped& s : choice.skipped) {
    std::fprintf(stderr, "wte train: --resume auto: skipping %s\n", s.error.c_str());
    skipped += "\n  " + s.error;
  }
  if (!opts.resume.empty() && !choice.skipped.empty()) note_skipped_checkpoints(choice);
  if (opts.resume.empty() && choice.considered > 0)
    throw Error("--resume auto: none of the " + std::to_string(choice.considered) +
                " checkpoint(s) in '" + opts.out_dir + "' is valid:" + skipped +
                "\n(not starting from scratch; remove the run directory to do that)");
  if (opts.resume.empty()) restart_from_step_0(opts, config_path);
  return opts.resume.empty() ? -1 : choice.step;
}

// The request as the run's options: every field but the checkpoint --resume auto picks.
RunOptions run_options(const TrainRequest& req) {
  RunOptions opts;
  opts.out_dir = req.out_dir.empty() ? default_run_directory(req) : req.out_dir;
  opts.quiet = req.quiet;
  opts.config_file = req.config;
  opts.overrides = req.overrides;
  opts.init_from = req.init_from;
  opts.stop_at = req.stop_at;
  opts.overwrite = req.overwrite;
  opts.progress = req.progress;
  if (req.resume != "auto") opts.resume = req.resume;
  return opts;
}

// The checks of the request that need no file: options that exclude each other, --resume auto's
// directory.
void check_request(const TrainRequest& req, const RunOptions& opts) {
  if (!req.init_from.empty() && !req.resume.empty())
    throw UsageError("--init-from and --resume exclude each other: --resume continues a run "
                     "exactly, --init-from starts a new run from a checkpoint's weights");
  // --resume auto without a config continues the run in the run directory: it must exist.
  if (req.resume == "auto" && req.config.empty() && !fs::exists(opts.out_dir))
    throw Error("--resume auto: the run directory '" + opts.out_dir + "' does not exist; give "
                "the --out of an earlier run, or --config FILE to start a run there from step 0");
}

// What a failed start-up says about the run directory: what it removed of a directory it
// created, or that an existing directory was kept (and whether --overwrite had already deleted
// the earlier run there).
std::string start_up_outcome(std::optional<RunDirectory>& run_dir, const std::string& out_dir) {
  const std::string what = run_dir ? run_dir->remove_start_up_files() : "";
  if (!what.empty()) return what;
  return "the run directory '" + out_dir + "' existed before and is kept" +
         (run_dir && run_dir->earlier_run_deleted()
              ? ", but --overwrite had already deleted the earlier run's checkpoints and "
                "snapshots there (its config.ini and token files may be this start-up's): start "
                "the run again, with --overwrite"
              : "");
}

// The start-up from a locked run directory on, and the run. `user_cfg`: the config read before
// the directory was locked (none when the run takes a checkpoint's own).
TrainSummary resolve_and_run(const TrainRequest& req, RunOptions& opts,
                             const std::optional<Config>& user_cfg, RunDirectory* run_dir) {
  std::string config_path = req.config;
  const int64_t auto_step = req.resume == "auto" ? resolve_resume_auto(opts, config_path) : -1;
  // Files in the run directory that wte did not write, and an earlier run's checkpoints, are
  // never replaced without --overwrite, and the input config is never the output
  // (train/run_directory.h); before any work.
  if (run_dir != nullptr)
    check_run_files(opts.out_dir, req.config, opts.resume, req.overwrite, opts.overwrite);
  // Without a config, a resumed run (or one from --init-from) takes the checkpoint's own resolved
  // config (paths absolute).
  const std::string own = !opts.resume.empty() ? opts.resume : opts.init_from;
  const Config cfg = user_cfg ? *user_cfg : usage_errors_of_overrides([&] {
    return (!own.empty() && config_path.empty())
               ? parse_config(read_checkpoint_info(own).config_ini,
                              "the config stored in '" + own + "'", req.overrides)
               : load_config(config_path, req.overrides, req.overrides_from);
  });
  TrainSummary summary;
  if (auto_step >= 0 && static_cast<uint64_t>(auto_step) >= cfg.train.steps) {
    // --resume auto of a run that already finished (e.g. killed after its last checkpoint):
    // nothing to do, and that is success.
    std::printf("--resume auto: the run in '%s' is complete (checkpoint %s at step %lld of "
                "train.steps = %zu); nothing to train\n",
                opts.out_dir.c_str(), opts.resume.c_str(), static_cast<long long>(auto_step),
                cfg.train.steps);
    if (run_dir != nullptr) run_dir->training_started();
    summary.already_complete = true;
    summary.last_checkpoint = opts.resume;
    summary.start_step = summary.finished_step = static_cast<size_t>(auto_step);
  } else {
    throw_if_stop_requested("start-up");
    summary = run_training(cfg, opts);
  }
  summary.out_dir = opts.out_dir;
  summary.earlier_run_deleted = run_dir != nullptr && run_dir->earlier_run_deleted();
  return summary;
}

}  // namespace

std::string default_run_directory(const TrainRequest& req) {
  if (!req.resume.empty() && req.resume != "auto") {
    const std::string dir = fs::path(req.resume).parent_path().string();  // the checkpoint's run
    return dir.empty() ? "." : dir;
  }
  if (req.resume == "auto" && req.config.empty())
    throw UsageError("--resume auto needs the run directory: give --out DIR (or --config FILE, "
                     "whose run directory is runs/<config name>)");
  const std::string name = !req.config.empty() ? fs::path(req.config).stem().string()
                           : !req.init_from.empty()
                               ? "from_" + fs::path(req.init_from).stem().string()
                               : std::string("default");
  return (fs::path("runs") / name).string();
}

TrainSummary train(const TrainRequest& req) {
  RunOptions opts = run_options(req);
  check_request(req, opts);
  // The user's config is read before the stop handlers and the run directory exist: one that
  // blocks (a FIFO nobody writes to) ends at the first Ctrl-C, and leaves nothing behind. A fresh
  // run without a config is the built-in defaults and the overrides: read here too, so a
  // mistyped key is reported before anything about the run directory.
  std::optional<Config> user_cfg;
  if (!req.config.empty() || (req.resume.empty() && req.init_from.empty()))
    user_cfg = usage_errors_of_overrides(
        [&] { return load_config(req.config, req.overrides, req.overrides_from); });
  // SIGINT/SIGTERM from before the directory exists: the start-up stops at its next stage and
  // removes what it made (train/signals.h), instead of dying and leaving it.
  const StopSignalScope stop_signals;
  // The run directory is locked from here to the end of the run (train/run_directory.h): a second
  // run on it fails now, before it reads or writes anything there. Under mpirun only rank 0
  // writes, so only rank 0 locks (and may create) the directory.
  std::optional<RunDirectory> run_dir;
  if (Comm::world().rank() == 0) run_dir.emplace(opts.out_dir);
  opts.run_dir = run_dir ? &*run_dir : nullptr;
  // What a second Ctrl-C/SIGTERM, which ends the process at once, leaves (train/signals.h).
  if (run_dir)
    set_second_signal_note(
        "wte train: stopped at once by a second signal, before step 1: nothing was trained; '" +
        opts.out_dir + "' may hold files the start-up wrote (config.ini, token files, a step-0 "
        "snapshot): " + (run_dir->created() ? "this run created it; remove it"
                                            : "remove them, or start again with --overwrite") +
        "\n");
  // An error from here until the first step has finished is a failed start-up: what it made in a
  // run directory it created is removed (only that: train/run_directory.h), and its message says
  // what.
  auto removed = [&run_dir]() -> std::string {
    const std::string what = run_dir ? run_dir->remove_start_up_files() : "";
    return what.empty() ? what : "; " + what;
  };
  try {
    return resolve_and_run(req, opts, user_cfg, opts.run_dir);
  } catch (const Interrupted& e) {
    throw Interrupted(e.signal(), std::string(e.what()) + "; " + start_up_outcome(run_dir, opts.out_dir));
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

}  // namespace wte
