// `wte profile scatter|gather|step|all`: how fast the embedding lookup (gather), its backward
// (scatter, every strategy) and a whole training step run on this machine, beside the machine's
// memory limits measured in the same run. The measurements are src/profile/kernel_profile.h and
// src/profile/step_profile.h; this file reads the options and prints the results.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "wte/kernels.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/model.h"
#include "src/profile/kernel_profile.h"
#include "src/profile/profile.h"
#include "src/profile/step_profile.h"
#include "src/analysis/svg.h"
#include "cli/options.h"
#include "src/io/suggest.h"
#include "cli/config_path.h"
#include "cli/commands.h"
#include "train/memory.h"

namespace po = boost::program_options;

namespace wte::cli {
namespace {

constexpr const char* kProfileUsage =
    "Usage: wte profile [scatter|gather|step|all] [options]\n"
    "       wte profile step [--config FILE] [--section.key=value ...] [options]\n"
    "       mpirun -np 2 wte profile comm [--config FILE] (see wte profile comm --help)\n"
    "       wte profile loss [--vocab-size V --d-model C --n-tokens N --loss-chunk R]\n"
    "         (fused vs unfused loss, see wte profile loss --help)\n\n"
    "Times the embedding gather (wte[ids]; with + wpe, the lookup), every scatter\n"
    "strategy of its backward, the untied backward fused with lazy AdamW, and (step)\n"
    "one whole training step split into its parts, beside this machine's memory limits\n"
    "measured in the same run: streaming copy (vector loads and non-temporal stores;\n"
    "and libc's memcpy), streaming read, a read and a memcpy of the same random rows.\n"
    "Names the CPU, its cache sizes, the ISAs Highway and oneDNN chose, and the load\n"
    "average, and warns when the machine is busy.\n"
    "Each kernel is reported warm and with caches flushed (64 MiB written first), as\n"
    "median time, GB/s of the bytes it must move, and fractions of those limits.\n\n";

constexpr const char* kProfileExample =
    "Bytes each kernel must move (f32): gather and lookup 2*N*C*4 (rows read + out\n"
    "written; the lookup also adds wpe, which stays in cache); copy 2*bytes; read and\n"
    "row-read the bytes read (row-read: N*C*4, the gather's rows without the writes);\n"
    "scatter (N + 2U)*C*4 + 4N (dhidden read, U touched rows read and written, ids);\n"
    "lazy-adamw (N + 6U)*C*4 + 4N (dhidden; param, m, v of U rows read and written).\n"
    "\nstep: one training step of --config (forward, backward, clip, AdamW) on ids of the\n"
    "first --dist, split into every layer kind (lookup, each GEMM family, attention's\n"
    "QKᵀ, softmax and ·V, LayerNorms, GELU, residual adds, cross-entropy, scatter,\n"
    "optimizer; block parts summed over the layers) with ms, share and GEMM GFLOP/s;\n"
    "then the model FLOPs per step per second as a fraction of the GEMM peak: the best\n"
    "of oneDNN, OpenBLAS and BLIS at a 2048^3 matmul (bf16 inputs for bf16 GEMMs: oneDNN)\n"
    "timed between the same steps (MFU, the headline), and as a fraction of the CPU's FMA\n"
    "limit (register-only FMA chains on every thread, timed there too: MFU against the\n"
    "silicon). Two\n"
    "counts: PaLM's (6 x parameters x tokens + 12 x n_layer x T x d_model x tokens, the\n"
    "attention over the full T x T; the headline, comparable with published MFUs) and\n"
    "the causal one (6 x n_layer x (T+1) x d_model x tokens for the attention: only the\n"
    "entries the causal mask keeps).\n"
    "Each GEMM part names the library and kernel that ran it (oneDNN's with its ISA:\n"
    "brg:avx512_core is float32 on AVX-512, brg:avx512_core_bf16 AVX512_BF16, ..._amx\n"
    "AMX; or OpenBLAS / BLIS with their kernel set: model.gemm); --matmul-precision\n"
    "f32,bf16 profiles both, one after the other per thread count. Config keys given as\n"
    "--section.key=value (as for wte train) change --config's keys for step, so a variant\n"
    "of a config is profiled without writing a new file.\n"
    "\nExamples:\n  wte profile scatter --dist zipf:1.1,uniform --threads 1,2 --chart s.svg\n"
    "  wte profile step --config configs/default.ini --threads 1,2\n"
    "  wte profile step --config configs/default.ini --matmul-precision f32,bf16\n"
    "  wte profile step --config configs/embedding_only.ini --model.loss_chunk=128\n";

// `wte profile`'s command line, every value checked.
struct ProfileOptions {
  bool help = false;                        // --help was printed
  std::string what;                         // scatter, gather, step or all
  bool kernels = false, with_step = false;  // what measures the kernels, the step
  profile::KernelProfileSettings settings;  // V, C, N, the effective repeat, dists, threads, ...
  std::string config_name;                  // step's config as printed: path and overrides
  Config config;                            // step's config (Config() without step)
  std::vector<std::string> precisions;      // step's GEMM precisions; empty: the config's
  std::optional<std::string> json, chart;   // output files, checked writable
};

void add_profile_options(po::options_description& desc) {
  desc.add_options()("help,h", "print this help")(
      "vocab-size", po::value<std::string>()->default_value("50257"),
      "V: rows of the table, in [1, 2^31)")(
      "d-model", po::value<std::string>()->default_value("768"), "C: floats per row, in [1, 2^16]")(
      "n-tokens", po::value<std::string>()->default_value("8192"),
      "N: ids per step (B*T), in [1, 2^31)")(
      "dist", po::value<std::string>()->default_value("uniform,zipf:1.1"),
      "comma-separated id distributions: uniform, zipf:S, same, sequential, file:PATH (int32 ids)")(
      "threads", po::value<std::string>()->default_value("1,2"), "comma-separated thread counts")(
      "strategy", po::value<std::string>()->default_value("all"),
      "scatter strategy: all, auto, serial, sorted, row-range, private-hot")(
      "repeat", po::value<std::string>()->default_value("15"),
      "timed repeats per measurement (median), in [1, 100000]")(
      "config,c", po::value<std::string>(),
      "config for `step` (default: the built-in defaults); --section.key=value changes its keys")(
      "matmul-precision", po::value<std::string>(),
      "step: comma-separated GEMM input precisions to profile, each f32 or bf16, e.g. f32,bf16 "
      "(default: the config's model.matmul_precision)")(
      "json", po::value<std::string>(), "also write every measurement to this JSON file")(
      "chart", po::value<std::string>(), "draw GB/s per strategy and distribution as SVG")(
      "quick", "small repeat counts and buffers: finishes in well under 30 s")(
      "seed", po::value<std::string>()->default_value("1234"), "seed of the generated ids, in [0, 2^64)");
}

// --dist: each item parsed (a bad one is a usage error); a file: item's path checked before any
// work (a FIFO would block the read, a directory or device is no token file).
std::vector<profile::IdDistribution> parse_distributions(const std::string& text) {
  std::vector<profile::IdDistribution> dists;
  for (const std::string& d : split_list("--dist", text)) {
    try {
      dists.push_back(profile::parse_distribution(d));
    } catch (const Error& e) {
      throw UsageError(e.what());  // a distribution that does not parse is a bad value
    }
    if (dists.back().kind == profile::IdDistribution::Kind::kFile)
      io::require_input_file("--dist file: ", dists.back().path);
  }
  return dists;
}

// --threads: distinct whole numbers in [1, 1024] ("1,1,1" would measure the same thing three
// times without a word).
std::vector<int> parse_thread_counts(const std::string& text) {
  std::vector<int> counts;
  for (const std::string& t : split_list("--threads", text)) {
    const int n = static_cast<int>(parse_whole_number("--threads", t, 1, 1024));
    if (std::find(counts.begin(), counts.end(), n) != counts.end())
      throw UsageError("--threads = '" + text + "' lists " + t +
                       " more than once; allowed: distinct thread counts");
    counts.push_back(n);
  }
  return counts;
}

// --strategy: "all" (every strategy, kAuto last) or one strategy's name.
std::vector<ScatterStrategy> parse_strategies(const std::string& text) {
  if (text == "all")
    return {ScatterStrategy::kSerial, ScatterStrategy::kSorted, ScatterStrategy::kRowRange,
            ScatterStrategy::kPrivateHot, ScatterStrategy::kAuto};
  ScatterStrategy s;
  if (!parse_scatter_strategy(text.c_str(), &s))
    throw UsageError("--strategy '" + text + "' is not a strategy; allowed: all, auto, serial, "
                     "sorted, row-range, private-hot" +
                     io::did_you_mean(text, {"all", "auto", "serial", "sorted", "row-range",
                                             "private-hot"}));
  return {s};
}

// --matmul-precision: comma-separated f32 or bf16.
std::vector<std::string> parse_precisions(const std::string& text) {
  std::vector<std::string> precisions;
  for (const std::string& p : split_list("--matmul-precision", text)) {
    if (p != "f32" && p != "bf16")
      throw UsageError("--matmul-precision '" + p + "' is not a precision; allowed: f32, bf16 "
                       "(comma-separated)" + io::did_you_mean(p, {"f32", "bf16"}));
    precisions.push_back(p);
  }
  return precisions;
}

// step's config: --config (or the built-in defaults) with the command line's keys; the name
// printed with the step's table.
void load_step_config(ProfileOptions& o, const std::string& config_path,
                      const std::vector<std::string>& overrides) {
  o.config_name = !config_path.empty()
                      ? config_path
                      : std::string("the built-in defaults (configs/default.ini's model)");
  for (const std::string& ov : overrides) o.config_name += " " + ov;
  if (!o.with_step) return;
  // load_config without a file is the built-in defaults, configs/default.ini's model (parsing
  // empty INI text instead would give a stored config's reading: ModelConfig's field defaults).
  o.config = usage_errors_of_overrides([&] { return load_config(config_path, overrides); });
}

// Parses and checks `wte profile`'s command line (argv[0] is "profile"), every value before any
// measurement, in the order the errors are reported. Throws UsageError for a bad option or value,
// wte::Error for an unusable file.
ProfileOptions parse_profile_options(int argc, char** argv) {
  po::options_description desc("Options");
  add_profile_options(desc);
  po::positional_options_description pos;
  pos.add("what", 1);
  po::options_description hidden;
  hidden.add_options()("what", po::value<std::string>()->default_value("all"));
  CommandSpec spec;
  spec.usage = kProfileUsage;
  spec.example = kProfileExample;
  spec.aliases = {{"--vocab", "--vocab-size"}, {"--tokens", "--n-tokens"}};
  spec.hidden = &hidden;
  spec.positional = &pos;
  spec.config_overrides = true;
  const CommandLine cl = parse_command_line(argc, argv, desc, spec);
  ProfileOptions o;
  o.help = cl.help;
  if (cl.help) return o;
  const po::variables_map& vm = cl.vm;
  o.what = vm["what"].as<std::string>();
  if (o.what != "scatter" && o.what != "gather" && o.what != "step" && o.what != "all")
    throw UsageError("unknown part '" + o.what + "'; allowed: scatter, gather, step, all, comm, loss" +
                     io::did_you_mean(o.what, {"scatter", "gather", "step", "all", "comm", "loss"}));
  o.with_step = o.what == "step" || o.what == "all";
  o.kernels = o.what != "step";
  if (!o.with_step && !cl.overrides.empty())
    throw UsageError("config keys (" + cl.overrides.front() + ") change the config of `step` only; "
                     "allowed with wte profile step or all");
  const std::string config_path = resolve_config_path(file_option(vm, "config"));
  if (!o.with_step && !config_path.empty())
    throw UsageError("--config is the config of `step` only; allowed with wte profile step or all");
  profile::KernelProfileSettings& s = o.settings;
  s.quick = vm.count("quick") > 0;
  s.gather = o.what == "gather" || o.what == "all";
  s.scatter = o.what == "scatter" || o.what == "all";
  s.V = whole_number_option(vm, "vocab-size", 1, (size_t{1} << 31) - 1);
  s.C = whole_number_option(vm, "d-model", 1, size_t{1} << 16);
  s.N = whole_number_option(vm, "n-tokens", 1, (size_t{1} << 31) - 1);
  const size_t repeat = whole_number_option(vm, "repeat", 1, 100000);
  s.repeat = s.quick ? 3 : repeat;
  s.dists = parse_distributions(vm["dist"].as<std::string>());
  s.threads = parse_thread_counts(vm["threads"].as<std::string>());
  s.strategies = parse_strategies(vm["strategy"].as<std::string>());
  s.seed = whole_number_option(vm, "seed", 0, UINT64_MAX);
  if (vm.count("matmul-precision"))
    o.precisions = parse_precisions(vm["matmul-precision"].as<std::string>());
  if (vm.count("json")) check_output_file("--json", *(o.json = vm["json"].as<std::string>()));
  if (vm.count("chart")) check_output_file("--chart", *(o.chart = vm["chart"].as<std::string>()));
  load_step_config(o, config_path, cl.overrides);
  if (o.with_step && o.precisions.empty())
    o.precisions.push_back(to_string(o.config.model.matmul_precision));
  return o;
}

// Memory, before any output or allocation: refused with the part and the setting to change, as
// wte train's start-up check (train/memory.h).
void check_profile_memory(const ProfileOptions& o) {
  if (o.kernels) {
    const double V = static_cast<double>(o.settings.V), C = static_cast<double>(o.settings.C),
                 N = static_cast<double>(o.settings.N);
    const double probe = 2.0 * static_cast<double>(profile::copy_probe_bytes(o.settings.quick));
    check_memory({{"the table, its gradient and AdamW m and v (4 x V x C floats)", 16 * V * C,
                   "--vocab-size x --d-model", "--vocab-size or --d-model"},
                  {"hidden states and their gradients (3 x N x C + min(N, V) x C floats)",
                   4 * (3 * N + std::min(N, V)) * C + 8 * N + V, "--n-tokens x --d-model",
                   "--n-tokens or --d-model"},
                  {"the streaming-copy probe", probe, "nothing (a fixed size)",
                   "its size with --quick"}},
                 "wte profile " + o.what);
  }
  if (o.with_step)
    for (const std::string& precision : o.precisions) {
      Config cfg = o.config;
      cfg.model.matmul_precision = precision == "bf16" ? MatmulPrecision::bf16 : MatmulPrecision::f32;
      check_memory(estimate_training_memory(cfg), "wte profile step (" + o.config_name + ")");
    }
}

// A progress line, rewritten in place; only on a terminal (a captured stderr gets none).
void progress_line(const std::string& line) {
  static const bool tty = isatty(fileno(stderr)) != 0;
  if (!tty) return;
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
}

// The warm gather, scatter and lazy-AdamW results as bars (GB/s), each with its thread count's
// streaming-copy bandwidth (dashed) and, for the gather, the random-row memcpy (dotted) measured in
// the same run, drawn by the one SVG writer (src/analysis/svg.h).
std::string svg_chart(const std::vector<profile::KernelMeasurement>& rows, const std::string& title) {
  const std::string kGather = svg::category_colour(0), kScatter = svg::category_colour(1),
                    kLazy = svg::category_colour(4);
  std::vector<svg::Bar> bars;
  char tip[512];
  for (const profile::KernelMeasurement& r : rows) {
    if (r.cache != "warm" || (r.kernel != "scatter" && r.kernel != "gather" && r.kernel != "lazy-adamw"))
      continue;
    svg::Bar b;
    b.label = std::to_string(r.threads) + "t " + r.dist + " " + r.kernel + " " + r.strategy;
    b.value = r.gbs();
    b.colour = r.kernel == "gather" ? kGather : r.kernel == "scatter" ? kScatter : kLazy;
    std::snprintf(tip, sizeof tip, "%s: %.2f GB/s (%.0f%% of the copy limit %.2f GB/s)",
                  b.label.c_str(), r.gbs(), 100.0 * r.gbs() / r.copy_gbs, r.copy_gbs);
    b.tip = tip;
    b.marks.push_back({r.copy_gbs, "black", "4 2"});
    if (r.kernel == "gather") b.marks.push_back({r.rows_gbs, "#d62728", "1 2"});
    bars.push_back(b);
  }
  const std::vector<svg::LegendEntry> legend = {
      {"gather", kGather, ""},
      {"scatter", kScatter, ""},
      {"lazy-adamw", kLazy, ""},
      {"streaming copy limit", "black", "4 2"},
      {"random-row memcpy", "#d62728", "1 2"}};
  return svg::bar_chart({title, "threads, id distribution, kernel, strategy (warm caches)", "GB/s"},
                        bars, legend);
}

// The machine's state, printed before measuring (a warning on stderr and stdout if busy) and
// recorded in the JSON: on a shared machine the numbers are not the machine's own.
nlohmann::json machine_json(const profile::MachineState& m) {
  return {{"cpu_model", m.cpu_model},
          {"cpu_family", m.cpu_family},
          {"cpus", m.cpus},
          {"l1d_bytes", m.l1d_bytes},
          {"l2_bytes", m.l2_bytes},
          {"l3_bytes", m.l3_bytes},
          {"cache_source", m.cache_source},
          {"highway_target", m.highway_target},
          {"highway_cap", m.highway_cap},
          {"onednn_isa", m.onednn_isa},
          {"transparent_hugepages", m.transparent_hugepages},
          {"load_average", {m.load_average[0], m.load_average[1], m.load_average[2]}},
          {"busy", m.busy()}};
}

void print_machine(const profile::MachineState& m) {
  std::printf("machine: %s (%s), %d CPUs; load average %.2f %.2f %.2f (1, 5, 15 min)\n",
              m.cpu_model.c_str(), m.cpu_family.c_str(), m.cpus, m.load_average[0],
              m.load_average[1], m.load_average[2]);
  std::printf("machine: %s\n", m.describe().c_str());
  if (m.busy()) {
    char msg[256];
    std::snprintf(msg, sizeof msg,
                  "warning: the machine is busy (load average %.2f on %d CPUs): other processes "
                  "share the cores and memory bandwidth, so these timings are not the machine's own",
                  m.load_average[0], m.cpus);
    std::printf("%s\n", msg);
    std::fprintf(stderr, "wte profile: %s\n", msg);
  }
  std::fflush(stdout);
}

// The kernels' table: a header naming the shapes, the machine and the load average before and
// after (`before`, and read now), then one line per measurement.
void print_kernel_table(const std::vector<profile::KernelMeasurement>& rows,
                        const profile::KernelProfileSettings& s,
                        const profile::MachineState& before) {
  const profile::MachineState now = profile::read_machine_state();
  std::printf("\nV %zu, C %zu, N %zu; median of %zu; GB/s of the bytes each kernel must move "
              "(wte profile --help); %%copy = of the streaming copy (vector loads, non-temporal "
              "stores), %%rows = of a memcpy of the same random rows, same run; %s (%s); %s; "
              "load average %.2f before, %.2f after%s\n",
              s.V, s.C, s.N, s.repeat, before.cpu_model.c_str(), before.cpu_family.c_str(),
              before.describe().c_str(), before.load_average[0], now.load_average[0],
              before.busy() || now.busy() ? " (BUSY machine)" : "");
  std::printf("%3s %-12s %-5s %-11s %-18s %9s %8s %7s %7s  %s\n", "thr", "dist", "cache", "kernel",
              "strategy", "ms", "GB/s", "%copy", "%rows", "note");
  for (const profile::KernelMeasurement& r : rows)
    std::printf("%3d %-12s %-5s %-11s %-18s %9.3f %8.2f %6.0f%% %6.0f%%  %s\n", r.threads,
                r.dist.c_str(), r.cache.c_str(), r.kernel.c_str(), r.strategy.c_str(),
                r.seconds * 1e3, r.gbs(), 100.0 * r.gbs() / r.copy_gbs, 100.0 * r.gbs() / r.rows_gbs,
                r.note.c_str());
}

// The step profile as a table: every part with ms, share of the parts' sum and (GEMMs) GFLOP/s,
// then the model FLOPs, the GEMM peak of the same run and the MFU.
void print_step_profile(const profile::StepProfile& p, const ModelConfig& m,
                        const std::string& config_name, const std::string& ids) {
  std::printf("\nstep: %s: V %zu, C %zu, n_layer %zu, n_head %zu, B %zu, T %zu, %s lm_head, %d "
              "thread(s), ids %s; median of %zu steps: %.2f ms (%.0f tokens/s)\n",
              config_name.c_str(), m.vocab_size, m.d_model, m.n_layer, m.n_head, p.B, p.T,
              m.tie_embeddings ? "tied" : "untied", p.threads, ids.c_str(), p.steps, p.step_ms,
              p.tokens_per_s);
  double sum = 0, gemm_ms = 0, gemm_gflop = 0;
  for (const profile::StepPartTime& part : p.parts) {
    sum += part.ms;
    if (part.gemm) {
      gemm_ms += part.ms;
      gemm_gflop += part.gflop;
    }
  }
  std::printf("  GEMMs: %s\n", p.gemm_precision.c_str());
  // The name column: as wide as the longest name (the fused loss's is 44), counted in characters,
  // not bytes (names hold ᵀ and ·).
  auto chars = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  };
  size_t width = 32;
  for (const profile::StepPartTime& part : p.parts) width = std::max(width, chars(part.name));
  const int w = static_cast<int>(width);
  std::printf("  %-*s %9s %7s %9s  %s\n", w, "part", "ms", "share", "GFLOP/s", "GEMM kernel");
  for (const profile::StepPartTime& part : p.parts) {
    char gf[32] = "";
    if (part.gemm && part.ms > 0) std::snprintf(gf, sizeof gf, "%.1f", part.gflop / (part.ms * 1e-3));
    std::printf("  %s%*s %9.3f %6.1f%% %9s  %s\n", part.name.c_str(),
                static_cast<int>(width - chars(part.name)), "", part.ms, 100.0 * part.ms / sum, gf,
                part.kernel.c_str());
  }
  std::printf("  %-*s %9.3f %6.1f%% %9.1f\n", w, "all GEMMs", gemm_ms, 100.0 * gemm_ms / sum,
              gemm_gflop / (gemm_ms * 1e-3));
  std::printf("  %-*s %9.3f %6.1f%%  (the parts' medians sum to %.2f ms)\n", w,
              "all but the GEMMs", sum - gemm_ms, 100.0 * (sum - gemm_ms) / sum, sum);
  for (const profile::StepPartTime& part : p.parts)
    if (part.name == "softmax cross-entropy" && p.logits_copy_ms > 0)
      std::printf("  softmax cross-entropy = %.2f x a streaming read + write of its %.1f MB of logits "
                  "(%.3f ms: vector loads, non-temporal stores; timed between these steps)\n",
                  part.ms / p.logits_copy_ms, static_cast<double>(p.logits_bytes) / 1e6,
                  p.logits_copy_ms);
  // Two FLOP counts (src/profile/step_profile.h): PaLM's (attention over the full T x T), which the
  // headline MFU uses because other MFUs are quoted with it, and the causal work actually needed.
  std::printf("  model FLOPs per step, PaLM's convention (Chowdhery et al. 2022, full T x T "
              "attention): %.2f GFLOP = 6 x %zu parameters x %zu tokens + 12 x n_layer x T x C x "
              "tokens%s\n",
              p.model_flops / 1e9, p.matmul_parameters, p.B * p.T,
              p.matmul_parameters != p.parameters ? " (the untied wte, a lookup, not counted)" : "");
  if (m.n_layer > 0)
    std::printf("  model FLOPs per step, causal (attention over the T(T+1)/2 entries the mask "
                "keeps): %.2f GFLOP = 6 x %zu parameters x %zu tokens + 6 x n_layer x (T+1) x C x "
                "tokens\n",
                p.model_flops_causal / 1e9, p.matmul_parameters, p.B * p.T);
  std::string peaks;
  for (const auto& [lib, gflops] : p.gemm_peaks) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.1f", peaks.empty() ? "" : ", ", to_string(lib), gflops);
    peaks += buf;
  }
  std::printf("  %s GEMM peak (%zu^3 matmul, timed between these steps): %.1f GFLOP/s on %s "
              "(GFLOP/s: %s)\n",
              p.bf16 ? "bf16" : "f32", p.peak_size, p.gemm_peak_gflops,
              to_string(p.gemm_peak_library), peaks.c_str());
  std::printf("  FMA limit (float32; %zu chains of %zu-lane FMAs on registers, %s, on %d "
              "thread%s, timed between these steps): %.1f GFLOP/s; the GEMM peak is %.1f%% of it\n",
              kFmaChains, p.fma_lanes, hwy::TargetName(simd_dispatch_target()), p.threads,
              p.threads == 1 ? "" : "s", p.fma_limit_gflops,
              100.0 * p.gemm_peak_gflops / p.fma_limit_gflops);
  std::printf("  MFU, PaLM's count (the headline, against the GEMM peak): %s\n",
              profile::mfu_line(p.model_flops / (p.step_ms * 1e-3) / 1e9, p.mfu).c_str());
  std::printf("  MFU, PaLM's count, against the FMA limit (the silicon): %.1f%%\n",
              100.0 * p.mfu_fma);
  if (m.n_layer > 0)
    std::printf("  MFU, causal count: %s\n",
                profile::mfu_line(p.model_flops_causal / (p.step_ms * 1e-3) / 1e9, p.mfu_causal)
                    .c_str());
}

nlohmann::json step_profile_json(const profile::StepProfile& p, const ModelConfig& m) {
  nlohmann::json peaks = nlohmann::json::object();
  for (const auto& [lib, gflops] : p.gemm_peaks) peaks[to_string(lib)] = gflops;
  nlohmann::json parts = nlohmann::json::array();
  for (const profile::StepPartTime& part : p.parts)
    parts.push_back({{"part", part.name}, {"ms", part.ms}, {"gemm", part.gemm}, {"gflop", part.gflop},
                     {"kernel", part.kernel}});
  return {{"threads", p.threads}, {"V", m.vocab_size}, {"C", m.d_model}, {"n_layer", m.n_layer},
          {"n_head", m.n_head}, {"B", p.B}, {"T", p.T}, {"tied", m.tie_embeddings},
          {"parameters", p.parameters}, {"matmul_parameters", p.matmul_parameters}, {"steps", p.steps}, {"step_ms", p.step_ms},
          {"tokens_per_s", p.tokens_per_s}, {"model_flops", p.model_flops},
          {"model_flops_causal", p.model_flops_causal}, {"gemm_peak_gflops", p.gemm_peak_gflops},
          {"gemm_peak_size", p.peak_size}, {"mfu", p.mfu}, {"mfu_causal", p.mfu_causal},
          {"mfu_headline", "palm"}, {"gemm_peak_library", to_string(p.gemm_peak_library)},
          {"gemm_peaks", peaks}, {"fma_limit_gflops", p.fma_limit_gflops},
          {"fma_lanes", p.fma_lanes}, {"mfu_fma", p.mfu_fma},
          {"matmul_precision", p.bf16 ? "bf16" : "f32"}, {"gemm_precision", p.gemm_precision},
          {"logits_copy_ms", p.logits_copy_ms}, {"logits_bytes", p.logits_bytes},
          {"parts", parts}};
}

// step: one whole training step of the config, split into its layer kinds, with its MFU, at every
// thread count and, within one, every precision (interleaved: the same machine state), on ids of
// the first --dist. Prints each profile as it is measured; returns them as the JSON's "step".
nlohmann::json run_step_profiles(const ProfileOptions& o) {
  nlohmann::json out = nlohmann::json::array();
  Config cfg = o.config;
  const profile::KernelProfileSettings& s = o.settings;
  const size_t B = cfg.train.batch_size, T = cfg.data.seq_len;
  const profile::IdDistribution dist =
      s.dists.empty() ? profile::parse_distribution("zipf:1.1") : s.dists[0];
  const std::vector<int32_t> ids = profile::make_ids(dist, B * T + 1, cfg.model.vocab_size, s.seed);
  for (int threads : s.threads) {
    omp_set_num_threads(threads);
    for (const std::string& precision : o.precisions) {
      cfg.model.matmul_precision = precision == "bf16" ? MatmulPrecision::bf16 : MatmulPrecision::f32;
      char line[96];
      std::snprintf(line, sizeof line, "profile: step, %d thread(s), %s GEMMs...", threads,
                    precision.c_str());
      progress_line(line);
      profile::StepProfile p =
          profile::profile_step(cfg, ids, s.quick ? 4 : s.repeat, s.quick ? 512 : 2048);
      p.threads = threads;
      progress_line("");
      print_step_profile(p, cfg.model, o.config_name, dist.label);
      out.push_back(step_profile_json(p, cfg.model));
    }
  }
  return out;
}

// --json: the shapes, the machine before and now, every kernel measurement and the step profiles.
void write_profile_json(const std::string& path, const ProfileOptions& o,
                        const profile::MachineState& before,
                        const std::vector<profile::KernelMeasurement>& rows,
                        const nlohmann::json& step_json) {
  nlohmann::json j;
  j["vocab"] = o.settings.V;
  j["d_model"] = o.settings.C;
  j["tokens"] = o.settings.N;
  j["repeat"] = o.settings.repeat;
  j["machine"] = machine_json(before);
  j["machine_after"] = machine_json(profile::read_machine_state());
  j["kernels"] = nlohmann::json::array();
  for (const profile::KernelMeasurement& r : rows)
    j["kernels"].push_back({{"threads", r.threads}, {"dist", r.dist}, {"kernel", r.kernel},
                            {"strategy", r.strategy}, {"cache", r.cache}, {"ms", r.seconds * 1e3},
                            {"bytes", r.bytes}, {"gbs", r.gbs()}, {"copy_gbs", r.copy_gbs},
                            {"rows_gbs", r.rows_gbs}, {"note", r.note}});
  j["step"] = step_json;
  write_file_atomic(path, j.dump(1) + '\n');
}

}  // namespace

int cmd_profile(int argc, char** argv) {
  // The subcommands report their own errors, so they read "wte profile comm: error: ...".
  if (argc >= 2 && std::string(argv[1]) == "comm")
    return run_reporting_errors("profile comm", [&] { return cmd_profile_comm(argc - 1, argv + 1); });
  if (argc >= 2 && std::string(argv[1]) == "loss")
    return run_reporting_errors("profile loss", [&] { return cmd_profile_loss(argc - 1, argv + 1); });
  const ProfileOptions o = parse_profile_options(argc, argv);
  if (o.help) return 0;
  check_profile_memory(o);
  const profile::MachineState machine_before = profile::read_machine_state();
  print_machine(machine_before);
  std::vector<profile::KernelMeasurement> rows;
  if (o.kernels) rows = profile::profile_kernels(o.settings, progress_line);
  const nlohmann::json step_json = o.with_step ? run_step_profiles(o) : nlohmann::json::array();
  if (!rows.empty()) print_kernel_table(rows, o.settings, machine_before);
  if (o.json) write_profile_json(*o.json, o, machine_before, rows, step_json);
  if (o.chart) {
    char title[160];
    std::snprintf(title, sizeof title, "wte profile: GB/s per kernel (V %zu, C %zu, N %zu) on %s",
                  o.settings.V, o.settings.C, o.settings.N, machine_before.cpu_model.c_str());
    write_file_atomic(*o.chart, svg_chart(rows, title));
  }
  return 0;
}

}  // namespace wte::cli
