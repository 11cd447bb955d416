// Gradient checks users can run (`wte gradcheck`, `wte grad`) and the pieces tests share.
//
// Two checks, reported one line per tensor:
//   1. Finite differences, in double, on the double reference (src/reference/model.h): for each
//      checked entry i of each parameter tensor,
//        numeric = (L(θ + eps·e_i) - L(θ - eps·e_i)) / (2·eps)      (central, eps 1e-6)
//      passes iff |analytic - numeric| <= atol + rtol·|numeric|   (defaults 1e-5, 1e-3; PyTorch's
//      gradcheck and ggml's test-backend-ops use this form). Where the loss provably does not read
//      an entry (a wte row outside the batch on the lookup path, a wpe row >= T, ln_f when it is
//      off) both the analytic and the numeric value must be EXACTLY zero.
//      The tied dwte is checked as a whole ("wte") and path by path: "wte:lookup" and
//      "wte:unembedding" are the gradients of the untied model with lm_head = wte (chain rule: their
//      sum is the tied gradient), so each path is checked against its own finite difference.
//   2. The float32 production model (include/wte/model.h: oneDNN + Highway) against the double reference's
//      analytic values at the same float parameters (widened exactly, so only the arithmetic
//      differs): per tensor, max_i |f32_i - ref_i| <= f32_atol + f32_rtol·max_i |ref_i|
//      (defaults 1e-5, 1e-4). Why that bound: every value is a short chain of float32 sums of K
//      terms (logits: K = C; dh': K = V; the unembedding dwte: K = N; ln_f statistics: K = C), and a
//      K-term float sum is off by at most ~K·2^-24 of the sum of its terms' magnitudes, typically
//      sqrt(K)·2^-24. For K <= ~1000 (gradcheck's shrunk shapes have K <= 64) 1e-4 of the tensor's
//      largest entry leaves a wide margin; scaling by the tensor's max rather than each entry is
//      deliberate, since entries small by cancellation carry the absolute error of the large terms
//      that cancelled. The same bound is used by tests/model/test_model.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wte/config.h"
#include "wte/model.h"
#include "src/reference/model.h"

namespace wte {

/// One batch: inputs and targets (B,T), row-major.
struct TokenBatch {
  size_t B = 0, T = 0;
  std::vector<int32_t> inputs;   // (B,T)
  std::vector<int32_t> targets;  // (B,T)
};

/// Reads a token batch from a text file: integer ids separated by spaces or tabs, one sequence per
/// line, every line the same length L >= 2; blank lines are skipped. Each line gives inputs
/// ids[0..L-2] and targets ids[1..L-1] (next-token), so B = lines and T = L - 1.
/// Throws wte::Error, naming the path, 1-based line and (for an id) 1-based position, for: a
/// missing file; a token that is not an integer; an id outside [0, vocab_size); a line of another
/// length than the first; fewer than 2 ids on a line; T > n_ctx; no lines.
TokenBatch read_token_batch(const std::string& path, size_t vocab_size, size_t n_ctx);

/// A reproducible batch for gradcheck: inputs drawn uniformly from [0, max(1, V/2)) so rows
/// V/2..V-1 are never looked up, with inputs[1] = inputs[0] (a duplicate on purpose, when B·T >= 2);
/// targets uniform in [0, V). Drawn from wte::Rng(seed).
TokenBatch random_batch(size_t B, size_t T, size_t V, uint64_t seed);

/// Loads a model for gradcheck/grad from an HDF5 file with the checkpoint's layout
/// (docs/checkpoint.md): root attribute format = "wte-checkpoint", one float32 dataset per
/// parameter tensor, and /config/ini. The shapes come from the datasets (vocab_size = rows of /wte,
/// d_model = its columns, n_ctx = rows of /wpe); the stored config supplies everything else
/// (ln_f, ln_eps, tie_embeddings). Its vocab_size, d_model and n_ctx keys are not read, so a
/// hand-made model smaller than a tokenizer allows (vocab_size 2) loads; no tokenizer is read.
/// `config` (may be null) receives the config with the shapes set from the tensors.
/// Throws wte::Error naming the path and the dataset for a missing file, a file that is not a wte
/// checkpoint, a missing dataset, a non-float32 dataset or a shape that disagrees with the others.
std::unique_ptr<Model> load_model_file(const std::string& path, Config* config);

/// The model's float parameters widened (exactly) into a double reference model, tensor by tensor
/// by name (wte, wpe, ln_f/g, ln_f/b, lm_head, h{l}/...), with the model's n_layer and n_head and
/// the configured ln_eps exactly (configured_ln_eps: 1e-5, not the float32 9.99999975e-06 the
/// float32 kernels add).
/// Throws wte::Error for a tensor name the reference does not know.
ref::ModelParams<double> reference_params(const Model& model);

/// model.ln_eps as configured, in double: the shortest decimal that reads back as the float32
/// `ln_eps` (the text config.ini holds for it), read as a double. 1e-5f -> 1e-5.
double configured_ln_eps(float ln_eps);

/// The gradient of tensor `t` after model.backward(), dense, in t's shape: a copy from the
/// gradient arena, or, for a row-sparse gradient (untied wte, TensorSpec::sparse_grad), the touched
/// rows of Model::wte_grad_rows() scattered into zeros.
std::vector<float> dense_gradient(Model& model, const TensorSpec& t);

/// Tolerances and sampling of a gradient check (defaults as in the header comment).
struct GradcheckOptions {
  double eps = 1e-6;             // central-difference step
  double atol = 1e-5;            // finite differences: |a - n| <= atol + rtol·|n|
  double rtol = 1e-3;
  double f32_atol = 1e-5;        // float32 vs reference: max|f - r| <= f32_atol + f32_rtol·max|r|
  double f32_rtol = 1e-4;
  size_t untouched_rows = 8;     // wte rows outside the batch that are checked (sampled)
  uint64_t seed = 1;             // sampling of those rows
};

/// One line of the report: one tensor (or one path of the tied wte) of one check.
struct CheckLine {
  std::string check;      // "fd" (finite differences) or "f32" (float32 model vs reference)
  std::string name;       // "wte", "wte:lookup", "wpe", "ln_f/g", "loss", "logits", ...
  size_t entries = 0;     // entries compared
  size_t exact_zero = 0;  // of those, entries required to be exactly zero
  double max_abs_err = 0; // max |analytic - numeric| (fd) or max |f32 - ref| (f32)
  double max_rel_err = 0; // fd: max |a - n| / max(|a|, |n|); f32: max_abs_err / max |ref|
  double max_ref = 0;     // max |numeric| (fd) or max |ref| (f32)
  size_t failures = 0;    // entries past the tolerance (fd), or 1 if the tensor fails (f32)
  std::string worst;      // the worst entry, "wte[3,1]: analytic -0.5378 numeric -0.5378"
  std::string detail;     // which entries were checked
  bool ok() const { return failures == 0; }
};

/// Finite-difference check of the double reference at `params` on `batch`: every row of wte the
/// batch looks up, `untouched_rows` sampled rows it does not, every wpe row, every ln_f entry (and
/// lm_head rows when untied), every entry of every block tensor. Lines: wte, wte:lookup,
/// wte:unembedding (tied only), wpe, ln_f/g, ln_f/b, lm_head (untied only), then h0/ln_1/g ...
/// h{n_layer-1}/mlp/c_proj/b in arena order. Cost: two reference forwards per checked entry.
/// Throws wte::Error if the batch does not fit the model.
std::vector<CheckLine> finite_difference_check(const ref::ModelParams<double>& params,
                                               const TokenBatch& batch,
                                               const GradcheckOptions& options);

/// The number of entries finite_difference_check(params, batch, options) checks (the sum of its
/// lines' entries; each costs two double reference forwards), from the same row selection, without
/// computing anything: `wte gradcheck` prints and bounds the check's cost with it.
size_t finite_difference_entries(const ref::ModelParams<double>& params, const TokenBatch& batch,
                                 const GradcheckOptions& options);

/// Runs model.forward/backward on `batch` and compares the loss, the logits, the residual stream
/// after each block (residual(1) .. residual(n_layer)) and every gradient tensor (by name) with the
/// double reference at reference_params(model). Lines: loss, logits, residual(l) for each block,
/// then one per tensor of model.tensors(). Overwrites the model's gradients and activations.
std::vector<CheckLine> compare_float_model(Model& model, const TokenBatch& batch,
                                           const GradcheckOptions& options);

/// "  wte:lookup      fd   entries   384 (8 rows exactly zero)  max_abs 1.2e-10  max_rel ...  ok"
std::string format_check_line(const CheckLine& line);

}  // namespace wte
