#include "src/profile/step_profile.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "src/profile/profile.h"
#include "src/model/matmul.h"
#include "src/model/part_timer.h"
#include "src/model/unembedding.h"
#include "wte/model.h"
#include "wte/optimizer.h"

namespace wte::profile {

double model_flops_per_step(const ModelConfig& model, size_t parameters, size_t B, size_t T) {
  const double tokens = static_cast<double>(B) * T;
  return 6.0 * static_cast<double>(parameters) * tokens +
         12.0 * static_cast<double>(model.n_layer) * T * model.d_model * tokens;
}

double causal_model_flops_per_step(const ModelConfig& model, size_t parameters, size_t B, size_t T) {
  const double tokens = static_cast<double>(B) * T;
  return 6.0 * static_cast<double>(parameters) * tokens +
         6.0 * static_cast<double>(model.n_layer) * (static_cast<double>(T) + 1) * model.d_model * tokens;
}

namespace {

// One timed part: its label, the name the model times it under (src/model/part_timer.h), and its
// GEMM work per step.
struct PartSpec {
  const char* name;
  const char* key;
  double gflop;
  bool gemm;
};

// The parts in the order a step runs them. GEMM work, with N = B·T tokens, L blocks, Z = B·NH:
//   linear (N,in)·(in,out): 2·N·in·out forward; dX and dW backward, twice that
//   QKᵀ and att·V: 2·Z·T·T·hs = 2·B·T²·C forward each; backward two GEMMs each
std::vector<PartSpec> part_specs(const ModelConfig& m, size_t B, size_t T, bool bf16) {
  const double N = static_cast<double>(B) * T, C = m.d_model, V = m.vocab_size,
               L = static_cast<double>(m.n_layer);
  const double g = 1e-9;
  const double qkv = 2 * N * C * 3 * C * L * g, proj = 2 * N * C * C * L * g,
               fc = 2 * N * C * 4 * C * L * g, att = 2.0 * B * T * T * C * L * g,
               logits = 2 * N * C * V * g;
  std::vector<PartSpec> parts = {{"lookup (gather + wpe)", "lookup", 0, false}};
  if (m.n_layer > 0) {
    const std::vector<PartSpec> fwd = {
        {"LayerNorms ln_1, ln_2 forward", "ln_fwd", 0, false},
        {"qkv GEMM (c_attn) forward", "qkv_gemm_fwd", qkv, true},
        {"attention QKᵀ forward", "attn_qk_fwd", att, true},
        {"causal softmax forward", "softmax_fwd", 0, false},
        {"attention ·V forward", "attn_v_fwd", att, true},
        {"attn-proj GEMM forward", "attn_proj_gemm_fwd", proj, true},
        {"residual adds", "residual_fwd", 0, false},
        {"fc GEMM (c_fc) forward", "fc_gemm_fwd", fc, true},
        {"GELU forward", "gelu_fwd", 0, false},
        {"fc-proj GEMM forward", "fc_proj_gemm_fwd", fc, true}};
    parts.insert(parts.end(), fwd.begin(), fwd.end());
  }
  // The loss: unfused, four parts; fused (model.loss_chunk), one part holding its three GEMMs and
  // the tile kernels (src/model/unembedding.h).
  const std::vector<PartSpec> head =
      resolve_loss_tiles(m, B * T).fused()
          ? std::vector<PartSpec>{{"ln_f forward", "ln_f_fwd", 0, false},
                                  {"fused logits + cross-entropy + dh + dlm_head",
                                   "fused_loss", 3 * logits, true},
                                  {"ln_f backward", "ln_f_bwd", 0, false}}
          : std::vector<PartSpec>{{"ln_f forward", "ln_f_fwd", 0, false},
                                  {"logits GEMM", "logits_gemm", logits, true},
                                  {"softmax cross-entropy", "cross_entropy", 0, false},
                                  {m.tie_embeddings ? "dh GEMM (dlogits·wte)" : "dh GEMM (dlogits·lm_head)",
                                   "dh_gemm", logits, true},
                                  {"dlm_head GEMM (dlogitsᵀ·h)", "dlm_head_gemm", logits,
                                   true},
                                  {"ln_f backward", "ln_f_bwd", 0, false}};
  parts.insert(parts.end(), head.begin(), head.end());
  if (m.n_layer > 0) {
    const std::vector<PartSpec> bwd = {
        {"fc-proj GEMM backward", "fc_proj_gemm_bwd", 2 * fc, true},
        {"GELU backward", "gelu_bwd", 0, false},
        {"fc GEMM backward", "fc_gemm_bwd", 2 * fc, true},
        {"LayerNorms backward", "ln_bwd", 0, false},
        {"attn-proj GEMM backward", "attn_proj_gemm_bwd", 2 * proj, true},
        {"attention ·V backward", "attn_v_bwd", 2 * att, true},
        {"causal softmax backward", "softmax_bwd", 0, false},
        {"attention QKᵀ backward", "attn_qk_bwd", 2 * att, true},
        {"qkv GEMM backward", "qkv_gemm_bwd", 2 * qkv, true},
        {"bias gradients", "bias_bwd", 0, false}};
    parts.insert(parts.end(), bwd.begin(), bwd.end());
  }
  if (bf16) parts.push_back({"bf16 conversions (all)", "bf16_convert", 0, false});
  // Tied: the scatter also sums the squares of dwte's blocks for the gradient norm (Model::
  // grad_norm_head), and the norm's own part reads only the rest of the gradient.
  parts.push_back({m.tie_embeddings ? "scatter (lookup bwd) + norm sums"
                                    : "scatter (lookup backward)",
                   "scatter", 0, false});
  parts.push_back({"dwpe", "dwpe", 0, false});
  return parts;
}

double median_ms(std::vector<double> x) {
  if (x.empty()) return 0;
  std::nth_element(x.begin(), x.begin() + static_cast<long>(x.size() / 2), x.end());
  return x[x.size() / 2] * 1e3;
}

}  // namespace

StepProfile profile_step(const Config& config, const std::vector<int32_t>& ids, size_t steps,
                         size_t peak_size) {
  const size_t B = config.train.batch_size, T = config.data.seq_len, N = B * T;
  Model model(config.model);
  model.init_weights(config.train.seed);
  AdamW optimizer(model);
  const std::vector<int32_t> inputs(ids.begin(), ids.begin() + static_cast<long>(N));
  const std::vector<int32_t> targets(ids.begin() + 1, ids.begin() + static_cast<long>(N) + 1);
  const bool bf16 = model.gemm_precision() == MatmulPrecision::bf16;
  const std::vector<PartSpec> specs = part_specs(config.model, B, T, bf16);

  PartTimer times;
  model.set_part_timer(&times);
  std::vector<std::vector<double>> samples(specs.size());
  std::vector<std::string> extra_names;
  std::vector<std::vector<double>> extra_samples;
  std::vector<double> clip, adamw, total;
  // The GEMM peak is timed between the steps, so both see the same machine (a shared machine's
  // load changes by the second).
  // One probe per library that can run it (bf16: oneDNN only); the peak is the best of them. The
  // FMA limit (register-only FMA chains on every thread) is timed between the steps too.
  std::vector<std::unique_ptr<GemmProbe>> probes;
  std::vector<GemmLibrary> probe_libraries;
  for (GemmLibrary lib : {GemmLibrary::onednn, GemmLibrary::openblas, GemmLibrary::blis}) {
    if ((bf16 && lib != GemmLibrary::onednn) || !gemm_library_available(lib)) continue;
    probes.push_back(std::make_unique<GemmProbe>(peak_size, peak_size, peak_size, bf16, lib));
    probes.back()->run();  // warm-up
    probe_libraries.push_back(lib);
  }
  std::vector<std::vector<double>> peak(probes.size());
  FmaProbe fma;
  fma.run();  // warm-up
  std::vector<double> fma_s;
  // Unfused loss: a streaming read + write of the logits, the cross-entropy's memory limit.
  const bool fused = resolve_loss_tiles(config.model, N).fused();
  std::unique_ptr<CopyProbe> logits_copy =
      fused ? nullptr : std::make_unique<CopyProbe>(N * config.model.vocab_size * sizeof(float));
  std::vector<double> copy_s;
  if (logits_copy) logits_copy->run();  // pages touched
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  for (size_t k = 0; k < steps + 1; ++k) {
    times.reset();
    const auto t0 = Clock::now();
    model.zero_grad();  // as train_step: once per step, backward adds
    model.forward(inputs.data(), targets.data(), B, T);
    model.backward();
    const auto t1 = Clock::now();
    // As train_step: the norm (the tied wte's block sums from the scatter, one read of the rest
    // of the gradients), then AdamW applying the clip factor.
    const double norm = grad_norm(model, model.wte_grad_rows(), model.grad_norm_head());
    const auto t2 = Clock::now();
    optimizer.update(model, 1e-4f, config.optim, model.wte_grad_rows(),
                     clip_scale(norm, config.optim.grad_clip));
    const auto t3 = Clock::now();
    if (k == 0) continue;  // warm-up: primitives created, pages touched
    for (size_t i = 0; i < probes.size(); ++i) peak[i].push_back(probes[i]->run());
    fma_s.push_back(fma.run());
    if (logits_copy) {
      const auto c0 = Clock::now();
      logits_copy->run();
      copy_s.push_back(seconds(c0, Clock::now()));
    }
    for (size_t i = 0; i < specs.size(); ++i) samples[i].push_back(times.seconds(specs[i].key));
    // A part the list above does not name (a layer's new part) gets a row of its own, by name.
    for (const auto& part : times.parts()) {
      const std::string& name = part.first;
      const double s = part.second;
      const bool listed = std::any_of(specs.begin(), specs.end(),
                                      [&](const PartSpec& p) { return name == p.key; });
      if (listed) continue;
      auto it = std::find(extra_names.begin(), extra_names.end(), name);
      if (it == extra_names.end()) {
        extra_names.push_back(name);
        extra_samples.emplace_back();
        it = extra_names.end() - 1;
      }
      extra_samples[static_cast<size_t>(it - extra_names.begin())].push_back(s);
    }
    clip.push_back(seconds(t1, t2));
    adamw.push_back(seconds(t2, t3));
    total.push_back(seconds(t0, t3));
  }
  model.set_part_timer(nullptr);

  StepProfile p;
  p.B = B;
  p.T = T;
  p.steps = steps;
  p.peak_size = peak_size;
  p.parameters = model.num_parameters();
  const std::vector<GemmKernel> kernels = model.gemm_kernels();
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string kernel;  // the distinct kernels of this part's primitives, " + "-separated
    for (const GemmKernel& k : kernels) {
      if (k.part != specs[i].key || kernel.find(k.impl) != std::string::npos) continue;
      if (!kernel.empty()) kernel += " + ";
      kernel += k.impl;
    }
    p.parts.push_back({specs[i].name, median_ms(samples[i]), specs[i].gflop, specs[i].gemm, kernel});
  }
  for (size_t i = 0; i < extra_names.size(); ++i)
    p.parts.push_back({extra_names[i], median_ms(extra_samples[i]), 0, false, ""});
  p.gemm_precision = model.gemm_precision_note();
  p.bf16 = bf16;
  p.parts.push_back({config.model.tie_embeddings ? "gradient norm (the rest)" : "gradient norm (clip)",
                     median_ms(clip), 0, false, ""});
  p.parts.push_back({"AdamW (clip factor inside)", median_ms(adamw), 0, false, ""});
  p.step_ms = median_ms(total);
  p.tokens_per_s = static_cast<double>(N) / (p.step_ms * 1e-3);
  p.matmul_parameters =
      p.parameters - (config.model.tie_embeddings ? 0 : config.model.vocab_size * config.model.d_model);
  p.model_flops = model_flops_per_step(config.model, p.matmul_parameters, B, T);
  for (size_t i = 0; i < probes.size(); ++i) {
    const double gflops = probes[i]->gflop() / (median_ms(peak[i]) * 1e-3);
    p.gemm_peaks.push_back({probe_libraries[i], gflops});
    if (gflops > p.gemm_peak_gflops) {
      p.gemm_peak_gflops = gflops;
      p.gemm_peak_library = probe_libraries[i];
    }
  }
  p.fma_limit_gflops = fma.gflop() / (median_ms(fma_s) * 1e-3);
  p.fma_lanes = fma.lanes();
  p.logits_copy_ms = median_ms(copy_s);
  p.logits_bytes = logits_copy ? logits_copy->bytes : 0;
  p.model_flops_causal = causal_model_flops_per_step(config.model, p.matmul_parameters, B, T);
  p.mfu = p.model_flops / (p.step_ms * 1e-3) / (p.gemm_peak_gflops * 1e9);
  p.mfu_causal = p.model_flops_causal / (p.step_ms * 1e-3) / (p.gemm_peak_gflops * 1e9);
  p.mfu_fma = p.model_flops / (p.step_ms * 1e-3) / (p.fma_limit_gflops * 1e9);
  return p;
}

}  // namespace wte::profile
