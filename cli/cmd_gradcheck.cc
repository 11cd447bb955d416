// `wte gradcheck [--config FILE | --checkpoint FILE] [--batch FILE] [--section.key=value ...]`:
// reads the options, sets up the model and batch (src/analysis/gradcheck_setup.h), runs the two
// checks of src/analysis/gradcheck.h and prints one line per tensor.
#include <boost/program_options.hpp>
#include <omp.h>

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wte/config.h"
#include "wte/error.h"
#include "src/analysis/gradcheck.h"
#include "src/analysis/gradcheck_setup.h"
#include "wte/model.h"
#include "cli/options.h"
#include "cli/config_path.h"
#include "cli/commands.h"

namespace po = boost::program_options;

namespace wte::cli {
namespace {

constexpr const char* kHelp =
    "Usage: wte gradcheck [--config FILE] [--section.key=value ...] [options]\n"
    "       wte gradcheck --checkpoint FILE [--batch FILE] [options]\n\n"
    "Checks wte's gradients on one batch, two ways, and prints one line per tensor:\n\n"
    "  fd   the analytic gradient of the double-precision reference model (src/reference/model.h)\n"
    "       against central finite differences in double, (L(x+eps) - L(x-eps)) / 2eps, eps 1e-6.\n"
    "       Pass: |analytic - numeric| <= atol + rtol*|numeric| (1e-5 + 1e-3*|n|) for every\n"
    "       checked entry. Checked: every wte row the batch looks up, --untouched-rows sampled rows\n"
    "       it does not, every wpe row, every ln_f entry, every entry of every block tensor\n"
    "       (h0/ln_1/g ... h{n_layer-1}/mlp/c_proj/b). The tied wte is checked whole ('wte') and\n"
    "       path by path: 'wte:lookup' (the scatter of the lookup backward; rows outside the batch\n"
    "       must be EXACTLY 0, analytic and numeric) and 'wte:unembedding' (dlogits^T h'). wpe rows\n"
    "       >= T and ln_f when it is off must also be exactly 0.\n"
    "  f32  the production float32 model (oneDNN + Highway, what `wte train` runs) against the\n"
    "       double reference at the same parameters: loss, logits, the residual stream after\n"
    "       each block (residual(l)) and every gradient tensor.\n"
    "       Pass: max|f32 - ref| <= f32-atol + f32-rtol*max|ref| per tensor (1e-5 + 1e-4*max).\n"
    "       Why: each value is a float32 sum of K <= max(C, V, B*T) terms, off by ~sqrt(K)*6e-8\n"
    "       (at worst K*6e-8) of the largest terms; at gradcheck's sizes that is far below 1e-4.\n\n"
    "Columns: entries compared, max absolute error, max relative error (fd: |a-n|/max(|a|,|n|);\n"
    "f32: max_abs/max|ref|), ok or FAIL; a FAIL line names the worst entry. Exit status 0 if every\n"
    "line passes, 1 if any fails (the failing tensors are named on the last line) or a file is\n"
    "bad, 2 bad usage (an unknown option, a bad value: e.g. --eps 0).\n\n"
    "The model: from --config (default: the built-in defaults) with its shapes shrunk to\n"
    "vocab_size <= 64, d_model <= 16, n_ctx <= 8, n_layer <= 2, batch <= 2, T <= 8 (each settable\n"
    "below, without a cap; model.n_head is kept if it divides the shrunk d_model, else the\n"
    "largest divisor of both is used), initialised\n"
    "as `wte train` does (train.seed); or, with --checkpoint, the parameters\n"
    "of an HDF5 checkpoint at its own shapes (shapes come from its tensors, so a hand-made model\n"
    "with vocab_size 2 loads; keep such models small: the cost is O(entries * B*T*V*C)).\n"
    "The batch: --batch FILE (integer ids separated by spaces, one sequence per line, all lines\n"
    "the same length; inputs are ids[:-1], targets ids[1:]), or random ids from train.seed with\n"
    "inputs in [0, vocab_size/2) (so rows outside the batch exist) and one duplicate on purpose.\n\n"
    "Sizes where the check cannot fail: at vocab_size 1 every gradient is exactly 0 (softmax over\n"
    "one logit is 1, the loss is 0); at d_model 1 with ln_f on, LayerNorm over one value outputs\n"
    "its bias alone, so wte's lookup path, wpe and ln_f's weight get exactly 0 (all of wte while\n"
    "ln_f's bias is 0, as at init). gradcheck then prints a warning naming what it cannot check\n"
    "(stdout and stderr) and still exits 0 if every line passes; the last line says the pass is\n"
    "vacuous at this size.\n\n";

// `wte gradcheck`'s command line, every value checked.
struct GradcheckCommand {
  bool help = false;  // --help was printed
  GradcheckOptions options;
  GradcheckSizes sizes;
  std::optional<std::string> checkpoint, batch_file;  // --checkpoint, --batch
  std::string config_path;                           // "": the built-in defaults
  std::vector<std::string> overrides;
};

void add_gradcheck_options(po::options_description& desc, GradcheckOptions& opt) {
  desc.add_options()("help,h", "print this help")(
      "config,c", po::value<std::string>(), "INI config (as for wte train)")(
      "checkpoint", po::value<std::string>(), "HDF5 checkpoint (or a run directory: its newest) to check instead of a config's model")(
      "batch", po::value<std::string>(),
      "token batch file: ids separated by spaces, a sequence a line (default: a random batch; "
      "old name --tokens)")(
      "vocab-size", po::value<std::string>(),
      "V of the checked model, in [1, 2^24] (default: min(config, 64))")(
      "d-model", po::value<std::string>(), "C, in [1, 2^16] (default: min(config, 16))")(
      "n-ctx", po::value<std::string>(), "position rows, in [1, 2^20] (default: min(config, 8))")(
      "n-layer", po::value<std::string>(),
      "transformer blocks, in [0, 64] (default: min(config, 2))")(
      "n-head", po::value<std::string>(),
      "attention heads, in [1, 2^16], dividing d_model (default: the config's)")(
      "batch-size", po::value<std::string>(),
      "B of the random batch, in [1, 2^20] (default: min(config, 2))")(
      "seq-len", po::value<std::string>(),
      "T of the random batch, in [1, n_ctx] (default: min(data.seq_len, n_ctx))")(
      "eps", po::value<double>(&opt.eps)->default_value(1e-6, "1e-06"), "finite-difference step")(
      "atol", po::value<double>(&opt.atol)->default_value(1e-5, "1e-05"), "fd absolute tolerance")(
      "rtol", po::value<double>(&opt.rtol)->default_value(1e-3, "0.001"), "fd relative tolerance")(
      "f32-atol", po::value<double>(&opt.f32_atol)->default_value(1e-5, "1e-05"),
      "f32 absolute tolerance")(
      "f32-rtol", po::value<double>(&opt.f32_rtol)->default_value(1e-4, "0.0001"),
      "f32 tolerance relative to the tensor's largest entry")(
      "untouched-rows", po::value<std::string>()->default_value("8"),
      "wte rows outside the batch to check (sampled), in [0, 2^24]");
}

// The options that cannot be combined: --checkpoint gives the model's shapes and settings, --batch
// gives B and T. Throws UsageError naming the first conflict.
void refuse_conflicts(const po::variables_map& vm, const std::vector<std::string>& overrides) {
  if (vm.count("checkpoint")) {
    for (const char* k : {"config", "vocab-size", "d-model", "n-ctx", "n-layer", "n-head"})
      if (vm.count(k))
        throw UsageError(std::string("--") + k + " cannot be combined with --checkpoint (the model's " +
                    "shapes and settings come from the checkpoint)");
    if (!overrides.empty())
      throw UsageError("'" + overrides[0] + "': config overrides cannot be combined with --checkpoint");
  }
}

// Parses and checks `wte gradcheck`'s command line (argv[0] is "gradcheck"): every option before
// any work. Throws UsageError for a bad option or value.
GradcheckCommand parse_gradcheck_options(int argc, char** argv) {
  GradcheckCommand c;
  po::options_description desc("Options");
  add_gradcheck_options(desc, c.options);
  CommandSpec spec;
  spec.usage = kHelp;
  spec.example =
      "Examples:\n  wte gradcheck --config configs/default.ini\n"
      "  wte gradcheck --checkpoint runs/x/checkpoint_00000010.h5 --batch batch.txt\n";
  spec.aliases = {{"--tokens", "--batch"}};
  spec.config_overrides = true;
  const CommandLine cl = parse_command_line(argc, argv, desc, spec);
  if ((c.help = cl.help)) return c;
  const po::variables_map& vm = cl.vm;
  c.overrides = cl.overrides;
  const GradcheckOptions& opt = c.options;
  const std::pair<const char*, double> positives[] = {{"eps", opt.eps}, {"atol", opt.atol},
      {"rtol", opt.rtol}, {"f32-atol", opt.f32_atol}, {"f32-rtol", opt.f32_rtol}};
  for (const auto& [name, v] : positives)
    if (!(v > 0))
      throw UsageError(std::string("--") + name + " = " + std::to_string(v) +
                       " is not allowed; allowed: a number > 0");
  c.options.untouched_rows = whole_number_option(vm, "untouched-rows", 0, size_t{1} << 24);
  auto given = [&](const char* key, size_t hi) -> size_t {  // 0: not given
    return vm.count(key) ? whole_number_option(vm, key, 1, hi) : 0;
  };
  GradcheckSizes& s = c.sizes;
  s.vocab_size = given("vocab-size", size_t{1} << 24);
  s.d_model = given("d-model", size_t{1} << 16);
  s.n_ctx = given("n-ctx", size_t{1} << 20);
  s.batch_size = given("batch-size", size_t{1} << 20);
  s.seq_len = given("seq-len", size_t{1} << 20);
  s.n_head = given("n-head", size_t{1} << 16);
  s.has_n_layer = vm.count("n-layer") != 0;
  s.n_layer = s.has_n_layer ? whole_number_option(vm, "n-layer", 0, 64) : 0;
  refuse_conflicts(vm, c.overrides);
  if (vm.count("checkpoint")) c.checkpoint = vm["checkpoint"].as<std::string>();
  else c.config_path = resolve_config_path(file_option(vm, "config"));
  if (vm.count("batch")) c.batch_file = vm["batch"].as<std::string>();
  return c;
}

// The checked model: the checkpoint's (checked to be a file first), or the config's with its
// shapes shrunk; always on float32 GEMMs. Sets the OpenMP thread count to train.threads (> 0).
GradcheckModel load_gradcheck_model(const GradcheckCommand& c) {
  GradcheckModel m;
  if (c.checkpoint) {
    m = gradcheck_model_from_checkpoint(checkpoint_option("--checkpoint", *c.checkpoint));
  } else {
    const Config cfg =
        usage_errors_of_overrides([&] { return load_config(c.config_path, c.overrides); });
    m = gradcheck_model_from_config(cfg, c.config_path, c.sizes);
  }
  use_float32_gemms(m);
  if (m.config.train.threads > 0) omp_set_num_threads(static_cast<int>(m.config.train.threads));
  return m;
}

// The batch: --batch's file (B and T come from it, so --batch-size and --seq-len are refused) or
// gradcheck's random batch. `source` receives how the header line names it.
TokenBatch load_gradcheck_batch(const GradcheckCommand& c, const GradcheckModel& m,
                                std::string* source) {
  const ModelConfig& mc = m.model->config();
  if (!c.batch_file) {
    *source = "random ids (train.seed " + std::to_string(m.config.train.seed) + ")";
    return gradcheck_random_batch(m.config, mc, c.sizes);
  }
  const std::pair<const char*, size_t> shapes[] = {{"batch-size", c.sizes.batch_size},
                                                   {"seq-len", c.sizes.seq_len}};
  for (const auto& [k, given] : shapes)
    if (given != 0)
      throw UsageError(std::string("--") + k + " cannot be combined with --batch (the file gives B, T)");
  TokenBatch batch = read_token_batch(*c.batch_file, mc.vocab_size, mc.n_ctx);
  *source = "tokens from " + *c.batch_file;
  return batch;
}

// The model and batch lines, and the warning (stdout and stderr) at sizes where the check cannot
// fail (vacuous_gradcheck_reason, `vacuous`).
void print_gradcheck_header(const GradcheckModel& m, const TokenBatch& batch,
                            const std::string& batch_source, const std::string& vacuous) {
  const ModelConfig& mc = m.model->config();
  const std::string blocks = "n_layer " + std::to_string(mc.n_layer) +
                             (mc.n_layer > 0 ? ", n_head " + std::to_string(mc.n_head) + m.n_head_note
                                             : "");
  std::printf("gradcheck: vocab_size %zu, d_model %zu, n_ctx %zu, ln_f %s, %s, %s; %s\n",
              mc.vocab_size, mc.d_model, mc.n_ctx, mc.ln_f ? "on" : "off",
              mc.tie_embeddings ? "tied lm_head" : "untied lm_head", blocks.c_str(), m.source.c_str());
  std::printf("batch: B %zu, T %zu, %s\n", batch.B, batch.T, batch_source.c_str());
  if (!vacuous.empty()) {
    std::printf("warning: %s\n", vacuous.c_str());
    std::fprintf(stderr, "wte gradcheck: warning: %s\n", vacuous.c_str());
  }
  std::fflush(stdout);
}

// What the finite differences will cost, said (and checked) before they start. Throws wte::Error
// past kMaxFiniteDifferenceHours, with what to run instead.
void check_finite_difference_cost(const ref::ModelParams<double>& params, const TokenBatch& batch,
                                  const GradcheckOptions& opt) {
  const FiniteDifferenceCost cost = finite_difference_cost(params, batch, opt);
  std::printf("finite differences: %zu entries, 2 double-precision forwards each (%.2g s per "
              "forward here): about %s\n",
              cost.entries, cost.forward_seconds, cost.text().c_str());
  std::fflush(stdout);
  const double hours = cost.seconds / 3600;
  if (hours > kMaxFiniteDifferenceHours)
    throw Error("the finite differences of this model would take about " +
                std::to_string(static_cast<long>(hours + 0.5)) + " hours (" +
                std::to_string(cost.entries) + " entries); gradcheck checks the code, not the " +
                "weights: check a small model of the same settings instead, e.g. wte gradcheck " +
                "--config runs/NAME/config.ini (the run's config; gradcheck caps its sizes)");
}

// Both checks, one line per tensor; returns the failed lines' names ("wte (fd)", ...).
std::vector<std::string> run_checks(const ref::ModelParams<double>& params, Model& model,
                                    const TokenBatch& batch, const GradcheckOptions& opt) {
  std::vector<std::string> failed;
  std::printf("finite differences on the double reference (eps %g; pass |a - n| <= %g + %g*|n|):\n",
              opt.eps, opt.atol, opt.rtol);
  for (const CheckLine& l : finite_difference_check(params, batch, opt)) {
    std::printf("%s\n", format_check_line(l).c_str());
    if (!l.ok()) failed.push_back(l.name + " (fd)");
  }
  std::printf("float32 model vs the double reference (pass max|f32 - ref| <= %g + %g*max|ref|):\n",
              opt.f32_atol, opt.f32_rtol);
  for (const CheckLine& l : compare_float_model(model, batch, opt)) {
    std::printf("%s\n", format_check_line(l).c_str());
    if (!l.ok()) failed.push_back(l.name + " (f32)");
  }
  return failed;
}

}  // namespace

int cmd_gradcheck(int argc, char** argv) {
  const GradcheckCommand c = parse_gradcheck_options(argc, argv);
  if (c.help) return 0;
  GradcheckModel m = load_gradcheck_model(c);
  std::string batch_source;
  const TokenBatch batch = load_gradcheck_batch(c, m, &batch_source);
  // Sizes at which some gradients are exactly 0 whatever the code does (see kHelp).
  const std::string vacuous = vacuous_gradcheck_reason(m.model->config());
  print_gradcheck_header(m, batch, batch_source, vacuous);
  const ref::ModelParams<double> params = reference_params(*m.model);
  check_finite_difference_cost(params, batch, c.options);
  const std::vector<std::string> failed = run_checks(params, *m.model, batch, c.options);
  if (failed.empty()) {
    if (vacuous.empty())
      std::printf("gradcheck passed\n");
    else
      std::printf("gradcheck passed, but vacuously at this size: see the warning above\n");
    return 0;
  }
  std::string names;
  for (const std::string& f : failed) names += (names.empty() ? "" : ", ") + f;
  std::printf("gradcheck FAILED: %s\n", names.c_str());
  std::fprintf(stderr, "wte gradcheck: FAILED: %s\n", names.c_str());
  return 1;
}

}  // namespace wte::cli
