// `wte profile loss`: the loss of one training step on the fused, chunked path beside the unfused
// one (src/profile/loss_profile.h measures them); this file reads the options and prints the
// table and the JSON.
#include <omp.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "src/profile/loss_profile.h"
#include "src/profile/profile.h"
#include "cli/options.h"
#include "src/io/suggest.h"
#include "cli/commands.h"
#include "train/omp_env.h"
#include "train/memory.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"

namespace po = boost::program_options;

namespace wte::cli {
namespace {

using profile::median;

constexpr const char* kLossUsage =
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

constexpr const char* kLossExample =
    "Example (README: GPT-2's vocabulary at full batch):\n"
    "  wte profile loss --vocab-size 50257 --d-model 768 --n-tokens 8192 --loss-chunk 64,128,256\n";

// `wte profile loss`'s command line, every value checked.
struct LossOptions {
  bool help = false;  // --help was printed
  profile::LossProfileSettings settings;
  int threads = 2;
  std::optional<std::string> json;  // checked writable
};

void add_loss_options(po::options_description& desc) {
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
}

// Parses and checks `wte profile loss`'s command line (argv[0] is "loss"), every value before any
// work. Throws UsageError for a bad option or value, wte::Error for an unwritable --json.
LossOptions parse_loss_options(int argc, char** argv) {
  po::options_description desc("Options");
  add_loss_options(desc);
  CommandSpec spec;
  spec.usage = kLossUsage;
  spec.example = kLossExample;
  const CommandLine cl = parse_command_line(argc, argv, desc, spec);
  LossOptions o;
  o.help = cl.help;
  if (cl.help) return o;
  const po::variables_map& vm = cl.vm;
  profile::LossProfileSettings& s = o.settings;
  s.V = whole_number_option(vm, "vocab-size", 1, size_t{1} << 24);
  s.C = whole_number_option(vm, "d-model", 1, size_t{1} << 16);
  s.N = whole_number_option(vm, "n-tokens", 1, size_t{1} << 24);
  s.vocab_tile = whole_number_option(vm, "loss-vocab-tile", 0, kMaxLossVocabTile);
  o.threads = static_cast<int>(whole_number_option(vm, "threads", 1, 1024));
  s.repeat = whole_number_option(vm, "repeat", 1, 10000);
  s.seed = whole_number_option(vm, "seed", 0, UINT32_MAX);
  bool fused = false;
  s.unfused = false;
  for (const std::string& p : split_list("--paths", vm["paths"].as<std::string>())) {
    if (p == "fused") fused = true;
    else if (p == "unfused") s.unfused = true;
    else throw UsageError("--paths item '" + p + "' is not a path; allowed: fused, unfused" +
                          io::did_you_mean(p, {"fused", "unfused"}));
  }
  // The fused path's settings without a fused path would be silently ignored.
  if (!fused)
    for (const char* opt : {"loss-chunk", "loss-vocab-tile"})
      if (!vm[opt].defaulted())
        throw UsageError(std::string("--") + opt + " sets the fused path, but --paths = '" +
                         vm["paths"].as<std::string>() + "' runs no fused path; add fused to "
                         "--paths or leave --" + opt + " out");
  std::vector<size_t> chunks;
  for (const std::string& c : split_list("--loss-chunk", vm["loss-chunk"].as<std::string>()))
    chunks.push_back(parse_whole_number("--loss-chunk", c, 0, kMaxLossChunk));  // model.loss_chunk's
  if (fused) s.chunks = chunks;
  if (vm.count("json")) check_output_file("--json", *(o.json = vm["json"].as<std::string>()));
  return o;
}

// Memory, before any output or allocation, as wte train's start-up check (train/memory.h).
void check_loss_memory(const profile::LossProfileSettings& s,
                       const std::vector<profile::LossPath>& paths) {
  const double Vd = static_cast<double>(s.V), Cd = static_cast<double>(s.C),
               Nd = static_cast<double>(s.N), n_paths = static_cast<double>(paths.size());
  double workspaces = 0;
  for (const profile::LossPath& p : paths)
    if (p.tiles.fused())
      workspaces += 4.0 * static_cast<double>(profile::loss_path_buffer_floats(p, s.N, s.V, s.C));
  std::vector<MemoryPart> parts = {
      {"inputs h and W", 4 * (Nd + Vd) * Cd + 4 * Nd, "(--n-tokens + --vocab-size) x --d-model",
       "--n-tokens, --vocab-size or --d-model"},
      {"each path's outputs dh and dW", n_paths * 4 * (Nd + Vd * Cd + Nd * Cd),
       "paths x (--n-tokens + --vocab-size) x --d-model",
       "--n-tokens, --vocab-size or --d-model, or run fewer paths"}};
  if (workspaces > 0)
    parts.push_back({"fused workspaces (rows x vocab_size each)", workspaces,
                     "--loss-chunk x --vocab-size", "--loss-chunk or --vocab-size"});
  if (s.unfused)
    parts.push_back({"unfused logits (N x V floats)", 4 * Nd * Vd, "--n-tokens x --vocab-size",
                     "--n-tokens or --vocab-size, or leave unfused out of --paths"});
  check_memory(parts, "wte profile loss");
}

// The machine and the OpenMP wait policy, before measuring; warnings if the machine is busy.
void print_loss_machine(const profile::MachineState& machine, int threads) {
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
}

// The table (one line per path) and its notes; returns the lines as the JSON's "paths".
nlohmann::json print_loss_table(const profile::LossProfile& r, const profile::LossProfileSettings& s,
                                double load_before, double load_after) {
  const size_t N = s.N, V = s.V, C = s.C;
  const double gflop = 3 * 2.0 * static_cast<double>(N) * V * C / 1e9;
  std::printf("\nloss forward + backward: N %zu, V %zu, C %zu, float32; median of %zu runs "
              "(interleaved); load average %.2f before, %.2f after\n",
              N, V, C, s.repeat, load_before, load_after);
  std::printf("%-22s %10s %8s %9s %14s %12s  %s\n", "path", "ms", "GFLOP/s", "vs unfused",
              "peak RSS MiB", "workspace MiB", "max rel. diff (loss, dh, dW) vs unfused");
  nlohmann::json rows = nlohmann::json::array();
  for (const profile::LossPathResult& p : r.paths) {
    const double ms = median(p.samples) * 1e3;
    const double ws =
        static_cast<double>(profile::loss_path_buffer_floats(p.path, N, V, C)) * 4 / (1 << 20);
    char ratio[32] = "", diff[96] = "";
    if (p.compared) {
      std::snprintf(ratio, sizeof ratio, "%.3fx", ms / (median(r.paths.back().samples) * 1e3));
      std::snprintf(diff, sizeof diff, "%.1e, %.1e, %.1e", p.diff_loss, p.diff_dh, p.diff_dW);
    }
    std::printf("%-22s %10.1f %8.1f %9s %14.1f %12.1f  %s\n", p.path.name.c_str(), ms,
                gflop / (ms * 1e-3), ratio, p.peak_bytes / (1 << 20), ws, diff);
    rows.push_back({{"path", p.path.name}, {"fused", p.path.tiles.fused()},
                    {"rows", p.path.tiles.rows}, {"tile", p.path.tiles.tile}, {"ms", ms},
                    {"first_run_ms", p.first_run_seconds * 1e3},
                    {"peak_rss_growth_bytes", p.peak_bytes}, {"workspace_bytes", ws * (1 << 20)},
                    {"max_rel_diff_loss", p.diff_loss}, {"max_rel_diff_dh", p.diff_dh},
                    {"max_rel_diff_dW", p.diff_dW}});
  }
  if (!r.peak_reset)
    std::printf("note: /proc/self/clear_refs could not be written: the peak RSS column is the growth "
                "over the process's earlier peak, so later paths may read 0\n");
  std::printf("GFLOP/s counts the three GEMMs (logits, dh, dW): 3 x 2 x N x V x C = %.1f GFLOP\n", gflop);
  return rows;
}

}  // namespace

int cmd_profile_loss(int argc, char** argv) {
  const LossOptions o = parse_loss_options(argc, argv);
  if (o.help) return 0;
  const profile::LossProfileSettings& s = o.settings;
  omp_set_num_threads(o.threads);
  const std::vector<profile::LossPath> paths = profile::loss_paths(s);
  check_loss_memory(s, paths);
  const profile::MachineState machine = profile::read_machine_state();
  print_loss_machine(machine, o.threads);
  const profile::LossProfile result = profile::profile_loss(s, paths);
  const profile::MachineState after = profile::read_machine_state();
  const nlohmann::json rows =
      print_loss_table(result, s, machine.load_average[0], after.load_average[0]);
  if (o.json) {
    nlohmann::json j = {{"N", s.N}, {"V", s.V}, {"C", s.C}, {"threads", o.threads},
                        {"repeat", s.repeat}, {"cpu_model", machine.cpu_model},
                        {"load_average_before", machine.load_average[0]},
                        {"load_average_after", after.load_average[0]}, {"paths", rows}};
    write_file_atomic(*o.json, j.dump(1) + '\n');
  }
  return 0;
}

}  // namespace wte::cli
