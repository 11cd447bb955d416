// Start-up safety of a training run: the run directory's lock, removal of what a start-up that
// failed before its first step wrote (and only that), and the check that a run destroys nothing
// it should not (check_run_files). The files a run writes there: train/run_files.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wte/config.h"

namespace wte {

/// The run directory of one `wte train`, locked (flock, exclusive, on the directory itself) from
/// construction to destruction, so two runs never share an --out: a second `wte train` (a late
/// `--resume auto`, a fresh run) on a locked directory fails at once, before it reads or writes
/// anything there. The kernel drops the lock when the process ends in any way (SIGKILL included),
/// so a stale lock never blocks a resume.
/// If this object created the directory (and any missing parents), a start-up that fails before
/// training_started() removes exactly what it made: the files and directories recorded by
/// will_create as the start-up wrote them, by name, then each directory this object created,
/// innermost first, and each only while it is empty (rmdir, never a recursive removal). A parent
/// created for this run may meanwhile hold another run (`-o P/new/a` beside `-o P/new/b`), and
/// that run may create its directory there at any moment: rmdir of a directory that is not empty
/// fails and keeps it, so a failed start-up never removes a file it did not write.
class RunDirectory {
 public:
  /// Creates `dir` (and parents) if missing and locks it. A parent that another start-up's
  /// clean-up removes while this one creates the path is made again (a few attempts). Throws
  /// wte::Error naming the directory if it cannot be created or opened, or if another process
  /// holds its lock.
  explicit RunDirectory(const std::string& dir);
  /// Unless training_started() (or remove_start_up_files() already ran): remove_start_up_files().
  ~RunDirectory();
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  /// From now on the directory holds a run's outputs and is kept whatever happens.
  void training_started();
  const std::string& path() const { return dir_; }
  /// True if this object created the directory (it did not exist before).
  bool created() const { return created_; }
  /// Records that the run deleted an earlier run's checkpoints or snapshots here (--overwrite):
  /// a start-up that fails afterwards says so, since they cannot come back.
  void note_earlier_run_deleted() { earlier_run_deleted_ = true; }
  bool earlier_run_deleted() const { return earlier_run_deleted_; }

  /// Records that the start-up is about to create `path` (a file in the run directory or below
  /// it; with `directory`, a directory), so that a failed start-up removes it. Call it before the
  /// file is created, so a write cut short is removed too. Records nothing unless this object
  /// created the run directory, after training_started(), or if `path` exists already (then the
  /// start-up did not create it).
  void will_create(const std::string& path, bool directory = false);

  /// Removes what the start-up made (see the class), at most once, and returns what it did, for
  /// the error message: "removed the run directory 'D' it had created, with the 6 files the
  /// start-up had written there (config.ini, ...), and 'P/new', 'P', created for it", or what it
  /// kept and why ("kept 'P/new', created for it: it is not empty (it holds files this run did not
  /// write, such as another run's directory)"). "" if this object did not create the directory or
  /// training_started() was called.
  std::string remove_start_up_files();

 private:
  struct Made {
    std::string path;
    bool directory;
  };
  std::string dir_;
  int fd_ = -1;
  bool created_ = false;
  std::vector<std::string> created_dirs_;  // mkdir'd by this object, outermost first
  std::vector<Made> made_;                 // recorded by will_create, in order
  bool keep_ = false;
  bool cleaned_ = false;
  bool earlier_run_deleted_ = false;
};

/// The files and directories `wte train` writes into its run directory besides checkpoints and
/// snapshots: config.ini, metrics.csv, loss.svg, train.bin, val.bin, tokenizer (a directory).
const std::vector<std::string>& run_file_names();

/// True if `path` is a config file `wte train` wrote into a run directory: load_config of it,
/// written back by Config::to_ini, gives its bytes exactly. A config a user wrote (comments, keys
/// left at their defaults, another order) is not one; a missing or unparsable file is not either.
bool is_written_config(const std::string& path);

/// True if the checkpoint `checkpoint` lies directly in the run directory `dir` (any spelling:
/// same_file of its directory and `dir`): resuming it there continues that run's own files.
bool in_run_directory(const std::string& checkpoint, const std::string& dir);

/// Checks, before any work (data preparation included), that a run into the run directory `dir`
/// (--out) destroys nothing it should not. `user_config`: the --config the user gave ("" if none);
/// `resume`: the checkpoint the run continues ("" for a fresh run, --init-from included);
/// `overwrite`: --overwrite was given; `replace_earlier`: checkpoints and snapshots in `dir` may be
/// replaced (--overwrite, or --resume auto restarting a run that stopped before its first
/// checkpoint). Throws UsageError (exit status 2), naming the directory, the files and what
/// to do, if
///  - `user_config` is DIR/config.ini (the same file: device and inode, or canonical path), where
///    the run writes its resolved config: always, with --overwrite and on resume too, whatever
///    the file holds (a copy of a run's config.ini included): the input config is never the output;
///  - `resume` is in `dir` (in_run_directory) and `dir` holds checkpoints of later steps than
///    `resume`'s, unless `overwrite` (the trainer then deletes them): metrics.csv would be cut back
///    to the resumed step while they stay, and --resume auto would later pick the newest.
///    Throws wte::Error (exit 1, a broken file) if a row of DIR/metrics.csv that the resumed run
///    keeps (steps up to `resume`'s) does not read back (the loss curve would fail after the
///    whole run trained), naming the file, the line and what to do;
///  - the run is fresh or resumes a checkpoint of another directory, and `dir` holds
///    checkpoint_<step>.h5 or snapshot_<step>.h5 files, unless `replace_earlier` (the trainer
///    deletes them once every check has passed);
///  - the same, `dir` holds any of run_file_names() but no config.ini wte wrote, unless
///    `overwrite`. A directory an earlier run left before its first checkpoint holds one (wte
///    writes config.ini before the other files), and its files are replaced; an empty or new
///    directory passes.
void check_run_files(const std::string& dir, const std::string& user_config,
                     const std::string& resume, bool overwrite, bool replace_earlier);

/// remove_start_up_files() of the RunDirectory of this process whose start-up is in progress (it
/// created its directory and training has not started), "" if there is none: for an exit handler,
/// when a library ends the process during the start-up (train/omp_env.h, start_thread_team).
std::string remove_start_up_files_in_progress();

}  // namespace wte
