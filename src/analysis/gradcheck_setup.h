// What `wte gradcheck` checks, set up before the checks of src/analysis/gradcheck.h run: the model
// (a config's, its shapes shrunk so finite differences stay cheap, or a checkpoint's at its own
// shapes), float32 GEMMs, the batch, the sizes at which the check cannot fail, and what the finite
// differences will cost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "src/analysis/gradcheck.h"
#include "wte/config.h"
#include "wte/model.h"

namespace wte {

/// The shapes a config's model is shrunk to (each unless given): vocab_size <= 64,
/// d_model <= 16, n_ctx <= 8, n_layer <= 2; and the random batch's B <= 2.
inline constexpr size_t kGradcheckMaxVocab = 64, kGradcheckMaxDModel = 16, kGradcheckMaxCtx = 8,
                        kGradcheckMaxLayers = 2, kGradcheckMaxBatch = 2;

/// Shapes given on the command line; 0 (n_layer: has_n_layer false) means not given.
struct GradcheckSizes {
  size_t vocab_size = 0, d_model = 0, n_ctx = 0, n_head = 0;
  bool has_n_layer = false;
  size_t n_layer = 0;
  size_t batch_size = 0, seq_len = 0;  // of the random batch
};

/// The model a gradient check runs on, and where it came from (said in gradcheck's header line).
struct GradcheckModel {
  std::unique_ptr<Model> model;
  Config config;            // its config (a checkpoint's with the shapes of its tensors)
  std::string source;       // "config PATH, init from train.seed S", "checkpoint PATH", ...
  std::string n_head_note;  // why n_head differs from the config's (or "")
};

/// The model of `config` (read from `config_path`, "" for the built-in defaults; named in
/// `source`) with its shapes set from `sizes` or shrunk to the caps above, and model.n_head kept
/// if it divides the shrunk d_model, else the largest divisor of both (said in n_head_note);
/// initialised as `wte train` does (train.seed).
/// Throws UsageError if a given n_head does not divide the checked d_model (with blocks).
GradcheckModel gradcheck_model_from_config(Config config, const std::string& config_path,
                                           const GradcheckSizes& sizes);

/// The model of the checkpoint `path` at its own shapes (load_model_file). Throws wte::Error as
/// load_model_file does.
GradcheckModel gradcheck_model_from_checkpoint(const std::string& path);

/// The check is of the float32 model: with model.matmul_precision = bf16 (8 significant bits, far
/// above the float32 bounds checked), replaces the model with the same parameters on float32
/// GEMMs and says so in `source`. Nothing otherwise.
void use_float32_gemms(GradcheckModel& m);

/// gradcheck's random batch for `model` (random_batch, from train.seed): B = sizes.batch_size or
/// min(train.batch_size, 2), T = sizes.seq_len or min(data.seq_len, n_ctx).
/// Throws UsageError if the given T exceeds n_ctx.
TokenBatch gradcheck_random_batch(const Config& config, const ModelConfig& model,
                                  const GradcheckSizes& sizes);

/// Why a gradient check of `model` passes whatever the code does (vocab_size 1; d_model 1 with
/// ln_f on, or with blocks), in words for a warning; "" if it can fail.
std::string vacuous_gradcheck_reason(const ModelConfig& model);

/// What finite_difference_check(params, batch, options) will cost: its entries, two double
/// reference forwards each, at the time of one forward measured here.
struct FiniteDifferenceCost {
  size_t entries = 0;
  double forward_seconds = 0;  // one double reference forward of the batch
  double seconds = 0;          // 2 · entries · forward_seconds
  /// "37 s", "12 min" (below 2 hours) or "5 hours", rounded up below 2 hours.
  std::string text() const;
};
FiniteDifferenceCost finite_difference_cost(const ref::ModelParams<double>& params,
                                            const TokenBatch& batch,
                                            const GradcheckOptions& options);

/// The longest finite-difference check gradcheck starts, in hours: a checkpoint keeps its full
/// size, and a trained model's check could take days.
inline constexpr double kMaxFiniteDifferenceHours = 2.0;

}  // namespace wte
