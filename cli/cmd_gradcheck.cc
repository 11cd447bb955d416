// `wte gradcheck [--config FILE | --checkpoint FILE] [--batch FILE] [--section.key=value ...]`
#include <boost/program_options.hpp>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "wte/config.h"
#include "wte/error.h"
#include "src/analysis/gradcheck.h"
#include "wte/model.h"
#include "cli/options.h"
#include "cli/commands.h"

namespace po = boost::program_options;

namespace wte::cli {
namespace {

constexpr size_t kMaxV = 64, kMaxC = 16, kMaxCtx = 8, kMaxB = 2, kMaxLayers = 2;

const char* kHelp =
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

}  // namespace

int cmd_gradcheck(int argc, char** argv) {
  po::options_description desc("Options");
  GradcheckOptions opt;
  desc.add_options()("help,h", "print this help")(
      "config,c", po::value<std::string>(), "INI config (as for wte train)")(
      "checkpoint", po::value<std::string>(), "HDF5 checkpoint to check instead of a config's model")(
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
  CommandSpec spec;
  spec.usage = kHelp;
  spec.example =
      "Examples:\n  wte gradcheck --config configs/default.ini\n"
      "  wte gradcheck --checkpoint runs/x/checkpoint_00000010.h5 --batch batch.txt\n";
  spec.aliases = {{"--tokens", "--batch"}};
  spec.config_overrides = true;
  const CommandLine cl = parse_command_line(argc, argv, desc, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  const std::vector<std::string>& overrides = cl.overrides;
  auto positive = [](const char* name, double v) {
    if (!(v > 0))
      throw UsageError(std::string("--") + name + " = " + std::to_string(v) +
                       " is not allowed; allowed: a number > 0");
  };
  positive("eps", opt.eps);
  positive("atol", opt.atol);
  positive("rtol", opt.rtol);
  positive("f32-atol", opt.f32_atol);
  positive("f32-rtol", opt.f32_rtol);
  // Every whole-number option, parsed before any work (config, model, batch).
  opt.untouched_rows = whole_number_option(vm, "untouched-rows", 0, size_t{1} << 24);
  auto given = [&](const char* key, size_t hi) -> size_t {  // 0: not given
    return vm.count(key) ? whole_number_option(vm, key, 1, hi) : 0;
  };
  const size_t arg_V = given("vocab-size", size_t{1} << 24), arg_C = given("d-model", size_t{1} << 16),
               arg_ctx = given("n-ctx", size_t{1} << 20), arg_B = given("batch-size", size_t{1} << 20),
               arg_T = given("seq-len", size_t{1} << 20), arg_H = given("n-head", size_t{1} << 16);
  const bool has_L = vm.count("n-layer") != 0;
  const size_t arg_L = has_L ? whole_number_option(vm, "n-layer", 0, 64) : 0;

  std::unique_ptr<Model> model;
  Config cfg;
  std::string n_head_note;
  std::string source;
  if (vm.count("checkpoint")) {
    for (const char* k : {"config", "vocab-size", "d-model", "n-ctx", "n-layer", "n-head"})
      if (vm.count(k))
        throw UsageError(std::string("--") + k + " cannot be combined with --checkpoint (the model's " +
                    "shapes and settings come from the checkpoint)");
    if (!overrides.empty())
      throw UsageError("'" + overrides[0] + "': config overrides cannot be combined with --checkpoint");
    const std::string path = vm["checkpoint"].as<std::string>();
    require_checkpoint_file("--checkpoint", path);
    model = load_model_file(path, &cfg);
    source = "checkpoint " + path;
  } else {
    const std::string config_path = file_option(vm, "config");
    cfg = usage_errors_of_overrides([&] { return load_config(config_path, overrides); });
    auto pick = [](size_t arg, size_t config_value, size_t cap) {
      return arg != 0 ? arg : std::min(config_value, cap);
    };
    cfg.model.vocab_size = pick(arg_V, cfg.model.vocab_size, kMaxV);
    cfg.model.d_model = pick(arg_C, cfg.model.d_model, kMaxC);
    cfg.model.n_ctx = pick(arg_ctx, cfg.model.n_ctx, kMaxCtx);
    cfg.model.n_layer = has_L ? arg_L : std::min(cfg.model.n_layer, kMaxLayers);
    if (arg_H != 0) {
      cfg.model.n_head = arg_H;
      if (cfg.model.n_layer > 0 && cfg.model.d_model % cfg.model.n_head != 0)
        throw UsageError("--n-head = " + std::to_string(cfg.model.n_head) +
                    " does not divide the checked d_model = " + std::to_string(cfg.model.d_model) +
                    "; pass a divisor of d_model, or --d-model (a multiple of n_head)");
    } else if (cfg.model.n_layer > 0 && cfg.model.d_model % cfg.model.n_head != 0) {
      // The shrunk d_model need not be a multiple of the config's n_head: use the largest head
      // count that divides both (said in the header line).
      const size_t h = std::gcd(cfg.model.n_head, cfg.model.d_model);
      n_head_note = " (config's n_head " + std::to_string(cfg.model.n_head) +
                    " does not divide the checked d_model; " + std::to_string(h) + " does)";
      cfg.model.n_head = h;
    }
    model = std::make_unique<Model>(cfg.model);
    model->init_weights(cfg.train.seed);
    source = (config_path.empty() ? std::string("the default config") : "config " + config_path) +
             ", init from train.seed " + std::to_string(cfg.train.seed);
  }
  // The check is of the float32 model: bf16 GEMM inputs (model.matmul_precision = bf16) carry 8
  // significant bits, far above the float32 bounds checked here (tests/model/test_bf16.cc checks the
  // bf16 path against its own bound). Same parameters, float32 GEMMs.
  if (model->config().matmul_precision == MatmulPrecision::bf16) {
    ModelConfig f32_config = model->config();
    f32_config.matmul_precision = MatmulPrecision::f32;
    auto f32_model = std::make_unique<Model>(f32_config);
    std::memcpy(f32_model->param_data(), model->param_data(), model->num_parameters() * sizeof(float));
    model = std::move(f32_model);
    source += " (model.matmul_precision = bf16: checked with float32 GEMMs)";
  }
  if (cfg.train.threads > 0) omp_set_num_threads(static_cast<int>(cfg.train.threads));
  const ModelConfig& mc = model->config();

  TokenBatch batch;
  std::string batch_source;
  if (vm.count("batch")) {
    for (const char* k : {"batch-size", "seq-len"})
      if (vm.count(k))
        throw UsageError(std::string("--") + k + " cannot be combined with --batch (the file gives B, T)");
    const std::string path = vm["batch"].as<std::string>();
    batch = read_token_batch(path, mc.vocab_size, mc.n_ctx);
    batch_source = "tokens from " + path;
  } else {
    const size_t B = arg_B != 0 ? arg_B : std::min<size_t>(cfg.train.batch_size, kMaxB);
    const size_t T = arg_T != 0 ? arg_T : std::min(cfg.data.seq_len, mc.n_ctx);
    if (T > mc.n_ctx)
      throw UsageError("--seq-len = " + std::to_string(T) + " exceeds n_ctx = " +
                       std::to_string(mc.n_ctx) + "; allowed: a whole number in [1, n_ctx]");
    batch = random_batch(B, T, mc.vocab_size, cfg.train.seed);
    batch_source = "random ids (train.seed " + std::to_string(cfg.train.seed) + ")";
  }

  const std::string blocks = "n_layer " + std::to_string(mc.n_layer) +
                             (mc.n_layer > 0 ? ", n_head " + std::to_string(mc.n_head) + n_head_note
                                             : "");
  std::printf("gradcheck: vocab_size %zu, d_model %zu, n_ctx %zu, ln_f %s, %s, %s; %s\n",
              mc.vocab_size, mc.d_model, mc.n_ctx, mc.ln_f ? "on" : "off",
              mc.tie_embeddings ? "tied lm_head" : "untied lm_head", blocks.c_str(), source.c_str());
  std::printf("batch: B %zu, T %zu, %s\n", batch.B, batch.T, batch_source.c_str());
  // Sizes at which some gradients are exactly 0 whatever the code does (see kHelp).
  std::string vacuous;
  if (mc.vocab_size == 1)
    vacuous = "vocab_size 1: softmax over one logit is 1, the loss is 0 and every gradient is "
              "exactly 0, so this check cannot detect errors at this size (use vocab_size >= 2)";
  else if (mc.d_model == 1 && mc.ln_f)
    vacuous = "d_model 1 with ln_f on: LayerNorm over one value outputs its bias alone, so the "
              "gradients of wte's lookup path, wpe and ln_f's weight are exactly 0 (and all of "
              "wte's while ln_f's bias is 0, as at init) and this check cannot detect errors in "
              "them (use d_model >= 2, or ln_f off)";
  if (mc.vocab_size != 1 && mc.d_model == 1 && mc.n_layer > 0)
    vacuous += std::string(vacuous.empty() ? "d_model 1 with blocks" : "; with blocks, too") +
               ": every block's ln_1 and ln_2 over one value output their bias alone, so no "
               "gradient reaches a block's input through them and most block gradients are "
               "exactly 0 whatever the code does (use d_model >= 2)";
  if (!vacuous.empty()) {
    std::printf("warning: %s\n", vacuous.c_str());
    std::fprintf(stderr, "wte gradcheck: warning: %s\n", vacuous.c_str());
  }
  std::fflush(stdout);

  const ref::ModelParams<double> params = reference_params(*model);
  // What the finite differences will cost, said (and checked) before they start: two double
  // reference forwards per checked entry (finite_difference_entries counts the entries
  // finite_difference_check visits, by its own row selection). A checkpoint keeps its full size, so
  // a trained model's check can take days: refused past kMaxFdHours with what to run instead.
  {
    const size_t entries = finite_difference_entries(params, batch, opt);
    const auto t0 = std::chrono::steady_clock::now();
    (void)ref::model_loss(params, batch.inputs.data(), batch.targets.data(), batch.B, batch.T);
    const double forward_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double seconds = 2.0 * static_cast<double>(entries) * forward_s, hours = seconds / 3600;
    char cost[64];
    if (seconds < 120)
      std::snprintf(cost, sizeof cost, "%.0f s", std::ceil(seconds));
    else if (hours < 2)
      std::snprintf(cost, sizeof cost, "%.0f min", std::ceil(seconds / 60));
    else
      std::snprintf(cost, sizeof cost, "%.0f hours", hours);
    std::printf("finite differences: %zu entries, 2 double-precision forwards each (%.2g s per "
                "forward here): about %s\n",
                entries, forward_s, cost);
    std::fflush(stdout);
    constexpr double kMaxFdHours = 2.0;
    if (hours > kMaxFdHours)
      throw Error("the finite differences of this model would take about " +
                  std::to_string(static_cast<long>(hours + 0.5)) + " hours (" +
                  std::to_string(entries) + " entries); gradcheck checks the code, not the " +
                  "weights: check a small model of the same settings instead, e.g. wte gradcheck " +
                  "--config runs/NAME/config.ini (the run's config; gradcheck caps its sizes)");
  }
  std::vector<std::string> failed;
  std::printf("finite differences on the double reference (eps %g; pass |a - n| <= %g + %g*|n|):\n",
              opt.eps, opt.atol, opt.rtol);
  for (const CheckLine& l : finite_difference_check(params, batch, opt)) {
    std::printf("%s\n", format_check_line(l).c_str());
    if (!l.ok()) failed.push_back(l.name + " (fd)");
  }
  std::printf("float32 model vs the double reference (pass max|f32 - ref| <= %g + %g*max|ref|):\n",
              opt.f32_atol, opt.f32_rtol);
  for (const CheckLine& l : compare_float_model(*model, batch, opt)) {
    std::printf("%s\n", format_check_line(l).c_str());
    if (!l.ok()) failed.push_back(l.name + " (f32)");
  }
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
