// Causal multi-head self-attention, the part of GPT-2's attn() between c_attn and c_proj
// (model.py: split_heads, multihead_attn with mask_attn_weights, merge_heads).
//
// qkv (B,T,3C) is c_attn's output with columns [q | k | v]; head h of q is columns h·hs..(h+1)·hs-1
// (hs = C/NH), likewise for k and v. Per head and batch row (Z = B·NH matrices):
//   preatt = q · kᵀ                     (T,T)   oneDNN matmul, q and kᵀ read from qkv by strides
//   att    = causal_softmax(preatt/√hs) (T,T)   kernel attention_softmax_forward (in place)
//   out    = att · v                    (T,hs)  written straight into its head's columns of out
// so out (B,T,C) is merge_heads(att · v), ready for c_proj. No copy or permute anywhere.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/model/matmul.h"

namespace wte {

/// out (B,T,C) written; att (B,NH,T,T) written (softmax probabilities, saved for backward; entries
/// j > t are 0); qkv (B,T,3C). NH must divide C.
/// bf16 GEMMs: qkv carries its bf16 copy (c_attn's matmul_forward made it) and att.bf16 receives
/// att's, which the two batched GEMMs read (the softmax stays float32); out.bf16 (if given)
/// receives out's, for c_proj. All nullptr: float32 GEMMs.
/// Step parts (Gemm::part): "attn_qk_fwd", "softmax_fwd", "attn_v_fwd", "bf16_convert".
void attention_forward(Activation out, Activation att, GemmInput qkv, size_t B, size_t T,
                       size_t C, size_t NH, Gemm& gemm);

/// Its backward: dqkv (B,T,3C) written (=); datt (B,NH,T,T) scratch (overwritten); dout (B,T,C);
/// qkv and att from the forward.
///   datt = dout_h · v_hᵀ;  dv_h = attᵀ · dout_h;  dpreatt = softmax backward (in place in datt);
///   dq_h = dpreatt · k_h;  dk_h = dpreattᵀ · q_h
/// bf16 GEMMs: qkv, att and dout carry their bf16 copies; datt.bf16 is scratch for dpreatt's and
/// dqkv.bf16 (if given) receives dqkv's, for c_attn's backward. All nullptr: float32 GEMMs.
/// Step parts: "attn_v_bwd", "softmax_bwd", "attn_qk_bwd", "bf16_convert".
void attention_backward(Activation dqkv, Activation datt, GemmInput dout, GemmInput qkv,
                        GemmInput att, size_t B, size_t T, size_t C, size_t NH, Gemm& gemm);

}  // namespace wte
