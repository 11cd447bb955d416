#include "src/model/block.h"

#include <cstring>

#include "src/model/attention.h"
#include "wte/kernels.h"

namespace wte {

void block_forward(float* x_out, const BlockActivations& a, const BlockScratch& s, const float* x,
                   const BlockTensors& w, size_t B, size_t T, size_t C, size_t NH, float eps,
                   Gemm& gemm) {
  const size_t N = B * T;
  // ln1 = ln_1(x)
  layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln_1_g, w.ln_1_b, N, C, eps);
  gemm.mark(&StepTimes::ln_fwd);
  // qkv = ln1 · attn/c_attn/w + attn/c_attn/b
  matmul_forward(a.qkv, a.ln1, w.c_attn_w, w.c_attn_b, N, C, 3 * C, gemm);
  gemm.mark(&StepTimes::qkv_gemm_fwd);
  // atty = merge_heads(causal_softmax(q·kᵀ/√hs) · v)
  attention_forward(a.atty, a.att, a.qkv, B, T, C, NH, gemm);
  // x_mid = x + atty · attn/c_proj/w + attn/c_proj/b
  matmul_forward(s.proj, a.atty, w.attn_c_proj_w, w.attn_c_proj_b, N, C, C, gemm);
  gemm.mark(&StepTimes::attn_proj_gemm_fwd);
  residual_forward(a.xmid, x, s.proj, N * C);
  gemm.mark(&StepTimes::residual_fwd);
  // ln2 = ln_2(x_mid)
  layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.xmid, w.ln_2_g, w.ln_2_b, N, C, eps);
  gemm.mark(&StepTimes::ln_fwd);
  // fch_gelu = gelu(ln2 · mlp/c_fc/w + mlp/c_fc/b)
  matmul_forward(a.fch, a.ln2, w.c_fc_w, w.c_fc_b, N, C, 4 * C, gemm);
  gemm.mark(&StepTimes::fc_gemm_fwd);
  gelu_forward(a.fch_gelu, a.fch, N * 4 * C);
  gemm.mark(&StepTimes::gelu_fwd);
  // x_out = x_mid + fch_gelu · mlp/c_proj/w + mlp/c_proj/b
  matmul_forward(s.proj, a.fch_gelu, w.mlp_c_proj_w, w.mlp_c_proj_b, N, 4 * C, C, gemm);
  gemm.mark(&StepTimes::fc_proj_gemm_fwd);
  residual_forward(x_out, a.xmid, s.proj, N * C);
  gemm.mark(&StepTimes::residual_fwd);
}

void block_backward(float* dx, const BlockTensors& g, const BlockScratch& s,
                    const BlockActivations& a, const float* x, const BlockTensors& w, size_t B,
                    size_t T, size_t C, size_t NH, Gemm& gemm) {
  const size_t N = B * T;
  float* dln = s.proj;
  // x_out = x_mid + fch_gelu · mlp/c_proj/w + b: the residual passes dx on to x_mid unchanged;
  //   d fch_gelu = dx · wᵀ, dw = fch_geluᵀ · dx, db = Σ dx
  matmul_backward(s.d4c, g.mlp_c_proj_w, g.mlp_c_proj_b, dx, a.fch_gelu, w.mlp_c_proj_w, N, 4 * C,
                  C, gemm, &StepTimes::fc_proj_gemm_bwd);
  // fch_gelu = gelu(fch)
  gelu_backward(s.d4c, a.fch, s.d4c, N * 4 * C);
  gemm.mark(&StepTimes::gelu_bwd);
  // fch = ln2 · mlp/c_fc/w + b
  matmul_backward(dln, g.c_fc_w, g.c_fc_b, s.d4c, a.ln2, w.c_fc_w, N, C, 4 * C, gemm,
                  &StepTimes::fc_gemm_bwd);
  // ln2 = ln_2(x_mid): dx += d x_mid through ln_2 (dx now holds d x_mid)
  std::memset(g.ln_2_g, 0, C * sizeof(float));
  std::memset(g.ln_2_b, 0, C * sizeof(float));
  layernorm_backward(dx, g.ln_2_g, g.ln_2_b, dln, a.xmid, w.ln_2_g, a.ln2_mean, a.ln2_rstd, N, C);
  gemm.mark(&StepTimes::ln_bwd);
  // x_mid = x + atty · attn/c_proj/w + b: the residual passes dx on to x unchanged
  matmul_backward(s.datty, g.attn_c_proj_w, g.attn_c_proj_b, dx, a.atty, w.attn_c_proj_w, N, C,
                  C, gemm, &StepTimes::attn_proj_gemm_bwd);
  // atty = merge_heads(causal_softmax(q·kᵀ/√hs) · v)
  float* dqkv = s.d4c;
  attention_backward(dqkv, s.datt, s.datty, a.qkv, a.att, B, T, C, NH, gemm);
  // qkv = ln1 · attn/c_attn/w + b
  matmul_backward(dln, g.c_attn_w, g.c_attn_b, dqkv, a.ln1, w.c_attn_w, N, C, 3 * C, gemm,
                  &StepTimes::qkv_gemm_bwd);
  // ln1 = ln_1(x): dx += d x through ln_1 (dx now holds d x)
  std::memset(g.ln_1_g, 0, C * sizeof(float));
  std::memset(g.ln_1_b, 0, C * sizeof(float));
  layernorm_backward(dx, g.ln_1_g, g.ln_1_b, dln, x, w.ln_1_g, a.ln1_mean, a.ln1_rstd, N, C);
  gemm.mark(&StepTimes::ln_bwd);
}

}  // namespace wte
