#include "src/model/block.h"

#include "src/model/attention.h"
#include "src/model/attention_tiled.h"
#include "wte/kernels.h"

namespace wte {
namespace {

// bf16 GEMMs: dst16 = bf16(src) (n), charged to StepTimes::bf16_convert; returns dst16. A no-op
// returning nullptr for float32 GEMMs (dst16 == nullptr). For GEMM outputs; the other kernels
// write their outputs' bf16 copies themselves, while the rows are in cache.
uint16_t* to_bf16(uint16_t* dst16, const float* src, size_t n, Gemm& gemm) {
  if (dst16 == nullptr) return nullptr;
  convert_f32_to_bf16(dst16, src, n);
  gemm.mark(&StepTimes::bf16_convert);
  return dst16;
}

}  // namespace

// bf16 GEMMs (w16 != nullptr): every GEMM reads bf16 copies; a's bf16 buffers are then set.
void block_forward(float* x_out, const BlockActivations& a, const BlockScratch& s, const float* x,
                   const BlockTensors& w, const BlockWeights16* w16, size_t B, size_t T, size_t C,
                   size_t NH, float eps, bool tiled_attention, Gemm& gemm) {
  const size_t N = B * T;
  const bool bf16 = w16 != nullptr;
  // ln1 = ln_1(x)
  layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln_1_g, w.ln_1_b, N, C, eps, a.ln1_16);
  gemm.mark(&StepTimes::ln_fwd);
  // qkv = ln1 · attn/c_attn/w + attn/c_attn/b
  matmul_forward(a.qkv, {a.ln1, a.ln1_16}, {w.c_attn_w, bf16 ? w16->c_attn_w : nullptr},
                 w.c_attn_b, N, C, 3 * C, gemm);
  gemm.mark(&StepTimes::qkv_gemm_fwd);
  // atty = merge_heads(causal_softmax(q·kᵀ/√hs) · v)
  if (tiled_attention) {
    attention_tiled_forward(a.atty, a.lse, a.qkv, B, T, C, NH, bf16);
    gemm.mark(&StepTimes::attn_qk_fwd);  // the whole tiled attention
  } else {
    attention_forward(a.atty, a.att, a.qkv, a.qkv16, a.att16, B, T, C, NH, gemm);
  }
  // x_mid = x + atty · attn/c_proj/w + attn/c_proj/b
  const GemmInput atty(a.atty, to_bf16(a.atty16, a.atty, N * C, gemm));
  matmul_forward(s.proj, atty, {w.attn_c_proj_w, bf16 ? w16->attn_c_proj_w : nullptr},
                 w.attn_c_proj_b, N, C, C, gemm);
  gemm.mark(&StepTimes::attn_proj_gemm_fwd);
  residual_forward(a.xmid, x, s.proj, N * C);
  gemm.mark(&StepTimes::residual_fwd);
  // ln2 = ln_2(x_mid)
  layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.xmid, w.ln_2_g, w.ln_2_b, N, C, eps, a.ln2_16);
  gemm.mark(&StepTimes::ln_fwd);
  // fch_gelu = gelu(ln2 · mlp/c_fc/w + mlp/c_fc/b)
  matmul_forward(a.fch, {a.ln2, a.ln2_16}, {w.c_fc_w, bf16 ? w16->c_fc_w : nullptr}, w.c_fc_b, N,
                 C, 4 * C, gemm);
  gemm.mark(&StepTimes::fc_gemm_fwd);
  gelu_forward(a.fch_gelu, a.fch, N * 4 * C, a.fch_gelu16);
  gemm.mark(&StepTimes::gelu_fwd);
  // x_out = x_mid + fch_gelu · mlp/c_proj/w + mlp/c_proj/b
  matmul_forward(s.proj, {a.fch_gelu, a.fch_gelu16},
                 {w.mlp_c_proj_w, bf16 ? w16->mlp_c_proj_w : nullptr}, w.mlp_c_proj_b, N, 4 * C,
                 C, gemm);
  gemm.mark(&StepTimes::fc_proj_gemm_fwd);
  residual_forward(x_out, a.xmid, s.proj, N * C);
  gemm.mark(&StepTimes::residual_fwd);
}

void block_backward(float* dx, const BlockTensors& g, const BlockScratch& s,
                    const BlockActivations& a, const float* x, const BlockTensors& w,
                    const BlockWeights16* w16, size_t B, size_t T, size_t C, size_t NH,
                    bool tiled_attention, Gemm& gemm) {
  const size_t N = B * T;
  const bool bf16 = w16 != nullptr;
  uint16_t* d16 = bf16 ? s.d16 : nullptr;  // the upstream gradient's bf16 copy (scratch)
  float* dln = s.proj;
  // x_out = x_mid + fch_gelu · mlp/c_proj/w + b: the residual passes dx on to x_mid unchanged;
  //   d fch_gelu = dx · wᵀ, dw = fch_geluᵀ · dx, db = Σ dx
  matmul_backward(s.d4c, g.mlp_c_proj_w, g.mlp_c_proj_b, {dx, to_bf16(d16, dx, N * C, gemm)},
                  {a.fch_gelu, a.fch_gelu16}, {w.mlp_c_proj_w, bf16 ? w16->mlp_c_proj_w : nullptr},
                  N, 4 * C, C, gemm, &StepTimes::fc_proj_gemm_bwd);
  // fch_gelu = gelu(fch)
  gelu_backward(s.d4c, a.fch, s.d4c, N * 4 * C, d16);
  gemm.mark(&StepTimes::gelu_bwd);
  // fch = ln2 · mlp/c_fc/w + b
  matmul_backward(dln, g.c_fc_w, g.c_fc_b, {s.d4c, d16}, {a.ln2, a.ln2_16},
                  {w.c_fc_w, bf16 ? w16->c_fc_w : nullptr}, N, C, 4 * C, gemm,
                  &StepTimes::fc_gemm_bwd);
  // ln2 = ln_2(x_mid): dx += d x_mid through ln_2 (dx now holds d x_mid)
  layernorm_backward(dx, g.ln_2_g, g.ln_2_b, dln, a.xmid, w.ln_2_g, a.ln2_mean, a.ln2_rstd, N, C);
  gemm.mark(&StepTimes::ln_bwd);
  // x_mid = x + atty · attn/c_proj/w + b: the residual passes dx on to x unchanged
  matmul_backward(s.datty, g.attn_c_proj_w, g.attn_c_proj_b, {dx, to_bf16(d16, dx, N * C, gemm)},
                  {a.atty, a.atty16}, {w.attn_c_proj_w, bf16 ? w16->attn_c_proj_w : nullptr}, N,
                  C, C, gemm, &StepTimes::attn_proj_gemm_bwd);
  // atty = merge_heads(causal_softmax(q·kᵀ/√hs) · v)
  float* dqkv = s.d4c;
  if (tiled_attention) {
    attention_tiled_backward(dqkv, s.datty, a.qkv, a.atty, a.lse, B, T, C, NH, bf16);
    gemm.mark(&StepTimes::attn_qk_bwd);  // the whole tiled attention
  } else {
    attention_backward(dqkv, s.datt, s.datty, a.qkv, a.att, a.qkv16, a.att16, s.datty16,
                       s.datt16, B, T, C, NH, gemm);
  }
  // qkv = ln1 · attn/c_attn/w + b
  matmul_backward(dln, g.c_attn_w, g.c_attn_b, {dqkv, to_bf16(d16, dqkv, N * 3 * C, gemm)},
                  {a.ln1, a.ln1_16}, {w.c_attn_w, bf16 ? w16->c_attn_w : nullptr}, N, C, 3 * C,
                  gemm, &StepTimes::qkv_gemm_bwd);
  // ln1 = ln_1(x): dx += d x through ln_1 (dx now holds d x)
  layernorm_backward(dx, g.ln_1_g, g.ln_1_b, dln, x, w.ln_1_g, a.ln1_mean, a.ln1_rstd, N, C);
  gemm.mark(&StepTimes::ln_bwd);
}

}  // namespace wte
