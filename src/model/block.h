// One GPT-2 transformer block (model.py block()), forward and backward:
//   x_mid = x + attn(ln_1(x));   x_out = x_mid + mlp(ln_2(x_mid))
// with attn = c_proj(causal multi-head attention(c_attn(·))) and mlp = c_proj(gelu(c_fc(·))).
// Shapes: N = B·T rows, C = d_model, NH heads, hs = C/NH.
#pragma once

#include <cstddef>

#include "src/model/matmul.h"
#include "wte/model.h"

namespace wte {

/// What one block's forward keeps for its backward (views into the model's activation arena).
struct BlockActivations {
  float* ln1;       // (N,C)      ln_1(x)
  float* ln1_mean;  // (N)
  float* ln1_rstd;  // (N)
  float* qkv;       // (N,3C)     c_attn output [q | k | v]
  float* att;       // (B,NH,T,T) causal softmax probabilities
  float* atty;      // (N,C)      attention output, heads merged (c_proj's input)
  float* xmid;      // (N,C)      x + attn(ln_1(x))
  float* ln2;       // (N,C)      ln_2(x_mid)
  float* ln2_mean;  // (N)
  float* ln2_rstd;  // (N)
  float* fch;       // (N,4C)     c_fc output (GELU's input)
  float* fch_gelu;  // (N,4C)     gelu(fch) (mlp c_proj's input)
};

/// Scratch shared by every block (overwritten by each call).
struct BlockScratch {
  float* proj;  // (N,C)      forward: a c_proj output before its residual add; backward: dln
  float* datty; // (N,C)      backward: d atty
  float* d4c;   // (N,4C)     backward: d fch_gelu / d fch, then d qkv (first 3C columns' worth)
  float* datt;  // (B,NH,T,T) backward: d att, then d preatt
};

/// x_out (N,C) written; act written; x (N,C) the residual stream entering the block.
void block_forward(float* x_out, const BlockActivations& act, const BlockScratch& s,
                   const float* x, const BlockTensors& w, size_t B, size_t T, size_t C, size_t NH,
                   float eps, Gemm& gemm);

/// dx (N,C): on entry d x_out, on return d x (the residual stream's gradient, updated in place).
/// Every gradient of g is written (=). act and x as the forward left them.
void block_backward(float* dx, const BlockTensors& g, const BlockScratch& s,
                    const BlockActivations& act, const float* x, const BlockTensors& w, size_t B,
                    size_t T, size_t C, size_t NH, Gemm& gemm);

}  // namespace wte
