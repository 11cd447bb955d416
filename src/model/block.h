// One GPT-2 transformer block (model.py block()), forward and backward:
//   x_mid = x + attn(ln_1(x));   x_out = x_mid + mlp(ln_2(x_mid))
// with attn = c_proj(causal multi-head attention(c_attn(·))) and mlp = c_proj(gelu(c_fc(·))).
// Shapes: N = B·T rows, C = d_model, NH heads, hs = C/NH.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/model/matmul.h"
#include "wte/model.h"

namespace wte {

/// What one block's forward keeps for its backward (views into the model's activation arena).
/// Under bf16 GEMMs the GEMM inputs among them carry their bf16 copies (Activation::bf16), written
/// in the forward by the kernel that writes the values and read again by the backward's weight
/// gradients; otherwise every bf16 is nullptr.
struct BlockActivations {
  Activation ln1;       // (N,C)      ln_1(x)
  float* ln1_mean;      // (N)
  float* ln1_rstd;      // (N)
  Activation qkv;       // (N,3C)     c_attn output [q | k | v]
  Activation att;       // (B,NH,T,T) causal softmax probabilities (dense attention)
  float* lse;           // (B,NH,T)   log-sum-exp of each row's scaled scores (tiled attention)
  Activation atty;      // (N,C)      attention output, heads merged (c_proj's input)
  float* xmid;          // (N,C)      x + attn(ln_1(x))
  Activation ln2;       // (N,C)      ln_2(x_mid)
  float* ln2_mean;      // (N)
  float* ln2_rstd;      // (N)
  float* fch;           // (N,4C)     c_fc output (GELU's input)
  Activation fch_gelu;  // (N,4C)     gelu(fch) (mlp c_proj's input)
};

/// bf16 copies of one block's GEMM weights (views into the model's bf16 parameter mirror).
struct BlockWeights16 {
  const uint16_t* c_attn_w;       // (C,3C)
  const uint16_t* attn_c_proj_w;  // (C,C)
  const uint16_t* c_fc_w;         // (C,4C)
  const uint16_t* mlp_c_proj_w;   // (4C,C)
};

/// Scratch shared by every block (overwritten by each call); the bf16 copies under bf16 GEMMs only.
struct BlockScratch {
  float* proj;      // (N,C)      forward: a c_proj output before its residual add; backward: dln
  Activation datty; // (N,C)      backward: d atty
  Activation d4c;   // (N,4C)     backward: d fch_gelu / d fch, then d qkv (first 3C columns' worth)
  Activation datt;  // (B,NH,T,T) backward: d att, then d preatt (dense attention)
};

/// x_out (N,C) written; act written; x (N,C) the residual stream entering the block.
/// w16: the weights' bf16 copies for bf16 GEMMs (act's bf16 copies are then written), or nullptr.
/// tiled_attention: the tiled attention (src/model/attention_tiled.h; act.lse written, act.att
/// unused), else the dense one (act.att written).
/// Step parts (Gemm::part): every layer opens its own ("ln_fwd", "qkv_gemm_fwd", ...).
void block_forward(float* x_out, const BlockActivations& act, const BlockScratch& s,
                   const float* x, const BlockTensors& w, const BlockWeights16* w16, size_t B,
                   size_t T, size_t C, size_t NH, float eps, bool tiled_attention, Gemm& gemm);

/// dx (N,C): on entry d x_out, on return d x (the residual stream's gradient, updated in place);
/// under bf16 GEMMs dx.bf16 holds its bf16 copy on entry (made by the layer that wrote dx), and
/// on return that of d x. Every gradient of g is added into (+=; Model::zero_grad zeroes them once
/// per step). act and x as the forward left them; w16 and tiled_attention as in the forward.
void block_backward(Activation dx, const BlockTensors& g, const BlockScratch& s,
                    const BlockActivations& act, const float* x, const BlockTensors& w,
                    const BlockWeights16* w16, size_t B, size_t T, size_t C, size_t NH,
                    bool tiled_attention, Gemm& gemm);

}  // namespace wte
