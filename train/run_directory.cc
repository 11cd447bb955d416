#include "train/run_directory.h"
#include "train/metrics_file.h"

#include <fcntl.h>
#include <omp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/analysis/loss_curve.h"
#include "src/io/bounded_read.h"
#include "src/io/file_checks.h"
#include "src/io/hdf5_util.h"
#include "src/io/snapshot.h"
#include "train/metrics.h"
#include "src/model/unembedding.h"
#include "wte/checkpoint.h"
#include "wte/data.h"
#include "wte/error.h"

namespace fs = std::filesystem;

namespace wte {

namespace {

// The RunDirectory of the start-up in progress (one per process; null once training started):
// what the exit handler of start_thread_team cleans up when libgomp ends the process.
RunDirectory* g_start_up = nullptr;

// Creates `dir` with mkdir(2), and first its missing parents, appending each directory this call
// created (mkdir succeeded) to `made`, outermost first. A directory that exists is used as it is
// (and not appended). A parent that vanishes between its creation or discovery and the mkdir of
// the directory in it (ENOENT: another start-up's clean-up removed it while it was empty) is made
// again, a few times. Throws wte::Error naming `what` and the directory that failed.
void make_directories(const fs::path& dir, std::vector<std::string>* made,
                      const std::string& what) {
  for (int attempt = 0;; ++attempt) {
    if (::mkdir(dir.c_str(), 0777) == 0) {
      made->push_back(dir.string());
      return;
    }
    const int err = errno;
    std::error_code ec;
    if (err == EEXIST) {
      if (fs::is_directory(dir, ec)) return;
      throw Error(what + " cannot be created: '" + dir.string() +
                  "' exists and is not a directory");
    }
    const fs::path parent = dir.parent_path();
    if (err != ENOENT || attempt == 8 || parent.empty() || parent == dir)
      throw Error(what + " cannot be created: mkdir '" + dir.string() + "': " + std::strerror(err));
    make_directories(parent, made, what);
  }
}

// "a, b, c" (each quoted when `quote`), at most `max` then "... (N in all)".
std::string name_list(const std::vector<std::string>& names, bool quote, size_t max = 8) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < max; ++i)
    out += (i ? ", " : "") + (quote ? "'" + names[i] + "'" : names[i]);
  if (names.size() > max) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

std::string count_of(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

RunDirectory::RunDirectory(const std::string& dir) : dir_(dir) {
  // "new/a/" is made (and recorded) as "new/a".
  std::string made = dir;
  while (made.size() > 1 && made.back() == '/') made.pop_back();
  make_directories(made, &created_dirs_, "run directory (--out) '" + dir + "'");
  // Created here only if the last mkdir was the directory itself; parents made for a path that
  // ends in "." or ".." ("new/..") are recorded, but the directory existed before.
  created_ = !created_dirs_.empty() && created_dirs_.back() == made;
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    const std::string why = std::strerror(errno);
    remove_start_up_files();
    throw Error("run directory (--out) '" + dir + "' cannot be opened: " + why);
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    // Not removed, even if this object made it: the process holding the lock (which found it
    // existing a moment after this one created it) is using it, and may not have written into it
    // yet.
    cleaned_ = true;
    if (err == EWOULDBLOCK)
      throw Error("run directory '" + dir + "' is in use: another wte train holds its lock (a run "
                  "in progress, or one starting). Two runs in one directory would overwrite each "
                  "other's checkpoints and metrics; wait for it to finish (then --resume auto "
                  "continues it) or choose another --out");
    throw Error("run directory '" + dir + "' cannot be locked: " + std::strerror(err));
  }
  // A checkpoint-validation child (a fork) would share the lock and keep it after this process
  // died: it closes this descriptor at once.
  hdf5::close_in_isolated_children(fd_);
  if (created_) g_start_up = this;
}

RunDirectory::~RunDirectory() {
  remove_start_up_files();  // a start-up that failed leaves nothing it made
  if (g_start_up == this) g_start_up = nullptr;
  if (fd_ >= 0) {
    hdf5::keep_in_isolated_children(fd_);
    ::close(fd_);  // releases the lock
  }
}

void RunDirectory::training_started() {
  keep_ = true;
  if (g_start_up == this) g_start_up = nullptr;
}

void RunDirectory::will_create(const std::string& path, bool directory) {
  if (!created_ || keep_ || cleaned_) return;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(path, ec))) return;  // there before: not the start-up's
  made_.push_back({path, directory});
}

std::string RunDirectory::remove_start_up_files() {
  if (keep_ || cleaned_) return "";
  cleaned_ = true;
  if (!created_) {
    // The directory existed: nothing of it is removed. Parents made for a path ending in "." or
    // ".." are removed if still empty (none holds the run's files).
    for (auto it = created_dirs_.rbegin(); it != created_dirs_.rend(); ++it) ::rmdir(it->c_str());
    return "";
  }
  // The recorded files and directories, newest first (a directory's files before it): unlink(2)
  // a file, rmdir(2) a directory (only if empty). A name that was recorded but never written is
  // skipped.
  std::vector<std::string> removed, failed;
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
    const int rc = it->directory ? ::rmdir(it->path.c_str()) : ::unlink(it->path.c_str());
    const std::string name = fs::path(it->path).lexically_relative(dir_).string();
    if (rc == 0) {
      if (!it->directory) removed.push_back(name);
    } else if (errno != ENOENT) {
      failed.push_back("'" + name + "' (" + std::strerror(errno) + ")");
    }
  }
  std::reverse(removed.begin(), removed.end());  // in the order they were written
  std::reverse(failed.begin(), failed.end());
  // Then the directories this object created, innermost first, each only if empty.
  std::vector<std::string> parents_removed, parents_kept, parents_failed;
  bool dir_removed = false;
  std::string dir_kept_why;
  for (auto it = created_dirs_.rbegin(); it != created_dirs_.rend(); ++it) {
    const bool is_dir = it == created_dirs_.rbegin();  // created_: the last one made is dir_
    if (::rmdir(it->c_str()) == 0) {
      if (is_dir) dir_removed = true;
      else parents_removed.push_back(*it);
      continue;
    }
    const int err = errno;
    const bool not_empty = err == ENOTEMPTY || err == EEXIST;
    if (is_dir)
      dir_kept_why = not_empty ? "it holds files this run did not write" : std::strerror(err);
    else if (not_empty)
      parents_kept.push_back(*it);
    else
      parents_failed.push_back("'" + *it + "' (" + std::strerror(err) + ")");
  }
  const std::string files =
      removed.empty() ? std::string()
                      : count_of(removed.size(), "file", "files") + " the start-up had written (" +
                            name_list(removed, false) + ")";
  std::string out;
  if (dir_removed)
    out = "removed the run directory '" + dir_ + "' it had created" +
          (files.empty() ? std::string(" (empty)") : ", with the " + files);
  else
    out = (files.empty() ? std::string("removed no file") : "removed the " + files) +
          "; kept the run directory '" + dir_ + "' it had created: " + dir_kept_why;
  if (!parents_removed.empty())
    out += ", and " + name_list(parents_removed, true) + ", created for it";
  if (!failed.empty()) out += "; could not remove " + name_list(failed, false);
  if (!parents_kept.empty())
    out += "; kept " + name_list(parents_kept, true) + ", created for it: " +
           (parents_kept.size() == 1 ? "it is" : "they are") + " not empty (" +
           (dir_removed ? "files this run did not write, such as another run's directory)"
                        : "the kept run directory is inside)");
  if (!parents_failed.empty())
    out += "; could not remove " + name_list(parents_failed, false) + ", created for it";
  return out;
}

std::string remove_start_up_files_in_progress() {
  return g_start_up != nullptr ? g_start_up->remove_start_up_files() : "";
}

const std::vector<std::string>& run_file_names() {
  static const std::vector<std::string> names = {"config.ini", "metrics.csv", "loss.svg",
                                                 "train.bin",  "val.bin",     "tokenizer"};
  return names;
}

bool is_written_config(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  try {
    return load_config(path, {}).to_ini() == read_text_file(path);
  } catch (const Error&) {
    return false;
  }
}

bool in_run_directory(const std::string& checkpoint, const std::string& dir) {
  std::string parent = fs::path(checkpoint).parent_path().string();
  if (parent.empty()) parent = ".";
  return io::same_file(parent, dir);
}

std::string read_resumed_metrics(const std::string& path, uint64_t step) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return "";
  const uint64_t rows = std::min<uint64_t>(step, UINT64_MAX / kMetricsRowBytes - 2) + 1;
  return without_torn_line(read_regular_file_prefix(path, rows * kMetricsRowBytes));
}

namespace {

// "a, b, c" of the file names of `files` (pairs of step and path), at most 6 then "... (N in all)".
std::string file_list(const std::vector<std::pair<uint64_t, std::string>>& files) {
  std::string out;
  for (size_t i = 0; i < files.size() && i < 6; ++i)
    out += (i ? ", " : "") + fs::path(files[i].second).filename().string();
  if (files.size() > 6) out += ", ... (" + std::to_string(files.size()) + " in all)";
  return out;
}

// The rows of metrics.csv at `path` that a run resumed at `step` keeps (the trainer's
// truncate_metrics: steps 1..step, under the header it writes) must read back as the loss curve
// reads them; checked before any work, or the run would train every step and then fail.
void check_resumed_metrics(const std::string& path, uint64_t step) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  std::istringstream in(read_resumed_metrics(path, step));
  std::string line, kept = metrics_header();
  std::getline(in, line);  // the header, rewritten
  while (std::getline(in, line)) {
    const uint64_t row_step = std::strtoull(line.c_str(), nullptr, 10);
    if (row_step >= 1 && row_step <= step) kept += line;
    kept += '\n';  // a dropped row stays an empty line: the line numbers stay the file's
  }
  try {
    parse_loss_rows(kept, path);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "; resuming at step " + std::to_string(step) +
                " keeps metrics.csv's rows up to that step and draws loss.svg from them: repair "
                "or delete that line (or move metrics.csv away: the resumed run then starts a new "
                "one)");
  }
}

}  // namespace

void check_run_files(const std::string& dir, const std::string& user_config,
                     const std::string& resume, bool overwrite, bool replace_earlier) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;  // created by this run (or refused elsewhere)
  const fs::path run_config = fs::path(dir) / "config.ini";
  if (!user_config.empty() && fs::exists(run_config, ec) &&
      io::same_file(user_config, run_config.string()))
    throw UsageError(
        "--config '" + user_config + "' is the run directory's config.ini (--out '" + dir +
        "'), where the run writes its resolved config (every key, no comments): that would "
        "replace your config file. Copy it out of '" + dir + "' and give the copy, or choose "
        "another --out" + (resume.empty() ? std::string()
                                          : "; to continue the run there as it was, give --resume "
                                            "auto --out " + dir + " without --config"));
  if (!resume.empty() && in_run_directory(resume, dir)) {
    // Resuming in the checkpoint's own run directory: its files are the run's. Checkpoints of
    // later steps would stay beside a metrics.csv cut back to the resumed step.
    int64_t step = -1;
    try {
      step = read_checkpoint_info(resume).step;
    } catch (const Cancelled&) {
      throw;
    } catch (const Error&) {
      return;  // reported by the resume's own checks
    }
    // Later by their stored steps, among the checkpoints that validate (each read in a child
    // process first: a damaged one is not a later checkpoint, and cannot crash this process);
    // file names are not trusted, and the resumed file itself is never later than itself.
    std::vector<std::pair<uint64_t, std::string>> newer;
    for (const auto& c : list_checkpoints(dir)) {
      if (io::same_file(c.second, resume)) continue;
      try {
        validate_checkpoint_isolated(c.second);
        const int64_t stored = read_checkpoint_info(c.second).step;
        if (stored > step) newer.emplace_back(static_cast<uint64_t>(stored), c.second);
      } catch (const Cancelled&) {
        throw;
      } catch (const Error&) {
        // Broken: --resume auto reports it; it is not a checkpoint to continue from.
      }
    }
    if (newer.empty() || overwrite) {
      check_resumed_metrics((fs::path(dir) / "metrics.csv").string(), static_cast<uint64_t>(step));
      return;
    }
    throw UsageError(
        "--resume '" + resume + "' is the checkpoint of step " + std::to_string(step) +
        ", but its run directory '" + dir + "' also holds " + std::to_string(newer.size()) +
        " checkpoint(s) of later steps (" + file_list(newer) + "): resuming there would cut "
        "metrics.csv back to step " + std::to_string(step) + " while they stay, and --resume auto "
        "would later continue from the newest. Continue the newest with --resume auto --out " +
        dir + ", resume into another directory with --out DIR, or pass --overwrite to delete the "
        "later checkpoint(s) once every check has passed");
  }
  // A fresh run, or a resumed one writing into another directory: as a fresh run.
  if (!replace_earlier) {
    auto earlier = list_checkpoints(dir);
    for (const auto& s : list_snapshots(dir)) earlier.push_back(s);
    if (!earlier.empty())
      throw UsageError(
          "run directory (--out) '" + dir + "' already holds " + std::to_string(earlier.size()) +
          " checkpoint/snapshot file(s) of an earlier run (" + file_list(earlier) + "); continue "
          "that run with --resume auto --out " + dir + ", choose another --out, or pass "
          "--overwrite to delete them and start over");
  }
  if (overwrite || is_written_config(run_config.string())) return;
  std::string present;
  for (const std::string& name : run_file_names())
    if (fs::exists(fs::symlink_status(fs::path(dir) / name, ec)))
      present += (present.empty() ? "" : ", ") + name;
  if (present.empty()) return;
  throw UsageError(
      "run directory (--out) '" + dir + "' holds " + present +
      ", which a run writes, and no config.ini of an earlier wte run: " +
      (resume.empty() ? "a fresh run" : "a run resumed into it") + " would replace "
      "them. Choose another --out, remove them, or pass --overwrite to replace them");
}

}  // namespace wte
