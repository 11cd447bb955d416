// `wte profile loss`: the loss of one training step (unembedding + cross-entropy, forward and
// backward: losses, dh and dW from h (N, C), W (V, C) and targets) on the fused, chunked path
// (src/model/unembedding.h) beside the unfused one (the (N, V) logits, softmax_cross_entropy in
// place, then the two gradient GEMMs, as Model runs it), at given N, V, C and rows per block:
// median time of each, timed interleaved (fused, unfused, fused, ...) so their ratio sees the same
// machine, and the peak resident memory each one's first call adds (its outputs dh and dW, its
// logits or workspace), measured as the growth of the process's peak RSS (VmHWM, reset before each
// through /proc/self/clear_refs).
#include <omp.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "src/profile/profile.h"
#include "src/model/matmul.h"
#include "src/model/unembedding.h"
#include "cli/options.h"
#include "cli/commands.h"
#include "train/omp_env.h"
#include "train/run_directory.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/kernels.h"
#include "wte/model.h"

namespace po = boost::program_options;

namespace wte::cli {
namespace {

using profile::median;

using Clock = std::chrono::steady_clock;

// VmRSS and VmHWM of this process in bytes (/proc/self/status), 0 if unreadable.
struct Rss {
  uint64_t now = 0, peak = 0;
};
Rss read_rss() {
  std::ifstream in("/proc/self/status");
  std::string key;
  Rss r;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key) {
    if (key == "VmRSS:" && in >> kib >> unit) r.now = kib * 1024;
    else if (key == "VmHWM:" && in >> kib >> unit) r.peak = kib * 1024;
    else in.ignore(1 << 20, '\n');
  }
  return r;
}

// Resets VmHWM to the current RSS (Linux: "5" > /proc/self/clear_refs). False if not possible.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// One path's buffers, allocated on its first run (so the peak measurement sees them).
struct LossPath {
  std::string name;
  UnembeddingTiles tiles;  // rows 0: unfused
  Model::Buffer losses, dh, dW, work;
  Gemm gemm;
  double peak_bytes = 0;
  double seconds = 0;
  std::vector<double> samples;
};

// The unfused path as Model runs it: logits = h · Wᵀ; softmax cross-entropy in place (dlogits);
// dW = dlogitsᵀ · h; dh = dlogits · W.
void run_unfused(LossPath& p, const float* h, const float* W, const int32_t* y, size_t N, size_t V,
                 size_t C) {
  const auto n = static_cast<int64_t>(N), c = static_cast<int64_t>(C), v = static_cast<int64_t>(V);
  p.gemm.run(p.work.get(), plain(n, v), h, plain(n, c), W, transposed(v, c));
  p.gemm.wait();
  softmax_cross_entropy(p.work.get(), p.losses.get(), y, N, V, 1.0f / static_cast<float>(N));
  p.gemm.run(p.dW.get(), plain(v, c), p.work.get(), transposed(n, v), h, plain(n, c));
  p.gemm.run(p.dh.get(), plain(n, c), p.work.get(), plain(n, v), W, plain(v, c));
  p.gemm.wait();
}

void run_path(LossPath& p, const float* h, const float* W, const int32_t* y, size_t N, size_t V,
              size_t C) {
  if (!p.losses) {  // first run: allocate (counted in the peak), as a training step's arena would
    p.losses = allocate_floats(N);
    p.dh = allocate_floats(N * C);
    p.dW = allocate_floats(V * C);
    p.work = allocate_floats(p.tiles.fused() ? unembedding_workspace_floats(p.tiles, V) : N * V);
  }
  if (p.tiles.fused())
    unembedding_loss_forward_backward(p.losses.get(), p.dh.get(), p.dW.get(), h, W, y, N, V, C,
                                      1.0f / static_cast<float>(N), p.tiles, p.work.get(), nullptr,
                                      p.gemm);
  else
    run_unfused(p, h, W, y, N, V, C);
}

}  // namespace

int cmd_profile_loss(int argc, char** argv) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "print this help")(
      "vocab-size", po::value<std::string>()->default_value("50257"), "V: rows of W, in [1, 2^24]")(
      "d-model", po::value<std::string>()->default_value("768"), "C: floats per row, in [1, 2^16]")(
      "n-tokens", po::value<std::string>()->default_value("8192"),
      "N: rows of h (target tokens, B*T), in [1, 2^24]")(
      "loss-chunk", po::value<std::string>()->default_value("0"),
      "comma-separated rows per block of the fused path (model.loss_chunk), each in [0, 2^20]; "
      "0: automatic")(
      "loss-vocab-tile", po::value<std::string>()->default_value("0"),
      "vocabulary ids per tile of the fused path (model.loss_vocab_tile), in [0, 2^24]; 0: "
      "automatic")(
      "paths", po::value<std::string>()->default_value("fused,unfused"),
      "which paths to run: fused, unfused, or both (comma-separated)")(
      "threads", po::value<std::string>()->default_value("2"), "OpenMP threads, in [1, 1024]")(
      "repeat", po::value<std::string>()->default_value("5"),
      "timed runs of each path (median, after the first run), in [1, 10000]")(
      "json", po::value<std::string>(), "also write the results to this JSON file")(
      "seed", po::value<std::string>()->default_value("1234"), "seed of h, W and the targets, in [0, 2^32)");
  CommandSpec spec;
  spec.usage =
      "Usage: wte profile loss [--vocab-size V --d-model C --n-tokens N --loss-chunk R,...]\n\n"
      "Times the loss of one training step, forward and backward (losses, dh = dL/dh and the\n"
      "dense dW = dL/dW of h (N, C) · Wᵀ with W (V, C), mean cross-entropy against random\n"
      "targets), on the fused chunked path (src/model/unembedding.h: rows of h in blocks, the\n"
      "vocabulary in tiles, no (N, V) buffer) and on the unfused path (the (N, V) logits and\n"
      "dlogits in one buffer, as model.loss_chunk = 0 runs small vocabularies). Each path's\n"
      "first run allocates its buffers (outputs dh, dW, losses; the logits or the workspace)\n"
      "and reports the growth of the process's peak resident memory (VmHWM, reset first through\n"
      "/proc/self/clear_refs); then --repeat runs of all paths interleaved give median times.\n"
      "The last column compares each fused run with the unfused one: max |difference| of\n"
      "the losses, dh and dW relative to the largest unfused value.\n\n";
  spec.example =
      "Example (README: GPT-2's vocabulary at full batch):\n"
      "  wte profile loss --vocab-size 50257 --d-model 768 --n-tokens 8192 --loss-chunk 64,128,256\n";
  const CommandLine cl = parse_command_line(argc, argv, desc, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  const size_t V = whole_number_option(vm, "vocab-size", 1, size_t{1} << 24),
               C = whole_number_option(vm, "d-model", 1, size_t{1} << 16),
               N = whole_number_option(vm, "n-tokens", 1, size_t{1} << 24);
  const size_t tile_arg = whole_number_option(vm, "loss-vocab-tile", 0, kMaxLossVocabTile);
  const int threads = static_cast<int>(whole_number_option(vm, "threads", 1, 1024));
  const size_t repeat = whole_number_option(vm, "repeat", 1, 10000);
  const uint64_t seed = whole_number_option(vm, "seed", 0, UINT32_MAX);
  bool want_fused = false, want_unfused = false;
  for (const std::string& p : split_list("--paths", vm["paths"].as<std::string>())) {
    if (p == "fused") want_fused = true;
    else if (p == "unfused") want_unfused = true;
    else throw UsageError("--paths item '" + p + "' is not a path; allowed: fused, unfused");
  }
  // The fused path's settings without a fused path would be silently ignored.
  if (!want_fused)
    for (const char* opt : {"loss-chunk", "loss-vocab-tile"})
      if (!vm[opt].defaulted())
        throw UsageError(std::string("--") + opt + " sets the fused path, but --paths = '" +
                         vm["paths"].as<std::string>() + "' runs no fused path; add fused to "
                         "--paths or leave --" + opt + " out");
  std::vector<size_t> chunks;
  for (const std::string& c : split_list("--loss-chunk", vm["loss-chunk"].as<std::string>()))
    chunks.push_back(parse_whole_number("--loss-chunk", c, 0, kMaxLossChunk));  // model.loss_chunk's
  if (vm.count("json")) check_output_file("--json", vm["json"].as<std::string>());
  omp_set_num_threads(threads);

  std::vector<std::unique_ptr<LossPath>> paths;
  if (want_fused)
    for (size_t chunk : chunks) {
      ModelConfig mc;
      mc.vocab_size = V;
      mc.d_model = C;
      mc.loss_chunk = chunk == 0 ? auto_loss_rows(V) : chunk;
      mc.loss_vocab_tile = tile_arg;
      auto p = std::make_unique<LossPath>();
      p->tiles = resolve_loss_tiles(mc, N);
      p->name = "fused " + std::to_string(p->tiles.rows) + " x " + std::to_string(p->tiles.tile);
      paths.push_back(std::move(p));
    }
  if (want_unfused) {
    auto p = std::make_unique<LossPath>();
    p->name = "unfused";
    paths.push_back(std::move(p));
  }
  {  // Memory, before any output or allocation, as wte train's start-up check (train/run_directory.h).
    const double Vd = static_cast<double>(V), Cd = static_cast<double>(C),
                 Nd = static_cast<double>(N), n_paths = static_cast<double>(paths.size());
    double workspaces = 0;
    for (const auto& p : paths)
      if (p->tiles.fused()) workspaces += 4.0 * static_cast<double>(unembedding_workspace_floats(p->tiles, V));
    std::vector<MemoryPart> parts = {
        {"inputs h and W", 4 * (Nd + Vd) * Cd + 4 * Nd, "(--n-tokens + --vocab-size) x --d-model",
         "--n-tokens, --vocab-size or --d-model"},
        {"each path's outputs dh and dW", n_paths * 4 * (Nd + Vd * Cd + Nd * Cd),
         "paths x (--n-tokens + --vocab-size) x --d-model",
         "--n-tokens, --vocab-size or --d-model, or run fewer paths"}};
    if (workspaces > 0)
      parts.push_back({"fused workspaces (rows x vocab_size each)", workspaces,
                       "--loss-chunk x --vocab-size", "--loss-chunk or --vocab-size"});
    if (want_unfused)
      parts.push_back({"unfused logits (N x V floats)", 4 * Nd * Vd, "--n-tokens x --vocab-size",
                       "--n-tokens or --vocab-size, or leave unfused out of --paths"});
    check_memory(parts, "wte profile loss");
  }

  const profile::MachineState machine = profile::read_machine_state();
  std::printf("machine: %s, %d CPUs; load average %.2f %.2f %.2f (1, 5, 15 min); %d thread(s)\n",
              machine.cpu_model.c_str(), machine.cpus, machine.load_average[0],
              machine.load_average[1], machine.load_average[2], threads);
  // The wait policy matters here: the fused path runs thousands of short GEMMs, and libgomp's
  // spinning threads wait at each one's barriers for a partner the busy machine has descheduled
  // (measured on the loaded 2-core Zen 5 at N 800: fused 3.7-4.9x the unfused time spinning,
  // 0.75-1.10x with OMP_WAIT_POLICY=passive, wte train's default).
  std::printf("OpenMP: %s\n", wait_policy_description());
  if (machine.busy()) {
    std::printf("warning: the machine is busy (load average %.2f on %d CPUs): compare the paths' "
                "ratio, not their times\n", machine.load_average[0], machine.cpus);
    if (std::getenv("OMP_WAIT_POLICY") == nullptr)
      std::printf("warning: OMP_WAIT_POLICY is unset: spinning threads slow the fused path's short "
                  "GEMMs on a busy machine; OMP_WAIT_POLICY=passive (as wte train) compares them "
                  "fairly\n");
  }
  std::fflush(stdout);

  // Inputs, allocated and touched before any measurement: h ~ N(0, 1) (an ln_f output), W ~
  // N(0, 0.02²) (GPT-2's init), targets uniform.
  Model::Buffer h = allocate_floats(N * C), W = allocate_floats(V * C);
  std::vector<int32_t> y(N);
  {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t i = 0; i < N * C; ++i) h[i] = normal(rng);
    for (size_t i = 0; i < V * C; ++i) W[i] = 0.02f * normal(rng);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V) - 1);
    for (int32_t& t : y) t = pick(rng);
  }

  // First runs, one path at a time, each from a reset peak: its own memory.
  const bool peak_ok = reset_peak_rss();
  for (auto& p : paths) {
    reset_peak_rss();
    const Rss before = read_rss();
    const auto t0 = Clock::now();
    run_path(*p, h.get(), W.get(), y.data(), N, V, C);
    p->seconds = std::chrono::duration<double>(Clock::now() - t0).count();  // first run
    const Rss after = read_rss();
    p->peak_bytes = static_cast<double>(after.peak) - static_cast<double>(before.now);
  }
  // Timed runs, interleaved.
  for (size_t k = 0; k < repeat; ++k)
    for (auto& p : paths) {
      const auto t0 = Clock::now();
      run_path(*p, h.get(), W.get(), y.data(), N, V, C);
      p->samples.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  const LossPath* unfused = want_unfused ? paths.back().get() : nullptr;
  auto max_rel = [](const float* a, const float* b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; ++i) {
      d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
      m = std::max(m, std::abs(static_cast<double>(b[i])));
    }
    return m > 0 ? d / m : d;
  };
  const double gflop = 3 * 2.0 * static_cast<double>(N) * V * C / 1e9;
  const profile::MachineState after = profile::read_machine_state();
  std::printf("\nloss forward + backward: N %zu, V %zu, C %zu, float32; median of %zu runs "
              "(interleaved); load average %.2f before, %.2f after\n",
              N, V, C, repeat, machine.load_average[0], after.load_average[0]);
  std::printf("%-22s %10s %8s %9s %14s %12s  %s\n", "path", "ms", "GFLOP/s", "vs unfused",
              "peak RSS MiB", "workspace MiB", "max rel. diff (loss, dh, dW) vs unfused");
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& p : paths) {
    const double ms = median(p->samples) * 1e3;
    const double ws = static_cast<double>(p->tiles.fused() ? unembedding_workspace_floats(p->tiles, V)
                                                           : N * V) * 4 / (1 << 20);
    char ratio[32] = "", diff[96] = "";
    double d_loss = 0, d_dh = 0, d_dw = 0;
    if (unfused != nullptr && p.get() != unfused) {
      std::snprintf(ratio, sizeof ratio, "%.3fx", ms / (median(unfused->samples) * 1e3));
      d_loss = max_rel(p->losses.get(), unfused->losses.get(), N);
      d_dh = max_rel(p->dh.get(), unfused->dh.get(), N * C);
      d_dw = max_rel(p->dW.get(), unfused->dW.get(), V * C);
      std::snprintf(diff, sizeof diff, "%.1e, %.1e, %.1e", d_loss, d_dh, d_dw);
    }
    std::printf("%-22s %10.1f %8.1f %9s %14.1f %12.1f  %s\n", p->name.c_str(), ms,
                gflop / (ms * 1e-3), ratio, p->peak_bytes / (1 << 20), ws, diff);
    rows.push_back({{"path", p->name}, {"fused", p->tiles.fused()}, {"rows", p->tiles.rows},
                    {"tile", p->tiles.tile}, {"ms", ms}, {"first_run_ms", p->seconds * 1e3},
                    {"peak_rss_growth_bytes", p->peak_bytes}, {"workspace_bytes", ws * (1 << 20)},
                    {"max_rel_diff_loss", d_loss}, {"max_rel_diff_dh", d_dh},
                    {"max_rel_diff_dW", d_dw}});
  }
  if (!peak_ok)
    std::printf("note: /proc/self/clear_refs could not be written: the peak RSS column is the growth "
                "over the process's earlier peak, so later paths may read 0\n");
  std::printf("GFLOP/s counts the three GEMMs (logits, dh, dW): 3 x 2 x N x V x C = %.1f GFLOP\n", gflop);
  if (vm.count("json")) {
    nlohmann::json j = {{"N", N}, {"V", V}, {"C", C}, {"threads", threads}, {"repeat", repeat},
                        {"cpu_model", machine.cpu_model},
                        {"load_average_before", machine.load_average[0]},
                        {"load_average_after", after.load_average[0]}, {"paths", rows}};
    write_file_atomic(vm["json"].as<std::string>(), j.dump(1) + '\n');
  }
  return 0;
}

}  // namespace wte::cli
