#include "train/run_directory.h"

#include <fcntl.h>
#include <omp.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/analysis/loss_curve.h"
#include "src/io/file_checks.h"
#include "src/io/snapshot.h"
#include "src/model/unembedding.h"
#include "wte/checkpoint.h"
#include "wte/data.h"
#include "wte/error.h"

namespace fs = std::filesystem;

namespace wte {

RunDirectory::RunDirectory(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    // The outermost directory that does not exist yet: created here with the ones inside it,
    // and removed with them if the start-up fails (`-o new/a/b` must not leave new/a). A "." or
    // ".." after it ("new/..") would make removing it remove a directory that existed: then
    // nothing is removed.
    fs::path prefix, top;
    bool unsafe = false;
    for (const fs::path& part : fs::absolute(dir, ec)) {
      prefix /= part;
      if (top.empty() && !fs::exists(prefix, ec)) top = prefix;
      else if (!top.empty() && (part == "." || part == "..")) unsafe = true;
    }
    fs::create_directories(dir, ec);
    if (ec) throw Error("run directory (--out) '" + dir + "' cannot be created: " + ec.message());
    created_ = true;
    if (!unsafe) created_top_ = top.string();
  }
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    const std::string why = std::strerror(errno);
    if (created_ && !created_top_.empty()) fs::remove_all(created_top_, ec);
    throw Error("run directory (--out) '" + dir + "' cannot be opened: " + why);
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw Error("run directory '" + dir + "' is in use: another wte train holds its lock (a run "
                  "in progress, or one starting). Two runs in one directory would overwrite each "
                  "other's checkpoints and metrics; wait for it to finish (then --resume auto "
                  "continues it) or choose another --out");
    throw Error("run directory '" + dir + "' cannot be locked: " + std::strerror(err));
  }
}

RunDirectory::~RunDirectory() {
  if (created_ && !keep_ && !created_top_.empty()) {
    std::error_code ec;
    fs::remove_all(created_top_, ec);  // a start-up that failed leaves no half-made directory
  }
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

const std::vector<std::string>& run_file_names() {
  static const std::vector<std::string> names = {"config.ini", "metrics.csv", "loss.svg",
                                                 "train.bin",  "val.bin",     "tokenizer"};
  return names;
}

const char* metrics_header() {
  return "step,train_loss,val_loss,lr,grad_norm,tokens_per_s_avg,elapsed_s,ranks\n";
}

std::string without_torn_line(std::string text) {
  if (!text.empty() && text.back() != '\n') {
    const size_t end = text.rfind('\n');
    text.erase(end == std::string::npos ? 0 : end + 1);
  }
  return text;
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
  if (!fs::is_regular_file(path, ec)) return;
  std::istringstream in(without_torn_line(read_text_file(path)));
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
    } catch (const Error&) {
      return;  // reported by the resume's own checks
    }
    std::vector<std::pair<uint64_t, std::string>> newer;
    for (const auto& c : list_checkpoints(dir))
      if (c.first > static_cast<uint64_t>(step)) newer.push_back(c);
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

PlanShape training_plan_shape(const Config& cfg) {
  // One forward holds a micro-batch: train.batch_size / train.grad_accum_steps sequences.
  const size_t K = std::max<size_t>(cfg.train.grad_accum_steps, 1);
  return PlanShape{std::max<size_t>(cfg.train.batch_size / K, 1), cfg.data.seq_len, K, true, true};
}

std::vector<MemoryPart> estimate_training_memory(const Config& cfg) {
  const PlanShape shape = training_plan_shape(cfg);
  const MemoryPlan plan = plan_memory(cfg.model, shape);
  const std::string table = cfg.model.tie_embeddings ? "model.vocab_size x model.d_model"
                                                     : "model.vocab_size x model.d_model (wte and lm_head)";
  const std::string per_forward = shape.micro_batches > 1
                                      ? "train.batch_size / train.grad_accum_steps x data.seq_len"
                                      : "train.batch_size x data.seq_len";
  // Which settings scale each part of the plan, and which to lower.
  auto describe = [&](const std::string& part) -> std::pair<std::string, std::string> {
    if (part == "parameters" || part == "gradients" || part == "AdamW m and v" ||
        part == "allocation rounding")
      return {table, "model.vocab_size or model.d_model"};
    if (part == "bf16 copy of the parameters")
      return {table, "model.vocab_size or model.d_model, or set model.matmul_precision = f32"};
    if (part == "logits of one step")
      return {per_forward + " x model.vocab_size",
              "train.batch_size or data.seq_len, raise train.grad_accum_steps, or set "
              "model.loss_chunk (the fused loss keeps model.loss_chunk x model.vocab_size floats "
              "instead)"};
    if (part.rfind("loss workspace", 0) == 0)
      return {"model.loss_chunk x model.vocab_size", "model.loss_chunk"};
    if (part == "hidden states of one step")
      return {per_forward + " x model.d_model",
              "train.batch_size or data.seq_len, or raise train.grad_accum_steps"};
    if (part == "block activations of one step")
      return {"model.n_layer x " + per_forward,
              "model.n_layer, train.batch_size or data.seq_len, or raise train.grad_accum_steps"};
    if (part == "bf16 copies of one step's GEMM inputs")
      return {"model.n_layer x " + per_forward + " x model.d_model",
              "model.n_layer, train.batch_size or data.seq_len, raise train.grad_accum_steps, or "
              "set model.matmul_precision = f32"};
    if (part == "wte gradient rows")
      return {"train.batch_size x data.seq_len x model.d_model (at most model.vocab_size rows)",
              "train.batch_size or data.seq_len"};
    return {"train.batch_size x data.seq_len", "train.batch_size or data.seq_len"};
  };
  std::vector<MemoryPart> parts;
  for (const auto& [part, bytes] : plan.parts()) {
    const auto [setting, lower] = describe(part);
    parts.push_back({part, static_cast<double>(bytes), setting, lower});
  }
  return parts;
}

uint64_t available_memory_bytes() {
  uint64_t avail = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") {
      avail = kib * 1024;
      break;
    }
  }
  // No MemAvailable (kernels before 3.14): the physical memory.
  if (avail == 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) avail = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  }
  // cgroup v2 limit of this process's group, if any ("max" means none).
  std::ifstream cg("/sys/fs/cgroup/memory.max");
  std::string limit;
  if (cg >> limit && limit != "max") {
    uint64_t max = std::strtoull(limit.c_str(), nullptr, 10);
    uint64_t current = 0;
    std::ifstream cur("/sys/fs/cgroup/memory.current");
    cur >> current;
    const uint64_t room = max > current ? max - current : 0;
    avail = avail == 0 ? room : std::min(avail, room);
  }
  return avail;
}

namespace {

std::string gib(double bytes) {
  char buf[32];
  if (bytes >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024));
  return buf;
}

}  // namespace

void check_training_memory(const Config& cfg, uint64_t available) {
  check_memory(estimate_training_memory(cfg), "this run", available);
}

void check_memory(const std::vector<MemoryPart>& parts, const std::string& what,
                  uint64_t available) {
  if (available == 0) available = available_memory_bytes();
  if (available == 0 || parts.empty()) return;  // unknown: nothing to compare with
  double total = 0;
  const MemoryPart* largest = &parts[0];
  for (const MemoryPart& p : parts) {
    total += p.bytes;
    if (p.bytes > largest->bytes) largest = &p;
  }
  if (total <= static_cast<double>(available)) return;
  std::string detail;
  for (const MemoryPart& p : parts) detail += "\n  " + p.what + ": " + gib(p.bytes);
  throw Error(what + " needs about " + gib(total) + " of memory but " +
              gib(static_cast<double>(available)) + " is available; the largest part is " +
              largest->what + " (" + gib(largest->bytes) + "), which scales with " +
              largest->setting + ": lower " + largest->lower + ". Estimate by part:" + detail);
}

void start_thread_team(const Config& cfg) {
  const int want = cfg.train.threads > 0 ? static_cast<int>(cfg.train.threads) : omp_get_max_threads();
  int got = want;
#ifdef _OPENMP  // the fuzz build compiles without -fopenmp (cmake/sanitize.cmake)
#pragma omp parallel num_threads(want)
  {
#pragma omp single
    got = omp_get_num_threads();
  }
#endif
  if (got != want)
    throw Error("train.threads = " + std::to_string(want) + ": OpenMP started only " +
                std::to_string(got) + " threads; lower train.threads");
}

}  // namespace wte
