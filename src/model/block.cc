#include "src/model/block.h"

#include "src/model/attention.h"
#include "src/model/attention_tiled.h"
#include "wte/kernels.h"

namespace wte {

namespace {

// Where a kernel writes the float32 values of an activation that only GEMMs read (ln1, ln2,
// fch_gelu): nowhere when it has a bf16 copy, which is all the bf16 GEMMs read.
float* f32_unless_bf16(const Activation& a) { return a.bf16 != nullptr ? nullptr : a.f32; }

}  // namespace

// bf16 GEMMs (w16 != nullptr): every GEMM reads bf16 copies, which the layers that write a's
// tensors write too; float32 GEMMs: a's bf16 copies are nullptr.
void block_forward(float* x_out, const BlockActivations& a, const BlockScratch& s, const float* x,
                   const BlockTensors& w, const BlockWeights16* w16, size_t B, size_t T, size_t C,
                   size_t NH, float eps, bool tiled_attention, Gemm& gemm) {
  const size_t N = B * T;
  const BlockWeights16 w16s = w16 != nullptr ? *w16 : BlockWeights16{};
  // ln1 = ln_1(x)
  gemm.part("ln_fwd");
  // (under bf16 GEMMs only the bf16 copies of ln1, ln2 and fch_gelu are written: the GEMMs of
  // both passes read nothing else, and the backward of ln_1, ln_2 and GELU reads their inputs)
  layernorm_forward(f32_unless_bf16(a.ln1), a.ln1_mean, a.ln1_rstd, x, w.ln_1_g, w.ln_1_b, N, C,
                    eps, a.ln1.bf16);
  // qkv = ln1 · attn/c_attn/w + attn/c_attn/b
  gemm.part("qkv_gemm_fwd");
  // (the tiled attention reads the float32 qkv and rounds it itself: no bf16 copy of qkv)
  matmul_forward(tiled_attention ? Activation(a.qkv.f32) : a.qkv, a.ln1,
                 {w.c_attn_w, w16s.c_attn_w}, w.c_attn_b, N, C, 3 * C, gemm);
  // atty = merge_heads(causal_softmax(q·kᵀ/√hs) · v)
  if (tiled_attention) {
    gemm.part("attn_tiled_fwd");  // the whole tiled attention (src/model/attention_tiled.h)
    attention_tiled_forward(a.atty.f32, a.lse, a.qkv.f32, B, T, C, NH, w16 != nullptr);
    if (a.atty.bf16 != nullptr) {
      gemm.part("bf16_convert");
      to_bf16(a.atty, N * C);  // c_proj's input
    }
  } else {
    attention_forward(a.atty, a.att, a.qkv, B, T, C, NH, gemm);
  }
  // x_mid = x + atty · attn/c_proj/w + attn/c_proj/b
  gemm.part("attn_proj_gemm_fwd");
  matmul_forward(s.proj, a.atty, {w.attn_c_proj_w, w16s.attn_c_proj_w}, w.attn_c_proj_b, N, C, C,
                 gemm);
  gemm.part("residual_fwd");
  residual_forward(a.xmid, x, s.proj, N * C);
  // ln2 = ln_2(x_mid)
  gemm.part("ln_fwd");
  layernorm_forward(f32_unless_bf16(a.ln2), a.ln2_mean, a.ln2_rstd, a.xmid, w.ln_2_g, w.ln_2_b,
                    N, C, eps, a.ln2.bf16);
  // fch_gelu = gelu(ln2 · mlp/c_fc/w + mlp/c_fc/b)
  gemm.part("fc_gemm_fwd");
  matmul_forward(a.fch, a.ln2, {w.c_fc_w, w16s.c_fc_w}, w.c_fc_b, N, C, 4 * C, gemm);
  gemm.part("gelu_fwd");
  gelu_forward(f32_unless_bf16(a.fch_gelu), a.fch, N * 4 * C, a.fch_gelu.bf16);
  // x_out = x_mid + fch_gelu · mlp/c_proj/w + mlp/c_proj/b
  gemm.part("fc_proj_gemm_fwd");
  matmul_forward(s.proj, a.fch_gelu, {w.mlp_c_proj_w, w16s.mlp_c_proj_w}, w.mlp_c_proj_b, N,
                 4 * C, C, gemm);
  gemm.part("residual_fwd");
  residual_forward(x_out, a.xmid, s.proj, N * C);
}

void block_backward(Activation dx, const BlockTensors& g, const BlockScratch& s,
                    const BlockActivations& a, const float* x, const BlockTensors& w,
                    const BlockWeights16* w16, size_t B, size_t T, size_t C, size_t NH,
                    bool tiled_attention, Gemm& gemm) {
  const size_t N = B * T;
  const BlockWeights16 w16s = w16 != nullptr ? *w16 : BlockWeights16{};
  float* dln = s.proj;
  // x_out = x_mid + fch_gelu · mlp/c_proj/w + b: the residual passes dx on to x_mid unchanged;
  //   d fch_gelu = dx · wᵀ, dw = fch_geluᵀ · dx, db = Σ dx
  gemm.part("fc_proj_gemm_bwd");
  matmul_backward(s.d4c.f32, g.mlp_c_proj_w, g.mlp_c_proj_b, dx, a.fch_gelu,
                  {w.mlp_c_proj_w, w16s.mlp_c_proj_w}, N, 4 * C, C, gemm);
  // fch_gelu = gelu(fch)
  gemm.part("gelu_bwd");
  gelu_backward(s.d4c.f32, a.fch, s.d4c.f32, N * 4 * C, s.d4c.bf16);
  // fch = ln2 · mlp/c_fc/w + b
  gemm.part("fc_gemm_bwd");
  matmul_backward(dln, g.c_fc_w, g.c_fc_b, s.d4c, a.ln2, {w.c_fc_w, w16s.c_fc_w}, N, C, 4 * C,
                  gemm);
  // ln2 = ln_2(x_mid): dx += d x_mid through ln_2 (dx now holds d x_mid, and its bf16 copy)
  gemm.part("ln_bwd");
  layernorm_backward(dx.f32, g.ln_2_g, g.ln_2_b, dln, a.xmid, w.ln_2_g, a.ln2_mean, a.ln2_rstd, N,
                     C, dx.bf16);
  // x_mid = x + atty · attn/c_proj/w + b: the residual passes dx on to x unchanged
  gemm.part("attn_proj_gemm_bwd");
  // (the tiled attention reads the float32 datty and rounds it itself: no bf16 copy of datty)
  matmul_backward(tiled_attention ? Activation(s.datty.f32) : s.datty, g.attn_c_proj_w,
                  g.attn_c_proj_b, dx, a.atty,
                  {w.attn_c_proj_w, w16s.attn_c_proj_w}, N, C, C, gemm);
  // atty = merge_heads(causal_softmax(q·kᵀ/√hs) · v)
  const Activation dqkv = s.d4c;
  if (tiled_attention) {
    gemm.part("attn_tiled_bwd");  // the whole tiled attention (src/model/attention_tiled.h)
    attention_tiled_backward(dqkv.f32, s.datty.f32, a.qkv.f32, a.atty.f32, a.lse, B, T, C, NH,
                             w16 != nullptr);
    if (dqkv.bf16 != nullptr) {
      gemm.part("bf16_convert");
      to_bf16(dqkv, N * 3 * C);  // c_attn's backward reads it
    }
  } else {
    attention_backward(dqkv, s.datt, s.datty, a.qkv, a.att, B, T, C, NH, gemm);
  }
  // qkv = ln1 · attn/c_attn/w + b
  gemm.part("qkv_gemm_bwd");
  matmul_backward(dln, g.c_attn_w, g.c_attn_b, dqkv, a.ln1, {w.c_attn_w, w16s.c_attn_w}, N, C,
                  3 * C, gemm);
  // ln1 = ln_1(x): dx += d x through ln_1 (dx now holds d x, and its bf16 copy)
  gemm.part("ln_bwd");
  layernorm_backward(dx.f32, g.ln_1_g, g.ln_1_b, dln, x, w.ln_1_g, a.ln1_mean, a.ln1_rstd, N, C,
                     dx.bf16);
}

}  // namespace wte
