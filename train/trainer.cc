#include "train/trainer.h"

#include <omp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <array>
#include <charconv>
#include <cmath>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "src/profile/clock.h"
#include "src/analysis/loss_curve.h"
#include "src/io/file_checks.h"
#include "src/io/snapshot.h"
#include "train/distributed/grad_sync.h"
#include "train/omp_env.h"
#include "src/model/memory_plan.h"
#include "train/run_directory.h"
#include "train/start_checks.h"
#include "train/signals.h"
#include "wte/tokenizer.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

std::string format_duration(double s) {
  char buf[32];
  const long total = static_cast<long>(s + 0.5);
  if (total >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", total / 3600, (total / 60) % 60);
  else if (total >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", total / 60, total % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", total);
  return buf;
}

// Time spent in evaluate(), to put the evaluations still to come into the ETA.
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

// Mean next-token loss over the non-overlapping (T+1)-windows of `tokens`, at most max_windows of
// them, in order, B windows per forward. Returns nats/token.
double evaluate(Model& model, const TokenStream& tokens, size_t T, size_t B,
                size_t max_windows) {
  const size_t windows = std::min(max_windows, (tokens.size() - 1) / T);
  std::vector<int32_t> inputs(B * T), targets(B * T);
  std::vector<float> losses(B * T);
  std::vector<int32_t> window(T + 1);
  double total = 0.0;
  size_t count = 0;
  for (size_t w = 0; w < windows; w += B) {
    const size_t b_now = std::min(B, windows - w);
    for (size_t b = 0; b < b_now; ++b) {
      tokens.read((w + b) * T, T + 1, window.data());
      std::copy(window.begin(), window.begin() + static_cast<long>(T), inputs.begin() + static_cast<long>(b * T));
      std::copy(window.begin() + 1, window.end(), targets.begin() + static_cast<long>(b * T));
    }
    model.forward_losses(inputs.data(), targets.data(), b_now, T, losses.data());
    for (size_t i = 0; i < b_now * T; ++i) total += losses[i];
    count += b_now * T;
  }
  return total / static_cast<double>(count);
}

// The SIGINT/SIGTERM any rank received (0: none), the same on every rank: ranks that stopped
// at different steps would wait forever in the next step's collectives. One rank: stop_signal().
int agreed_stop_signal(Comm& comm) {
  int sig = stop_signal();
  if (comm.size() == 1) return sig;
  std::vector<int> all(static_cast<size_t>(comm.size()));
  comm.allgather(&sig, sizeof sig, all.data());
  return *std::max_element(all.begin(), all.end());
}

// "writing 'PATH' failed: <errno text>", for a stream write that failed (disk full, I/O error).
std::string write_failed(const std::string& path) {
  const int err = errno;
  return "writing '" + path + "' failed: " +
         (err != 0 ? std::string(std::strerror(err)) : std::string("I/O error")) +
         (err == ENOSPC ? " (the disk is full)" : "") + "; the run stops (its last checkpoint is whole)";
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// metrics.csv of a resumed run: the header and the rows of steps <= `step` (rows a stopped run
// wrote after its last checkpoint are dropped; the resumed run writes them again), rewritten
// atomically. A missing file gets just the header. A last line without its newline is a row cut
// by a kill in mid-write (wte ends every row with one): dropped, whatever step it seems to name.
// Returns the elapsed_s of the last row kept (0 if none): the resumed run's elapsed_s goes on
// from there, so the column is the run's time across resumes.
double truncate_metrics(const std::string& path, uint64_t step, const std::string& header) {
  std::string kept = header;
  double elapsed = 0;
  if (fs::exists(path)) {
    std::istringstream in(without_torn_line(read_text_file(path)));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const uint64_t row_step = std::strtoull(line.c_str(), nullptr, 10);
      if (row_step >= 1 && row_step <= step) {
        kept += line + "\n";
        size_t pos = 0;  // elapsed_s: the 7th column
        for (int col = 0; col < 6 && pos != std::string::npos; ++col) pos = line.find(',', pos + 1);
        if (pos != std::string::npos) elapsed = std::strtod(line.c_str() + pos + 1, nullptr);
      }
    }
  }
  write_file_atomic(path, kept);
  return std::isfinite(elapsed) && elapsed > 0 ? elapsed : 0;
}

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

// --- Data ---------------------------------------------------------------------------------------

// The run's tokenizer and token streams, every id checked.
struct RunData {
  Tokenizer tokenizer;
  TokenStream train_ids, val_ids;  // memory-mapped when read from token files
  uint64_t train_hash = 0, val_hash = 0;
  size_t train_bytes = 0;  // bytes of the train split's text (0 from token files)
  Clock::time_point t_prep;
};

// Splits, tokenizes (or reads token files) and checks every id before any compute. Resuming, the
// checkpoint's tokenizer is always the one used, and the data must hash as the checkpoint's.
// With --init-from (ckpt set, opts.resume empty) the checkpoint's tokenizer is used the same way
// (its ids index the checkpoint's wte), but the data may be any.
RunData prepare_data(const Config& cfg, const RunOptions& opts, const CheckpointInfo* ckpt,
                     const Say& say) {
  const bool resuming = !opts.resume.empty();
  const std::string source = resuming ? opts.resume : opts.init_from;
  const std::string cannot = resuming ? "cannot resume from '" + source + "'"
                                      : "cannot start from --init-from '" + source + "'";
  const size_t T = cfg.data.seq_len, V = cfg.model.vocab_size;
  const bool from_token_files = !cfg.data.train_tokens.empty();
  RunData d;
  d.t_prep = Clock::now();
  if (ckpt != nullptr) {
    // The checkpoint's tokenizer, always: a tokenizer directory must hold the same one; with
    // data.tokenizer = train, BPE is not trained again.
    d.tokenizer = Tokenizer::from_strings(ckpt->encoder_json, ckpt->vocab_bpe,
                                          "the tokenizer stored in '" + source + "'");
    if (cfg.data.tokenizer != "train") {
      const Tokenizer dir_tok = Tokenizer::load(cfg.data.tokenizer);
      if (dir_tok.encoder_json() != ckpt->encoder_json || dir_tok.vocab_bpe() != ckpt->vocab_bpe)
        throw Error(cannot + ": tokenizer: data.tokenizer '" +
                    cfg.data.tokenizer + "' holds another vocabulary than the checkpoint's (" +
                    std::to_string(dir_tok.size()) + " tokens, " +
                    std::to_string(dir_tok.num_merges()) + " merges, vs " +
                    std::to_string(d.tokenizer.size()) + " tokens, " +
                    std::to_string(d.tokenizer.num_merges()) + " merges, or the same sizes with "
                    "other contents)");
    }
  }
  if (from_token_files) {
    if (ckpt == nullptr) d.tokenizer = Tokenizer::load(cfg.data.tokenizer);
    d.train_ids = TokenStream::open(cfg.data.train_tokens, "data.train_tokens");
    d.val_ids = TokenStream::open(cfg.data.val_tokens, "data.val_tokens");
    throw_if_stop_requested("data preparation (reading the token files)");
    say("data: %zu train tokens from %s, %zu validation tokens from %s\n", d.train_ids.size(),
        cfg.data.train_tokens.c_str(), d.val_ids.size(), cfg.data.val_tokens.c_str());
  } else {
    const std::string text = read_text_file(cfg.data.text);
    const TextSplit split = split_documents(text, cfg.data.val_fraction);
    throw_if_stop_requested("data preparation (reading data.text)");
    say("data: %s, %zu bytes, %zu train / %zu validation documents\n", cfg.data.text.c_str(),
        text.size(), split.train_documents, split.val_documents);
    if (ckpt != nullptr) {
      say("tokenizer: the checkpoint's (%zu tokens)\n", d.tokenizer.size());
    } else if (cfg.data.tokenizer == "train") {
      say("tokenizer: training byte-level BPE to vocab_size %zu on the train split...\n", V);
      // Checked every 256 merges: Ctrl-C need not wait for the whole BPE training.
      d.tokenizer = Tokenizer::train(split.train, V, [](size_t, size_t) {
        throw_if_stop_requested("data preparation (training the BPE tokenizer)");
      });
    } else {
      d.tokenizer = Tokenizer::load(cfg.data.tokenizer);
    }
    d.train_bytes = split.train.size();
    if (d.tokenizer.size() == V) {
      d.train_ids = TokenStream(d.tokenizer.encode(split.train));
      d.val_ids = TokenStream(d.tokenizer.encode(split.val));
      throw_if_stop_requested("data preparation (encoding the corpus)");
    }
  }
  if (d.tokenizer.size() != V)
    throw Error("the tokenizer has " + std::to_string(d.tokenizer.size()) +
                " tokens but model.vocab_size = " + std::to_string(V) +
                "; they must be equal (set model.vocab_size = " +
                std::to_string(d.tokenizer.size()) + ")");
  check_token_ids(d.train_ids, V,
                  from_token_files ? "data.train_tokens '" + cfg.data.train_tokens + "'"
                                   : std::string("the encoded train split"));
  check_token_ids(d.val_ids, V,
                  from_token_files ? "data.val_tokens '" + cfg.data.val_tokens + "'"
                                   : std::string("the encoded validation split"));
  if (d.val_ids.size() < T + 1)
    throw Error("the validation split has " + std::to_string(d.val_ids.size()) +
                " tokens, fewer than data.seq_len + 1 = " + std::to_string(T + 1));
  d.train_hash = fnv1a64(d.train_ids);
  d.val_hash = fnv1a64(d.val_ids);
  if (ckpt != nullptr && resuming) {
    const ResumeState& rs = ckpt->resume;
    std::string diffs;
    auto compare = [&](const char* which, uint64_t n_then, uint64_t h_then, uint64_t n_now,
                       uint64_t h_now) {
      if (n_then != n_now || h_then != h_now)
        diffs += std::string("\n  dataset (") + which + " tokens): checkpoint " +
                 std::to_string(n_then) + " tokens, fnv1a64 " + hex64(h_then) + ", now " +
                 std::to_string(n_now) + " tokens, fnv1a64 " + hex64(h_now);
    };
    compare("train", rs.train_tokens, rs.train_tokens_fnv1a64, d.train_ids.size(), d.train_hash);
    compare("validation", rs.val_tokens, rs.val_tokens_fnv1a64, d.val_ids.size(), d.val_hash);
    if (!diffs.empty())
      throw Error("cannot resume from '" + opts.resume +
                  "': the data differs from the data the checkpoint was trained on:" + diffs);
  }
  return d;
}

// --- The run directory --------------------------------------------------------------------------

// A fresh run never mixes with an earlier run's checkpoints: `--resume auto` would later pick the
// newest of them, which may belong to the other run. With --overwrite they are deleted.
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
  // An unfinished write of an interrupted run (Ctrl-C, a kill) is garbage, never a checkpoint.
  for (const auto& e : fs::directory_iterator(opts.out_dir)) {
    const std::string name = e.path().filename().string();
    if ((name.rfind("checkpoint_", 0) == 0 || name.rfind("snapshot_", 0) == 0) &&
        name.size() > 7 && name.compare(name.size() - 7, 7, ".h5.tmp") == 0) {
      std::error_code ec;
      fs::remove(e.path(), ec);
    }
  }
  if (!earlier.empty()) {
    if (opts.earlier_run_deleted) *opts.earlier_run_deleted = true;
    say("%s: deleted %zu checkpoint/snapshot file(s) of an earlier run in '%s'\n",
        opts.overwrite_reason.c_str(), earlier.size(), opts.out_dir.c_str());
  }
}

// Resuming: a checkpoint write a stopped run left unfinished is garbage, never a checkpoint.
void remove_unfinished_checkpoints(const std::string& out_dir, const Say& say) {
  for (const auto& e : fs::directory_iterator(out_dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint_", 0) == 0 && name.size() > 7 &&
        name.compare(name.size() - 7, 7, ".h5.tmp") == 0) {
      say("removing '%s' (an unfinished checkpoint write of a stopped run)\n",
          e.path().string().c_str());
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
  if (removed && opts.earlier_run_deleted) *opts.earlier_run_deleted = true;
  if (removed)
    say("--overwrite: deleted %zu checkpoint(s) of steps after %llu in '%s'\n", removed,
        static_cast<unsigned long long>(step), out_dir.c_str());
}

const char* const kMetricsHeader = metrics_header();

// Everything a later tool needs to read this run: config.ini, tokenizer/, train.bin, val.bin, and
// metrics.csv opened for appending (a resumed run keeps its rows up to the checkpoint's step).
std::ofstream write_run_files(const Config& cfg, const RunOptions& opts, const RunData& d,
                              size_t start_step, const Say& say, std::string* metrics_path,
                              double* elapsed_before) {
  fs::create_directories(opts.out_dir);
  const fs::path dir(opts.out_dir);
  // Each file is recorded before it is written (and the temporary name of an atomic write), so a
  // start-up that fails removes what it wrote, by name (RunOptions::will_create).
  auto will_write = [&](const fs::path& path, bool atomic) {
    if (!opts.will_create) return;
    opts.will_create(path.string(), false);
    if (atomic) opts.will_create(path.string() + ".tmp", false);
  };
  will_write(dir / "config.ini", true);
  write_file_atomic((dir / "config.ini").string(), cfg.to_ini());
  if (opts.will_create) opts.will_create((dir / "tokenizer").string(), true);
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
  if (resuming) {
    if (continuing) *elapsed_before = truncate_metrics(*metrics_path, start_step, kMetricsHeader);
    remove_unfinished_checkpoints(opts.out_dir, say);
    if (continuing && opts.overwrite) remove_later_checkpoints(opts, start_step, say);
  }
  std::ofstream metrics(*metrics_path, continuing ? std::ios::app : std::ios::trunc);
  if (!metrics) throw Error("cannot create '" + *metrics_path + "'");
  metrics.precision(9);  // float32 losses round-trip exactly
  if (!continuing) metrics << kMetricsHeader;
  return metrics;
}

// Bytes resident in this process now (VmRSS of /proc/self/status), 0 if unreadable.
size_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      size_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

// Sizes the model's buffers for micro-batches of B sequences of T (the memory plan's shape), runs
// one warm-up forward and backward on a batch of token 0 (so oneDNN creates its primitives and
// scratch now: the first step's numbers are unchanged, since the parameters are not touched and
// every step starts with zero_grad), and prints what the run holds in memory: the plan's parts
// (src/model/memory_plan.h, the same bytes the start-up check estimated), what was resident
// before the model existed (`before`, measured: the program and its libraries, the tokenizer,
// the token streams), what the warm-up added beyond the plan (measured: oneDNN's primitives, JIT
// code and scratch, the threads' stacks), and their total.
void print_memory(Model& model, const Config& cfg, size_t B, size_t T, size_t before,
                  const Say& say) {
  const PlanShape shape = training_plan_shape(cfg);
  model.reserve(B, T, shape.micro_batches);
  const MemoryPlan plan = plan_memory(cfg.model, shape);
  {
    const std::vector<int32_t> zeros(B * T, 0);
    model.zero_grad();
    model.forward(zeros.data(), zeros.data(), B, T);
    model.backward();
    model.zero_grad();
  }
  const size_t after = resident_bytes();
  const size_t beyond = after > before + plan.bytes() ? after - before - plan.bytes() : 0;
  const double mb = 1.0 / (1024.0 * 1024.0);
  auto part = [&](const std::string& name) { return static_cast<double>(plan.part_bytes(name)) * mb; };
  char loss_text[128];
  const size_t V = model.config().vocab_size;
  double loss = 0;
  if (model.loss_rows() > 0) {
    std::snprintf(loss_text, sizeof loss_text, "fused: %zu rows x %zu ids", model.loss_rows(), V);
    loss = part("loss workspace (fused, " + std::to_string(model.loss_rows()) + " rows x vocab_size)");
  } else {
    std::snprintf(loss_text, sizeof loss_text, "unfused: logits %zu x %zu", B * T, V);
    loss = part("logits of one step");
  }
  const double params = part("parameters") + part("bf16 copy of the parameters");
  const double grads = part("gradients"), adamw = part("AdamW m and v");
  const double total = static_cast<double>(plan.bytes()) * mb;
  const double acts = part("hidden states of one step") + part("block activations of one step") +
                      part("bf16 copies of one step's GEMM inputs");
  const double other = total - params - grads - adamw - acts - loss;
  const double outside = static_cast<double>(before) * mb;
  const double onednn = static_cast<double>(beyond) * mb;
  say("memory: parameters %.1f MiB, gradients %.1f MiB, AdamW m and v %.1f MiB, activations "
      "%.1f MiB (B %zu, T %zu per micro-batch), loss workspace %.1f MiB (%s), other buffers "
      "%.1f MiB; planned %.1f MiB + resident before the model %.1f MiB (program, libraries, "
      "tokenizer, tokens) + beyond the plan after a warm-up pass %.1f MiB (oneDNN primitives "
      "and scratch, threads) = total %.1f MiB\n",
      params, grads, adamw, acts, B, T, loss, loss_text, other, total, outside, onednn,
      total + outside + onednn);
}

// --- The step -----------------------------------------------------------------------------------

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

// Test hook: WTE_TEST_TRACE_SAMPLES=FILE appends "step epoch:sample ..." per step (the batch
// order, so a test can compare runs and count samples per epoch).
class SampleTrace {
 public:
  explicit SampleTrace(bool enabled) {
    const char* path = std::getenv("WTE_TEST_TRACE_SAMPLES");
    if (path != nullptr && enabled) out_.open(path, std::ios::app);
  }
  // Where the loader should report the samples it served (nullptr: tracing is off).
  std::vector<std::array<uint64_t, 2>>* served() {
    served_.clear();
    return out_.is_open() ? &served_ : nullptr;
  }
  void write(size_t step) {
    if (!out_.is_open()) return;
    out_ << step;
    for (const auto& es : served_) out_ << ' ' << es[0] << ':' << es[1];
    out_ << '\n' << std::flush;
  }

 private:
  std::ofstream out_;
  std::vector<std::array<uint64_t, 2>> served_;
};

// --- Logging and checkpoints --------------------------------------------------------------------

// `eval_seconds_left`: what the evaluations still to come will take (EvalClock), part of the ETA.
void log_step(std::ofstream& metrics, const Say& say, const Config& cfg, size_t done,
              size_t start_step, const StepResult& r, double val_loss, double tok_s,
              double step_seconds, double elapsed, bool force_line, int ranks,
              double eval_seconds_left) {
  metrics << done << ',' << r.loss << ',';
  if (val_loss >= 0) {  // exactly (shortest round-trip form): `wte eval` reproduces it
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, val_loss).ptr;
    metrics.write(buf, end - buf);
  }
  metrics << ',' << r.lr << ',' << r.grad_norm << ',' << tok_s << ',' << elapsed << ',' << ranks
          << '\n';
  if (done % cfg.train.log_interval == 0 || force_line || done == 1) {
    const double eta = step_seconds / static_cast<double>(done - start_step) *
                           static_cast<double>(cfg.train.steps - done) +
                       eval_seconds_left;
    char val_text[32] = "";
    if (val_loss >= 0) std::snprintf(val_text, sizeof val_text, " | val %.4f", val_loss);
    say("step %6zu/%zu | loss %.4f%s | lr %.2e | norm %.3f | %.1fk tok/s | ETA %s\n", done,
        cfg.train.steps, r.loss, val_text, r.lr, r.grad_norm, tok_s / 1000.0,
        format_duration(eta).c_str());
    metrics.flush();
  }
}

// Writes checkpoint_<done>.h5 with everything an exact resume needs, then prunes old ones.
void write_checkpoint(const Config& cfg, const RunOptions& opts, const Model& model,
                      const AdamW& optimizer, const RunData& d, const BatchLoader& loader,
                      size_t done, float lr, RunSummary* summary) {
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

void print_summary(const Config& cfg, const RunData& d, size_t val_windows_all,
                   size_t trained, const std::string& metrics_path, RunSummary* summary) {
  const size_t T = cfg.data.seq_len;
  summary->tokens_per_second =
      static_cast<double>(trained * cfg.train.batch_size * T) / summary->train_seconds;
  // The baseline scores exactly the targets the final evaluation scored.
  std::vector<int32_t> val_targets(val_windows_all * T);
  d.val_ids.read(1, val_targets.size(), val_targets.data());
  summary->unigram_baseline = unigram_cross_entropy(d.train_ids, val_targets, cfg.model.vocab_size);
  const size_t split_tokens = (d.val_ids.size() - 1) / T * T;
  const std::string coverage =
      val_windows_all * T == split_tokens
          ? "whole validation split, " + std::to_string(split_tokens) + " tokens"
          : "first " + std::to_string(val_windows_all * T) + " of the validation split's " +
                std::to_string(split_tokens) + " tokens, train.eval_tokens";
  std::printf(
      "final validation loss %.4f nats/token (%s) vs unigram "
      "baseline %.4f (train-split frequencies): %.4f %s the baseline.\n",
      summary->final_val_loss, coverage.c_str(), summary->unigram_baseline,
      std::fabs(summary->unigram_baseline - summary->final_val_loss),
      summary->final_val_loss < summary->unigram_baseline ? "below" : "ABOVE (worse than)");
  std::printf("trained %zu steps in %s, %.0f tokens/s; checkpoint %s; metrics %s\n", trained,
              format_duration(summary->train_seconds).c_str(), summary->tokens_per_second,
              summary->last_checkpoint.c_str(), metrics_path.c_str());
  std::printf("evaluations: %zu in %s (%.3f s), besides %.3f s of training steps\n",
              summary->evaluations, format_duration(summary->eval_seconds).c_str(),
              summary->eval_seconds, summary->train_seconds);
  std::printf("checkpoints: %zu written, %.3f s each on average (%s)\n",
              summary->checkpoints_written,
              summary->checkpoints_written
                  ? summary->checkpoint_seconds / static_cast<double>(summary->checkpoints_written)
                  : 0.0,
              fs::exists(summary->last_checkpoint)
                  ? (std::to_string(fs::file_size(summary->last_checkpoint)) + " bytes each").c_str()
                  : "");
}


// --- The run, step by step ----------------------------------------------------------------------
// run_training reads as the run goes: check the request, start the workers, prepare the data,
// restore the data loader, load or initialise the model, write the run files, describe the run,
// the loop, finish the run. The structs below carry what one stage hands the next.

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

// metrics.csv as the loop writes it. Ranks other than 0 write nothing: theirs stays closed.
struct RunFiles {
  std::string metrics_path;
  std::ofstream metrics;
  double elapsed_before = 0;  // elapsed_s of the rows kept from before a resume
};

// Snapshots of steps 0 and start_step + 1 are written before the first step has finished: part
// of the start-up, recorded (with their temporary names) like the run files.
void will_write_snapshot(const RunOptions& opts, size_t step) {
  if (!opts.will_create) return;
  opts.will_create(snapshot_path(opts.out_dir, step), false);
  opts.will_create(snapshot_path(opts.out_dir, step) + ".tmp", false);
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

// The validation windows (of T + 1 tokens) the evaluations cover. Every evaluation, the final one
// too, covers the same first windows of the split (train.eval_tokens, eval_token_cap).
struct EvalWindows {
  size_t split = 0;     // whole windows in the validation split
  size_t all = 0;       // the final evaluation's
  size_t periodic = 0;  // the evaluations every train.eval_interval steps
};

EvalWindows plan_evaluations(const Config& cfg, const RunData& d) {
  const size_t T = cfg.data.seq_len;
  EvalWindows w;
  w.split = (d.val_ids.size() - 1) / T;
  const size_t eval_cap = eval_token_cap(cfg);
  w.all = eval_cap == 0 ? w.split : std::min(w.split, std::max<size_t>(1, eval_cap / T));
  w.periodic = w.all;
  return w;
}

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
  SampleTrace& trace;
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
  RunSummary summary;
  EvalClock eval_clock;
  double step_seconds = 0.0;  // wall time of the optimizer steps of this run so far
  Clock::time_point t_start;  // the loop's start (elapsed_s goes on from elapsed_before)
  size_t finished_step;       // steps done, of train.steps
};

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
  const double val_loss = evaluate(run.model, run.d.val_ids, T, run.B_micro, windows);
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
  return !(run.opts.on_step && run.comm.size() == 1 &&
           !run.opts.on_step(StepProgress{done, cfg.train.steps, r.loss, val_loss, r.lr,
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
    if (done == run.start_step + 1 && run.opts.on_first_step) run.opts.on_first_step();
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

// After the loop: the signal check the loop no longer sees, metrics.csv closed and loss.svg drawn
// (rank 0), then how the run ended. A signal before the last step: how to continue (stderr).
// --stop-at or the progress callback: where it stopped and how to continue. Complete: the summary
// (print_summary), and if a signal came in or after the last step, that nothing is left to do.
RunSummary finish_run(Run& run, LoopState* s) {
  const Config& cfg = run.cfg;
  const RunOptions& opts = run.opts;
  RunSummary& summary = s->summary;
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
  summary.signal = received;
  if (summary.signal != 0 && !complete) {
    if (run.writer)
      std::fprintf(stderr,
                 "wte train: %s received: finished step %zu of %zu and wrote checkpoint %s; "
                 "continue with: wte train --resume auto --out %s\n",
                 signal_name(summary.signal), finished_step, cfg.train.steps,
                 summary.last_checkpoint.c_str(), opts.out_dir.c_str());
    return summary;
  }
  if (summary.stopped) {
    std::printf("stopped at step %zu of %zu (%s) after %s; checkpoint %s; continue with: "
                "wte train --resume %s\n",
                finished_step, cfg.train.steps,
                finished_step == opts.stop_at ? "--stop-at" : "the progress callback asked",
                format_duration(s->step_seconds).c_str(), summary.last_checkpoint.c_str(),
                summary.last_checkpoint.c_str());
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

double evaluate_loss(Model& model, const std::vector<int32_t>& tokens, size_t T, size_t B,
                     size_t max_windows) {
  if (T == 0 || B == 0 || tokens.size() < T + 1 || max_windows == 0)
    throw Error("evaluate_loss: needs at least one window of " + std::to_string(T + 1) +
                " tokens (have " + std::to_string(tokens.size()) + ")");
  return evaluate(model, TokenStream::view(&tokens), T, B, max_windows);
}

RunSummary run_training(const Config& cfg, const RunOptions& opts) {
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
  SampleTrace trace(writer);
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
