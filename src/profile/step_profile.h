// `wte profile step`: one training step of a config split into every layer kind, with the step's
// model FLOPs utilisation against the oneDNN f32 GEMM peak measured in the same run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/model/gemm_blas.h"
#include "wte/config.h"

namespace wte::profile {

/// One line of the step profile: a layer kind (forward or backward, summed over the blocks).
struct StepPartTime {
  std::string name;  // "qkv GEMM (c_attn) forward", "causal softmax backward", ...
  double ms = 0;     // median over the timed steps
  double gflop = 0;  // floating-point work of the part per step (GEMMs only; 0 otherwise)
  bool gemm = false;
  std::string kernel;  // GEMMs: oneDNN's kernel(s) that ran them, e.g. "brg:avx512_core_bf16"
};

/// A whole step's profile at one thread count.
struct StepProfile {
  int threads = 1;
  size_t B = 0, T = 0, steps = 0;
  size_t parameters = 0;
  size_t matmul_parameters = 0;  // those a GEMM multiplies by: all but an untied wte (a lookup)
  double step_ms = 0;           // median wall time of forward + backward + clip + AdamW
  double tokens_per_s = 0;      // B·T / step
  double model_flops = 0;       // per step, PaLM's convention: model_flops_per_step
  double model_flops_causal = 0;  // per step, the causal attention's work: causal_model_flops_per_step
  size_t peak_size = 0;         // the GEMM probe's M = K = N
  // GemmProbe(peak_size³) on each library that can run it (f32: oneDNN, OpenBLAS, BLIS; bf16:
  // oneDNN), timed between the steps (medians); the peak is the best of them.
  std::vector<std::pair<GemmLibrary, double>> gemm_peaks;  // (library, GFLOP/s)
  double gemm_peak_gflops = 0;
  GemmLibrary gemm_peak_library = GemmLibrary::onednn;
  // The CPU's float32 FMA limit (FmaProbe: register-only FMA chains on every thread, timed between
  // the steps, median) and its target's lanes.
  double fma_limit_gflops = 0;
  size_t fma_lanes = 0;
  double mfu = 0;               // model_flops / step time / GEMM peak: the headline MFU
  double mfu_causal = 0;        // model_flops_causal / step time / GEMM peak
  double mfu_fma = 0;           // model_flops / step time / FMA limit: the MFU against the silicon
  std::string gemm_precision;   // Model::gemm_precision_note(): bf16 or f32, and oneDNN's kernel
  bool bf16 = false;            // the GEMMs read bf16 (the peak probe then does too)
  std::vector<StepPartTime> parts;
  // The unfused loss's limit: a streaming copy of N·V floats (CopyProbe: vector loads,
  // non-temporal stores), i.e. one read and one write of the logits the softmax cross-entropy
  // must touch, timed between the steps (median). 0 under the fused loss (no (N, V) logits).
  double logits_copy_ms = 0;
  size_t logits_bytes = 0;  // N·V·4
};

/// Model FLOPs of one training step (forward + backward), PaLM's convention (Chowdhery et al. 2022,
/// "PaLM: Scaling Language Modeling with Pathways", appendix B, the MFU definition): 6 · parameters
/// · tokens for the matmuls with weights (pass the parameters a GEMM multiplies by: the tied
/// lm_head's logits GEMM is counted by wte's parameters; an untied wte is only a lookup and is left
/// out, its lm_head counted instead), plus 12 · n_layer · T · d_model per token for the attention's
/// QKᵀ and ·V over the full T×T (2 · 2 · T · C forward per token and layer, twice that backward),
/// the masked half included. The headline MFU uses this count: it is the one other MFUs are quoted
/// with, so the numbers compare.
double model_flops_per_step(const ModelConfig& model, size_t parameters, size_t B, size_t T);

/// Model FLOPs of one training step counting only the attention entries a causal model needs: the
/// same 6 · parameters · tokens, plus QKᵀ and ·V over the T·(T+1)/2 entries on and below the
/// diagonal of each (sequence, head), i.e. 6 · n_layer · (T + 1) · d_model per token (2 GEMMs ×
/// 2 FLOPs × T(T+1)/2 × head size × n_head forward per sequence and layer, twice that backward).
/// Against model_flops_per_step the attention term is (T + 1) / (2T): about half at large T.
double causal_model_flops_per_step(const ModelConfig& model, size_t parameters, size_t B, size_t T);

/// Runs `steps` + 1 training steps (the first untimed: primitives created, pages touched) of a
/// model built from `config` on the given ids (B·T + 1 of them: inputs, then targets shifted by
/// one) at the current OpenMP thread count, and times every part through Model::set_part_timer.
/// A peak_size³ GemmProbe runs after every step (outside the step's time): its median is the peak
/// (2048: large and square, the GEMM's best case; `--quick` uses 512), with bf16 inputs when the
/// model's GEMMs are bf16 (model.matmul_precision); the MFU is given with both FLOP counts (mfu:
/// PaLM's, the headline; mfu_causal). Each GEMM part names oneDNN's kernel(s). Throws wte::Error as
/// Model's constructor and forward do.
StepProfile profile_step(const Config& config, const std::vector<int32_t>& ids, size_t steps,
                         size_t peak_size = 2048);

}  // namespace wte::profile
