#include "train/run_files.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "src/io/file_checks.h"
#include "src/io/snapshot.h"
#include "train/metrics.h"
#include "train/run_directory.h"
#include "wte/checkpoint.h"
#include "wte/data.h"
#include "wte/error.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

// Deletes the oldest of the trainer's checkpoints in `dir` so that `keep` of those with a step
// <= `current` remain. Checkpoints of later steps (left by a run that went further before this one
// resumed from an earlier checkpoint) are not touched; *.tmp files are not checkpoints.
void prune_checkpoints(const std::string& dir, uint64_t current, size_t keep) {
  if (keep == 0) return;
  std::vector<std::pair<uint64_t, std::string>> older;
  for (const auto& c : list_checkpoints(dir))
    if (c.first <= current) older.push_back(c);
  if (older.size() <= keep) return;
  for (size_t i = 0; i + keep < older.size(); ++i) {
    std::error_code ec;
    fs::remove(older[i].second, ec);
    if (ec)
      std::fprintf(stderr, "wte train: warning: could not delete old checkpoint '%s': %s\n",
                   older[i].second.c_str(), ec.message().c_str());
  }
}

// The one sweep of unfinished writes: checkpoint_*.h5.tmp and snapshot_*.h5.tmp that a stopped
// run (Ctrl-C, a kill) left are garbage, never a checkpoint; every run removes them before it
// writes its own.
void remove_unfinished_writes(const std::string& out_dir, const Say& say) {
  for (const auto& e : fs::directory_iterator(out_dir)) {
    const std::string name = e.path().filename().string();
    if ((name.rfind("checkpoint_", 0) == 0 || name.rfind("snapshot_", 0) == 0) &&
        name.size() > 7 && name.compare(name.size() - 7, 7, ".h5.tmp") == 0) {
      say("removing '%s' (an unfinished write of a stopped run)\n", e.path().string().c_str());
      std::error_code ec;
      fs::remove(e.path(), ec);
    }
  }
}

// Resuming an older checkpoint in its own run directory with --overwrite (train/run_directory.h,
// check_run_files): the checkpoints of later steps are deleted, so the directory holds one run's
// history (metrics.csv is cut back to `step` too).
void remove_later_checkpoints(const RunOptions& opts, uint64_t step, const Say& say) {
  const std::string& out_dir = opts.out_dir;
  size_t removed = 0;
  for (const auto& c : list_checkpoints(out_dir)) {
    // Never the checkpoint being resumed, whatever step its name says.
    if (c.first <= step || io::same_file(c.second, opts.resume)) continue;
    std::error_code ec;
    fs::remove(c.second, ec);
    if (ec) throw Error("cannot delete '" + c.second + "' for --overwrite: " + ec.message());
    ++removed;
  }
  if (removed && opts.run_dir != nullptr) opts.run_dir->note_earlier_run_deleted();
  if (removed)
    say("--overwrite: deleted %zu checkpoint(s) of steps after %llu in '%s'\n", removed,
        static_cast<unsigned long long>(step), out_dir.c_str());
}

}  // namespace

void clear_earlier_run(const RunOptions& opts, const Say& say) {
  if (!fs::exists(opts.out_dir)) return;
  auto earlier = list_checkpoints(opts.out_dir);
  for (const auto& s : list_snapshots(opts.out_dir)) earlier.push_back(s);
  if (!earlier.empty() && !opts.overwrite)
    throw Error("run directory '" + opts.out_dir + "' already holds " +
                std::to_string(earlier.size()) + " checkpoint/snapshot file(s) of an earlier run "
                "(e.g. '" + earlier.back().second + "'); continue that run with --resume auto, "
                "choose another --out, or pass --overwrite to delete them and start over");
  for (const auto& e : earlier) {
    std::error_code ec;
    fs::remove(e.second, ec);
    if (ec) throw Error("cannot delete '" + e.second + "' for --overwrite: " + ec.message());
  }
  if (!earlier.empty()) {
    if (opts.run_dir != nullptr) opts.run_dir->note_earlier_run_deleted();
    say("%s: deleted %zu checkpoint/snapshot file(s) of an earlier run in '%s'\n",
        opts.overwrite_reason.c_str(), earlier.size(), opts.out_dir.c_str());
  }
}

std::ofstream write_run_files(const Config& cfg, const RunOptions& opts, const RunData& d,
                              size_t start_step, const Say& say, std::string* metrics_path,
                              double* elapsed_before) {
  fs::create_directories(opts.out_dir);
  const fs::path dir(opts.out_dir);
  // Each file is recorded before it is written (and the temporary name of an atomic write), so a
  // start-up that fails removes what it wrote, by name (RunDirectory::will_create).
  auto will_write = [&](const fs::path& path, bool atomic) {
    if (opts.run_dir == nullptr) return;
    opts.run_dir->will_create(path.string(), false);
    if (atomic) opts.run_dir->will_create(path.string() + ".tmp", false);
  };
  will_write(dir / "config.ini", true);
  write_file_atomic((dir / "config.ini").string(), cfg.to_ini());
  if (opts.run_dir != nullptr) opts.run_dir->will_create((dir / "tokenizer").string(), true);
  will_write(dir / "tokenizer" / "encoder.json", false);
  will_write(dir / "tokenizer" / "vocab.bpe", false);
  d.tokenizer.save((dir / "tokenizer").string());
  // Token files stay where they are (config.ini names them): only a stream tokenized at start-up
  // is written.
  if (!d.train_ids.mapped()) {
    will_write(dir / "train.bin", true);
    write_token_file((dir / "train.bin").string(), d.train_ids);
  }
  will_write(dir / "val.bin", true);
  write_token_file((dir / "val.bin").string(), d.val_ids);
  *metrics_path = (dir / "metrics.csv").string();
  will_write(*metrics_path, false);
  // Resumed in its own run directory: metrics.csv keeps its rows up to the checkpoint's step.
  // Resumed into another directory: that directory's metrics.csv (if any) is not this run's.
  const bool resuming = !opts.resume.empty();
  const bool continuing = resuming && in_run_directory(opts.resume, opts.out_dir);
  if (continuing) *elapsed_before = truncate_metrics(*metrics_path, start_step, metrics_header());
  remove_unfinished_writes(opts.out_dir, say);
  if (continuing && opts.overwrite) remove_later_checkpoints(opts, start_step, say);
  std::ofstream metrics(*metrics_path, continuing ? std::ios::app : std::ios::trunc);
  if (!metrics) throw Error("cannot create '" + *metrics_path + "'");
  metrics.precision(9);  // float32 losses round-trip exactly
  if (!continuing) metrics << metrics_header();
  return metrics;
}

void will_write_snapshot(const RunOptions& opts, size_t step) {
  if (opts.run_dir == nullptr) return;
  opts.run_dir->will_create(snapshot_path(opts.out_dir, step), false);
  opts.run_dir->will_create(snapshot_path(opts.out_dir, step) + ".tmp", false);
}

void write_checkpoint(const Config& cfg, const RunOptions& opts, const Model& model,
                      const AdamW& optimizer, const RunData& d, const BatchLoader& loader,
                      size_t done, float lr, TrainSummary* summary) {
  summary->last_checkpoint = checkpoint_path(opts.out_dir, done);
  ResumeState rs;
  rs.data = loader.state();
  rs.train_tokens = d.train_ids.size();
  rs.val_tokens = d.val_ids.size();
  rs.train_tokens_fnv1a64 = d.train_hash;
  rs.val_tokens_fnv1a64 = d.val_hash;
  rs.total_steps = cfg.train.steps;
  rs.lr = lr;
  const auto t_save = Clock::now();
  save_checkpoint(summary->last_checkpoint, model, &optimizer, d.tokenizer, cfg,
                  static_cast<int64_t>(done), &rs);
  summary->checkpoint_seconds += seconds_since(t_save);
  summary->checkpoints_written += 1;
  prune_checkpoints(opts.out_dir, done, cfg.checkpoint.keep_last);
}

}  // namespace wte
