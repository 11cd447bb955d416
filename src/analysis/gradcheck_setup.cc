#include "src/analysis/gradcheck_setup.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "src/profile/clock.h"
#include "wte/error.h"

namespace wte {

GradcheckModel gradcheck_model_from_config(Config cfg, const std::string& config_path,
                                           const GradcheckSizes& sizes) {
  auto pick = [](size_t arg, size_t config_value, size_t cap) {
    return arg != 0 ? arg : std::min(config_value, cap);
  };
  cfg.model.vocab_size = pick(sizes.vocab_size, cfg.model.vocab_size, kGradcheckMaxVocab);
  cfg.model.d_model = pick(sizes.d_model, cfg.model.d_model, kGradcheckMaxDModel);
  cfg.model.n_ctx = pick(sizes.n_ctx, cfg.model.n_ctx, kGradcheckMaxCtx);
  cfg.model.n_layer =
      sizes.has_n_layer ? sizes.n_layer : std::min(cfg.model.n_layer, kGradcheckMaxLayers);
  GradcheckModel m;
  if (sizes.n_head != 0) {
    cfg.model.n_head = sizes.n_head;
    if (cfg.model.n_layer > 0 && cfg.model.d_model % cfg.model.n_head != 0)
      throw UsageError("--n-head = " + std::to_string(cfg.model.n_head) +
                       " does not divide the checked d_model = " + std::to_string(cfg.model.d_model) +
                       "; pass a divisor of d_model, or --d-model (a multiple of n_head)");
  } else if (cfg.model.n_layer > 0 && cfg.model.d_model % cfg.model.n_head != 0) {
    // The shrunk d_model need not be a multiple of the config's n_head: use the largest head
    // count that divides both (said in the header line).
    const size_t h = std::gcd(cfg.model.n_head, cfg.model.d_model);
    m.n_head_note = " (config's n_head " + std::to_string(cfg.model.n_head) +
                    " does not divide the checked d_model; " + std::to_string(h) + " does)";
    cfg.model.n_head = h;
  }
  m.model = std::make_unique<Model>(cfg.model);
  m.model->init_weights(cfg.train.seed);
  m.source = (config_path.empty()
                  ? std::string("the default config (configs/default.ini's model)")
                  : "config " + config_path) +
             ", init from train.seed " + std::to_string(cfg.train.seed);
  m.config = std::move(cfg);
  return m;
}

GradcheckModel gradcheck_model_from_checkpoint(const std::string& path) {
  GradcheckModel m;
  m.model = load_model_file(path, &m.config);
  m.source = "checkpoint " + path;
  return m;
}

void use_float32_gemms(GradcheckModel& m) {
  // bf16 GEMM inputs carry 8 significant bits (tests/model/test_bf16.cc checks the bf16 path
  // against its own bound). Same parameters, float32 GEMMs.
  if (m.model->config().matmul_precision != MatmulPrecision::bf16) return;
  ModelConfig f32_config = m.model->config();
  f32_config.matmul_precision = MatmulPrecision::f32;
  auto f32_model = std::make_unique<Model>(f32_config);
  std::memcpy(f32_model->param_data(), m.model->param_data(),
              m.model->num_parameters() * sizeof(float));
  m.model = std::move(f32_model);
  m.source += " (model.matmul_precision = bf16: checked with float32 GEMMs)";
}

TokenBatch gradcheck_random_batch(const Config& cfg, const ModelConfig& mc,
                                  const GradcheckSizes& sizes) {
  const size_t B = sizes.batch_size != 0 ? sizes.batch_size
                                         : std::min<size_t>(cfg.train.batch_size, kGradcheckMaxBatch);
  const size_t T = sizes.seq_len != 0 ? sizes.seq_len : std::min(cfg.data.seq_len, mc.n_ctx);
  if (T > mc.n_ctx)
    throw UsageError("--seq-len = " + std::to_string(T) + " exceeds n_ctx = " +
                     std::to_string(mc.n_ctx) + "; allowed: a whole number in [1, n_ctx]");
  return random_batch(B, T, mc.vocab_size, cfg.train.seed);
}

std::string vacuous_gradcheck_reason(const ModelConfig& mc) {
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
  return vacuous;
}

std::string FiniteDifferenceCost::text() const {
  const double hours = seconds / 3600;
  char cost[64];
  if (seconds < 120)
    std::snprintf(cost, sizeof cost, "%.0f s", std::ceil(seconds));
  else if (hours < 2)
    std::snprintf(cost, sizeof cost, "%.0f min", std::ceil(seconds / 60));
  else
    std::snprintf(cost, sizeof cost, "%.0f hours", hours);
  return cost;
}

FiniteDifferenceCost finite_difference_cost(const ref::ModelParams<double>& params,
                                            const TokenBatch& batch,
                                            const GradcheckOptions& options) {
  FiniteDifferenceCost c;
  c.entries = finite_difference_entries(params, batch, options);
  const auto t0 = Clock::now();
  (void)ref::model_loss(params, batch.inputs.data(), batch.targets.data(), batch.B, batch.T);
  c.forward_seconds = seconds_since(t0);
  c.seconds = 2.0 * static_cast<double>(c.entries) * c.forward_seconds;
  return c;
}

}  // namespace wte
