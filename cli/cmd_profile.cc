// `wte profile scatter|gather|step|all`: how fast the embedding lookup (gather), its backward
// (scatter, every strategy) and a whole training step run on this machine, beside the machine's
// memory limits measured in the same run.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "wte/kernels.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "src/profile/profile.h"
#include "src/profile/step_profile.h"
#include "src/analysis/svg.h"
#include "cli/options.h"
#include "cli/commands.h"
#include "train/run_directory.h"

namespace po = boost::program_options;

namespace wte::cli {
namespace {

using profile::median_seconds;

// One measured line of the table.
struct Row {
  int threads = 1;
  std::string dist, kernel, strategy, cache;
  double seconds = 0, bytes = 0;
  double copy_gbs = 0, rows_gbs = 0;  // the limits measured in the same run (same threads, cache)
  std::string note;
  double gbs() const { return bytes / seconds / 1e9; }
};

// FNV-1a of the bytes of the given rows of a (V, C) table: equal hashes <=> (almost surely) equal bits.
uint64_t hash_rows(const float* table, const std::vector<int32_t>& rows, size_t C) {
  uint64_t h = 1469598103934665603ULL;
  for (int32_t r : rows) {
    const auto* p = reinterpret_cast<const unsigned char*>(table + static_cast<size_t>(r) * C);
    for (size_t i = 0; i < C * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ULL;
  }
  return h;
}

// A progress line, rewritten in place; only on a terminal (a captured stderr gets none).
void progress(const char* fmt, auto... args) {
  static const bool tty = isatty(fileno(stderr)) != 0;
  if (!tty) return;
  std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, fmt, args...);
  std::fflush(stderr);
}

// The warm gather, scatter and lazy-AdamW results as bars (GB/s), each with its thread count's
// streaming-copy bandwidth (dashed) and, for the gather, the random-row memcpy (dotted) measured in
// the same run, drawn by the one SVG writer (src/analysis/svg.h).
std::string svg_chart(const std::vector<Row>& rows, const std::string& title) {
  const std::string kGather = svg::category_colour(0), kScatter = svg::category_colour(1),
                    kLazy = svg::category_colour(4);
  std::vector<svg::Bar> bars;
  char tip[512];
  for (const Row& r : rows) {
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
  std::printf("  %-*s %9s %7s %9s  %s\n", w, "part", "ms", "share", "GFLOP/s", "oneDNN kernel");
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
  std::printf("  model FLOPs per step: %.2f GFLOP = 6 x %zu parameters x %zu tokens + attention "
              "12 x n_layer x T x C x tokens%s\n",
              p.model_flops / 1e9, p.matmul_parameters, p.B * p.T,
              p.matmul_parameters != p.parameters ? " (the untied wte, a lookup, not counted)" : "");
  std::printf("  oneDNN %s GEMM peak (%zu^3 matmul, timed between these steps): %.1f GFLOP/s\n",
              p.bf16 ? "bf16" : "f32", p.peak_size, p.gemm_peak_gflops);
  std::printf("  %s\n", profile::mfu_line(p.model_flops / (p.step_ms * 1e-3) / 1e9, p.mfu).c_str());
}

nlohmann::json step_profile_json(const profile::StepProfile& p, const ModelConfig& m) {
  nlohmann::json parts = nlohmann::json::array();
  for (const profile::StepPartTime& part : p.parts)
    parts.push_back({{"part", part.name}, {"ms", part.ms}, {"gemm", part.gemm}, {"gflop", part.gflop},
                     {"kernel", part.kernel}});
  return {{"threads", p.threads}, {"V", m.vocab_size}, {"C", m.d_model}, {"n_layer", m.n_layer},
          {"n_head", m.n_head}, {"B", p.B}, {"T", p.T}, {"tied", m.tie_embeddings},
          {"parameters", p.parameters}, {"matmul_parameters", p.matmul_parameters}, {"steps", p.steps}, {"step_ms", p.step_ms},
          {"tokens_per_s", p.tokens_per_s}, {"model_flops", p.model_flops},
          {"gemm_peak_gflops", p.gemm_peak_gflops}, {"gemm_peak_size", p.peak_size}, {"mfu", p.mfu},
          {"matmul_precision", p.bf16 ? "bf16" : "f32"}, {"gemm_precision", p.gemm_precision},
          {"logits_copy_ms", p.logits_copy_ms}, {"logits_bytes", p.logits_bytes},
          {"parts", parts}};
}

}  // namespace

int cmd_profile(int argc, char** argv) {
  // The subcommands report their own errors, so they read "wte profile comm: error: ...".
  if (argc >= 2 && std::string(argv[1]) == "comm")
    return run_reporting_errors("profile comm", [&] { return cmd_profile_comm(argc - 1, argv + 1); });
  if (argc >= 2 && std::string(argv[1]) == "loss")
    return run_reporting_errors("profile loss", [&] { return cmd_profile_loss(argc - 1, argv + 1); });
  po::options_description desc("Options");
  desc.add_options()("help,h", "print this help")(
      "vocab-size", po::value<std::string>()->default_value("50257"),
      "V: rows of the table, in [1, 2^31) (old name --vocab)")(
      "d-model", po::value<std::string>()->default_value("768"), "C: floats per row, in [1, 2^16]")(
      "n-tokens", po::value<std::string>()->default_value("8192"),
      "N: ids per step (B*T), in [1, 2^31) (old name --tokens)")(
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
  po::positional_options_description pos;
  pos.add("what", 1);
  po::options_description hidden;
  hidden.add_options()("what", po::value<std::string>()->default_value("all"));
  CommandSpec spec;
  spec.usage =
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
  spec.example =
      "Bytes each kernel must move (f32): gather and lookup 2*N*C*4 (rows read + out\n"
      "written; the lookup also adds wpe, which stays in cache); copy 2*bytes; read and\n"
      "row-read the bytes read (row-read: N*C*4, the gather's rows without the writes);\n"
      "scatter (N + 2U)*C*4 + 4N (dhidden read, U touched rows read and written, ids);\n"
      "lazy-adamw (N + 6U)*C*4 + 4N (dhidden; param, m, v of U rows read and written).\n"
      "\nstep: one training step of --config (forward, backward, clip, AdamW) on ids of the\n"
      "first --dist, split into every layer kind (lookup, each GEMM family, attention's\n"
      "QKᵀ, softmax and ·V, LayerNorms, GELU, residual adds, cross-entropy, scatter,\n"
      "optimizer; block parts summed over the layers) with ms, share and GEMM GFLOP/s;\n"
      "then the model FLOPs per step (6 x parameters x tokens + 12 x n_layer x T x d_model\n"
      "x tokens for attention) per second as a fraction of the oneDNN GEMM peak: a\n"
      "2048^3 matmul (bf16 inputs for bf16 GEMMs) timed between the same steps (MFU).\n"
      "Each GEMM part names oneDNN's kernel (its ISA: brg:avx512_core is float32 on\n"
      "AVX-512, brg:avx512_core_bf16 AVX512_BF16, ..._amx AMX); --matmul-precision\n"
      "f32,bf16 profiles both, one after the other per thread count. Config keys given as\n"
      "--section.key=value (as for wte train) change --config's keys for step, so a variant\n"
      "of a config is profiled without writing a new file.\n"
      "\nExamples:\n  wte profile scatter --dist zipf:1.1,uniform --threads 1,2 --chart s.svg\n"
      "  wte profile step --config configs/default.ini --threads 1,2\n"
      "  wte profile step --config configs/default.ini --matmul-precision f32,bf16\n"
      "  wte profile step --config configs/embedding_only.ini --model.loss_chunk=128\n";
  spec.aliases = {{"--vocab", "--vocab-size"}, {"--tokens", "--n-tokens"}};
  spec.hidden = &hidden;
  spec.positional = &pos;
  spec.config_overrides = true;
  const CommandLine cl = parse_command_line(argc, argv, desc, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  const std::string what = vm["what"].as<std::string>();
  if (what != "scatter" && what != "gather" && what != "step" && what != "all")
    throw UsageError("unknown part '" + what + "'; allowed: scatter, gather, step, all, comm, loss");
  const bool with_step = what == "step" || what == "all";
  if (!with_step && !cl.overrides.empty())
    throw UsageError("config keys (" + cl.overrides.front() + ") change the config of `step` only; "
                     "allowed with wte profile step or all");
  const std::string config_path = file_option(vm, "config");
  if (!with_step && !config_path.empty())
    throw UsageError("--config is the config of `step` only; allowed with wte profile step or all");
  const bool quick = vm.count("quick") > 0;
  // Every option checked, and the output files probed, before any measurement.
  const size_t V = whole_number_option(vm, "vocab-size", 1, (size_t{1} << 31) - 1),
               C = whole_number_option(vm, "d-model", 1, size_t{1} << 16),
               N = whole_number_option(vm, "n-tokens", 1, (size_t{1} << 31) - 1);
  const size_t repeat_arg = whole_number_option(vm, "repeat", 1, 100000);
  const size_t repeat = quick ? 3 : repeat_arg;
  std::vector<profile::IdDistribution> dists;
  for (const std::string& d : split_list("--dist", vm["dist"].as<std::string>())) {
    try {
      dists.push_back(profile::parse_distribution(d));
    } catch (const Error& e) {
      throw UsageError(e.what());  // a distribution that does not parse is a bad value
    }
    // A FIFO would block the read, a directory or device is no token file: named before any work.
    if (dists.back().kind == profile::IdDistribution::Kind::kFile)
      io::require_input_file("--dist file: ", dists.back().path);
  }
  std::vector<int> thread_counts;
  for (const std::string& t : split_list("--threads", vm["threads"].as<std::string>())) {
    const int n = static_cast<int>(parse_whole_number("--threads", t, 1, 1024));
    // "1,1,1" would measure the same thing three times without a word (report-fresh20 item 12).
    if (std::find(thread_counts.begin(), thread_counts.end(), n) != thread_counts.end())
      throw UsageError("--threads = '" + vm["threads"].as<std::string>() + "' lists " + t +
                       " more than once; allowed: distinct thread counts");
    thread_counts.push_back(n);
  }
  std::vector<ScatterStrategy> strategies;
  const std::string strategy_arg = vm["strategy"].as<std::string>();
  if (strategy_arg == "all") {
    strategies = {ScatterStrategy::kSerial, ScatterStrategy::kSorted, ScatterStrategy::kRowRange,
                  ScatterStrategy::kPrivateHot, ScatterStrategy::kAuto};
  } else {
    ScatterStrategy s;
    if (!parse_scatter_strategy(strategy_arg.c_str(), &s))
      throw UsageError("--strategy '" + strategy_arg +
                       "' is not a strategy; allowed: all, auto, serial, sorted, row-range, "
                       "private-hot");
    strategies = {s};
  }
  const uint64_t seed = whole_number_option(vm, "seed", 0, UINT64_MAX);
  std::vector<std::string> precisions;  // empty: the config's
  if (vm.count("matmul-precision")) {
    for (const std::string& p :
         split_list("--matmul-precision", vm["matmul-precision"].as<std::string>())) {
      if (p != "f32" && p != "bf16")
        throw UsageError("--matmul-precision '" + p + "' is not a precision; allowed: f32, bf16 "
                         "(comma-separated)");
      precisions.push_back(p);
    }
  }
  if (vm.count("json")) check_output_file("--json", vm["json"].as<std::string>());
  if (vm.count("chart")) check_output_file("--chart", vm["chart"].as<std::string>());
  // step's config: --config (or the built-in defaults) with the command line's keys, read before
  // any measurement.
  std::string config_name =
      !config_path.empty() ? config_path : std::string("the built-in defaults");
  for (const std::string& o : cl.overrides) config_name += " " + o;
  const Config file_cfg =
      !with_step ? Config()
                 : usage_errors_of_overrides([&] {
                     return !config_path.empty()
                                ? load_config(config_path, cl.overrides)
                                : parse_config("", "the built-in defaults", cl.overrides);
                   });
  // Memory, before any output or allocation: refused with the part and the setting to change,
  // as wte train's start-up check (train/run_directory.h).
  const bool kernels = what != "step";
  const size_t probe_bytes = quick ? (48u << 20) : (256u << 20);  // profile::CopyProbe's buffers
  if (kernels) {
    const double Vd = static_cast<double>(V), Cd = static_cast<double>(C),
                 Nd = static_cast<double>(N);
    check_memory({{"the table, its gradient and AdamW m and v (4 x V x C floats)", 16 * Vd * Cd,
                   "--vocab-size x --d-model", "--vocab-size or --d-model"},
                  {"hidden states and their gradients (3 x N x C + min(N, V) x C floats)",
                   4 * (3 * Nd + std::min(Nd, Vd)) * Cd + 8 * Nd + Vd, "--n-tokens x --d-model",
                   "--n-tokens or --d-model"},
                  {"the streaming-copy probe", 2.0 * static_cast<double>(probe_bytes),
                   "nothing (a fixed size)", "its size with --quick"}},
                 "wte profile " + what);
  }
  if (with_step)
    for (const std::string& precision :
         precisions.empty() ? std::vector<std::string>{to_string(file_cfg.model.matmul_precision)}
                            : precisions) {
      Config cfg = file_cfg;
      cfg.model.matmul_precision = precision == "bf16" ? MatmulPrecision::bf16 : MatmulPrecision::f32;
      check_memory(estimate_training_memory(cfg), "wte profile step (" + config_name + ")");
    }
  std::vector<Row> rows;
  nlohmann::json step_json = nlohmann::json::array();
  const profile::MachineState machine_before = profile::read_machine_state();
  print_machine(machine_before);

  if (kernels) {
    // Buffers allocated and touched once (page faults would dominate otherwise).
    progress("profile: allocating a %zu x %zu table (%.0f MB) and its moments...", V, C, V * C * 4e-6);
    Model::Buffer table = allocate_floats(V * C), dwte = allocate_floats(V * C),
                  m = allocate_floats(V * C), v = allocate_floats(V * C);
    Model::Buffer dhidden = allocate_floats(N * C), hidden = allocate_floats(N * C),
                  out_rows = allocate_floats(N * C), grad_rows = allocate_floats(std::min(N, V) * C);
    std::vector<int32_t> grad_ids(std::min(N, V));
    const size_t T = N % 128 == 0 ? 128 : 1, B = N / T;  // wpe (T, C) stays in L2 like in training
    Model::Buffer wpe = allocate_floats(T * C);
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (size_t i = 0; i < V * C; ++i) table[i] = normal(rng);
    for (size_t i = 0; i < N * C; ++i) dhidden[i] = normal(rng);
    for (size_t i = 0; i < T * C; ++i) wpe[i] = normal(rng);
    profile::CopyProbe copy(probe_bytes);
    ScatterWorkspace ws;
    const AdamWParams hp{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 10};
    // Bits of each deterministic strategy's result per distribution at the first thread count.
    std::vector<std::vector<uint64_t>> first_hash(dists.size(),
                                                  std::vector<uint64_t>(strategies.size(), 0));
    for (size_t ti = 0; ti < thread_counts.size(); ++ti) {
      const int threads = thread_counts[ti];
      omp_set_num_threads(threads);
      for (size_t di = 0; di < dists.size(); ++di) {
        const std::vector<int32_t> ids = profile::make_ids(dists[di], N, V, seed + di);
        const size_t U = profile::count_distinct(ids, V);
        std::vector<int32_t> touched;
        {
          std::vector<char> seen(V, 0);
          for (int32_t id : ids) seen[static_cast<size_t>(id)] = 1;
          for (size_t r = 0; r < V; ++r) if (seen[r]) touched.push_back(static_cast<int32_t>(r));
        }
        const std::string& label = dists[di].label;
        for (const char* cache : {"warm", "cold"}) {
          const bool flush = std::strcmp(cache, "cold") == 0;
          auto add = [&](const std::string& kernel, const std::string& strategy, double s,
                         double bytes, double copy_gbs, double rows_gbs, std::string note = "") {
            rows.push_back({threads, label, kernel, strategy, cache, s, bytes, copy_gbs, rows_gbs, note});
          };
          progress("profile: %d thread(s), %s, %s: limits...", threads, label.c_str(), cache);
          // The machine's limits: streaming copy (vector loads, non-temporal stores; and libc's
          // memcpy), streaming read, and the read of the same random rows (prefetched).
          volatile float sink = 0;
          const auto [copy_s, memcpy_s] = profile::paired_median_seconds(
              [&] { copy.run(); }, [&] { copy.run_memcpy(); }, repeat, flush);
          const double read_s = median_seconds([&] { sink = copy.run_read(); }, repeat, flush);
          const double copy_gbs = copy.bytes_moved() / copy_s / 1e9;
          const double gather_bytes = 2.0 * N * C * 4;
          const double row_read_s = median_seconds(
              [&] { sink = profile::read_rows(table.get(), ids.data(), N, C); }, repeat, flush);
          // The gather and its bounds (a memcpy of the same rows; the same rows read) are timed
          // interleaved, so their ratio sees the same machine state.
          const auto copy_rows = [&] {
            profile::copy_rows(out_rows.get(), table.get(), ids.data(), N, C);
          };
          const bool streams = gather_streams(N, C);
          const auto gather = [&] { embedding_gather(hidden.get(), ids.data(), table.get(), N, C); };
          const auto gather_other = [&] {
            embedding_gather(hidden.get(), ids.data(), table.get(), N, C,
                             streams ? GatherStores::kCached : GatherStores::kStreaming);
          };
          const auto lookup = [&] {
            embedding_forward(hidden.get(), ids.data(), table.get(), wpe.get(), B, T, C);
          };
          const bool with_gather = what == "gather" || what == "all";
          if (with_gather)
            progress("profile: %d thread(s), %s, %s: gather...", threads, label.c_str(), cache);
          const auto [rows_s, gather_s] =
              with_gather ? profile::paired_median_seconds(copy_rows, gather, repeat, flush)
                          : std::pair<double, double>{median_seconds(copy_rows, repeat, flush), 0.0};
          const double rows_gbs = gather_bytes / rows_s / 1e9;
          add("copy", "vector-nt", copy_s, copy.bytes_moved(), copy_gbs, rows_gbs);
          add("copy", "memcpy", memcpy_s, copy.bytes_moved(), copy_gbs, rows_gbs);
          add("read", "vector", read_s, static_cast<double>(copy.bytes), copy_gbs, rows_gbs);
          add("row-read", "prefetch", row_read_s, gather_bytes / 2, copy_gbs, rows_gbs,
              "rows read only");
          add("row-memcpy", "memcpy", rows_s, gather_bytes, copy_gbs, rows_gbs);
          if (with_gather) {
            add("gather", std::string("auto=") + (streams ? "stream" : "cached"), gather_s,
                gather_bytes, copy_gbs, rows_gbs);
            add("gather", streams ? "cached" : "stream",
                median_seconds(gather_other, repeat, flush), gather_bytes, copy_gbs, rows_gbs);
            add("lookup", "gather+wpe", median_seconds(lookup, repeat, flush), gather_bytes,
                copy_gbs, rows_gbs, "embedding_forward");
          }
          if (what == "scatter" || what == "all") {
            const double scatter_bytes = (static_cast<double>(N) + 2.0 * U) * C * 4 + 4.0 * N;
            for (size_t si = 0; si < strategies.size(); ++si) {
              const ScatterStrategy st = strategies[si];
              std::string name = scatter_strategy_name(st);
              if (st == ScatterStrategy::kAuto)
                name += std::string("=") +
                        scatter_strategy_name(choose_scatter_strategy(ids.data(), N, C, V));
              progress("profile: %d thread(s), %s, %s: scatter %s...", threads, label.c_str(), cache,
                       name.c_str());
              const double s = median_seconds(
                  [&] {
                    embedding_backward_wte_strategy(st, dwte.get(), dhidden.get(), ids.data(), N, C,
                                                    V, &ws);
                  },
                  repeat, flush);
              std::string note;
              if (!flush) {  // the result's bits from a zero table, compared across thread counts
                for (int32_t r : touched)
                  std::memset(dwte.get() + static_cast<size_t>(r) * C, 0, C * sizeof(float));
                embedding_backward_wte_strategy(st, dwte.get(), dhidden.get(), ids.data(), N, C, V, &ws);
                const uint64_t h = hash_rows(dwte.get(), touched, C);
                if (ti == 0) first_hash[di][si] = h;
                else note = h == first_hash[di][si] ? "same bits as " + std::to_string(thread_counts[0]) + "t"
                                                    : "bits differ from " + std::to_string(thread_counts[0]) + "t";
              }
              add("scatter", name, s, scatter_bytes, copy_gbs, rows_gbs, note);
            }
            // The lookup's gradient in its row-sparse form (U distinct ids + U summed rows, what
            // untied training hands to the lazy AdamW): no (V, C) buffer is read or written.
            progress("profile: %d thread(s), %s, %s: scatter rows...", threads, label.c_str(), cache);
            size_t num_rows = 0;
            const double rows_s = median_seconds(
                [&] {
                  embedding_backward_rows(grad_rows.get(), grad_ids.data(), &num_rows, dhidden.get(),
                                          ids.data(), N, C, V, &ws);
                },
                repeat, flush);
            add("scatter-rows", "sorted", rows_s,
                (static_cast<double>(N) + static_cast<double>(U)) * C * 4 + 4.0 * N, copy_gbs,
                rows_gbs, "U=" + std::to_string(U) + " rows out");
            progress("profile: %d thread(s), %s, %s: untied scatter + lazy AdamW...", threads,
                     label.c_str(), cache);
            const double s = median_seconds(
                [&] {
                  embedding_backward_adamw_lazy(table.get(), m.get(), v.get(), dhidden.get(),
                                                ids.data(), N, C, V, hp, &ws);
                },
                repeat, flush);
            add("lazy-adamw", "fused", s, (static_cast<double>(N) + 6.0 * U) * C * 4 + 4.0 * N,
                copy_gbs, rows_gbs, "U=" + std::to_string(U));
          }
        }
      }
    }
    progress("%s", "");
  }

  // --- step: one whole training step of a config, split into its layer kinds, with its MFU.
  if (with_step) {
    if (precisions.empty()) precisions.push_back(to_string(file_cfg.model.matmul_precision));
    Config cfg = file_cfg;
    const size_t B = cfg.train.batch_size, T = cfg.data.seq_len;
    const profile::IdDistribution dist =
        dists.empty() ? profile::parse_distribution("zipf:1.1") : dists[0];
    const std::vector<int32_t> ids = profile::make_ids(dist, B * T + 1, cfg.model.vocab_size, seed);
    for (int threads : thread_counts) {
      omp_set_num_threads(threads);
      for (const std::string& precision : precisions) {  // interleaved: same machine state
        cfg.model.matmul_precision =
            precision == "bf16" ? MatmulPrecision::bf16 : MatmulPrecision::f32;
        progress("profile: step, %d thread(s), %s GEMMs...", threads, precision.c_str());
        profile::StepProfile p = profile::profile_step(
            cfg, ids, quick ? 4 : repeat, quick ? 512 : 2048);
        p.threads = threads;
        progress("%s", "");
        print_step_profile(p, cfg.model, config_name, dist.label);
        step_json.push_back(step_profile_json(p, cfg.model));
      }
    }
  }

  if (!rows.empty()) {
    const profile::MachineState now = profile::read_machine_state();
    std::printf("\nV %zu, C %zu, N %zu; median of %zu; GB/s of the bytes each kernel must move "
                "(wte profile --help); %%copy = of the streaming copy (vector loads, non-temporal "
                "stores), %%rows = of a memcpy of the same random rows, same run; %s (%s); %s; "
                "load average %.2f before, %.2f after%s\n",
                V, C, N, repeat, machine_before.cpu_model.c_str(), machine_before.cpu_family.c_str(),
                machine_before.describe().c_str(), machine_before.load_average[0],
                now.load_average[0], machine_before.busy() || now.busy() ? " (BUSY machine)" : "");
    std::printf("%3s %-12s %-5s %-11s %-18s %9s %8s %7s %7s  %s\n", "thr", "dist", "cache", "kernel",
                "strategy", "ms", "GB/s", "%copy", "%rows", "note");
    for (const Row& r : rows)
      std::printf("%3d %-12s %-5s %-11s %-18s %9.3f %8.2f %6.0f%% %6.0f%%  %s\n", r.threads,
                  r.dist.c_str(), r.cache.c_str(), r.kernel.c_str(), r.strategy.c_str(),
                  r.seconds * 1e3, r.gbs(), 100.0 * r.gbs() / r.copy_gbs, 100.0 * r.gbs() / r.rows_gbs,
                  r.note.c_str());
  }
  if (vm.count("json")) {
    nlohmann::json j;
    j["vocab"] = V;
    j["d_model"] = C;
    j["tokens"] = N;
    j["repeat"] = repeat;
    j["machine"] = machine_json(machine_before);
    j["machine_after"] = machine_json(profile::read_machine_state());
    j["kernels"] = nlohmann::json::array();
    for (const Row& r : rows)
      j["kernels"].push_back({{"threads", r.threads}, {"dist", r.dist}, {"kernel", r.kernel},
                              {"strategy", r.strategy}, {"cache", r.cache}, {"ms", r.seconds * 1e3},
                              {"bytes", r.bytes}, {"gbs", r.gbs()}, {"copy_gbs", r.copy_gbs},
                              {"rows_gbs", r.rows_gbs}, {"note", r.note}});
    j["step"] = step_json;
    write_file_atomic(vm["json"].as<std::string>(), j.dump(1) + '\n');
  }
  if (vm.count("chart")) {
    char title[160];
    std::snprintf(title, sizeof title, "wte profile: GB/s per kernel (V %zu, C %zu, N %zu) on %s",
                  V, C, N, machine_before.cpu_model.c_str());
    write_file_atomic(vm["chart"].as<std::string>(), svg_chart(rows, title));
  }
  return 0;
}

}  // namespace wte::cli
