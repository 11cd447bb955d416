// Tiled causal multi-head self-attention: the same layer as src/model/attention.h (GPT-2's
// split_heads, causal softmax(q·kᵀ/√hs)·v, merge_heads), computed the way FlashAttention-2 (Dao
// 2023) does, for the CPU. It never forms a (T,T) matrix and never touches the masked half.
//
// Per batch row b and head h (Z = B·NH independent problems, one thread each), with tiles of
// q_rows query rows by k_cols keys:
//   forward, per block of query rows: loop over key blocks up to the diagonal only, with the online
//     softmax: S = q_i·k_jᵀ (one tile), m_new = max(m, rowmax(scale·S)), P = exp(scale·S - m_new),
//     l = l·e^{m-m_new} + rowsum(P), o = o·e^{m-m_new} + P·v_j; at the end out = o/l and
//     lse = m + log(l) per row. Only out and lse (B,NH,T) are kept.
//   backward, per block of keys j (outer) and query block i >= j (inner): the tile's probabilities
//     are recomputed from q, k and lse (Pᵀ = exp(scale·k_j·q_iᵀ - lse)); with D = rowsum(dout∘out):
//     dv_j += Pᵀ·dout_i, dPᵀ = v_j·dout_iᵀ, dSᵀ = scale·Pᵀ∘(dPᵀ - D_i), dk_j += dSᵀ·q_i,
//     dq_iᵀ += k_jᵀ·dSᵀ.
// Tile products run as register-blocked Highway micro-kernels (simd/attention_tiled.cc) on padded
// copies of the head's q, k, v (and their transposes) in per-thread buffers: every loop has a fixed
// trip count given the tiles and the head size, so a row's forward bits depend on its own keys only
// (appending tokens changes no earlier row), and every result is the same for any thread count.
// Masked entries of a diagonal tile are set to exact zeros; their products add +0.
//
// bf16_inputs (model.matmul_precision = bf16): q, k, v, dout and the tiles' P and dS are rounded
// to bfloat16 before they enter a product, as the dense path's bf16 GEMMs read them; accumulation
// stays float32. On a CPU with AVX512_BF16 (and the AVX-512 Highway target) the products then run
// on pairs of bfloat16 with VDPBF16PS (simd/tile_gemm_bf16.h), otherwise as float32 FMAs on the
// rounded values. On the pair products P and dS are rounded by VCVTNEPS2BF16, which also turns
// denormal floats into zeros: the products read bfloat16 denormals as zeros anyway. The pair
// products sum each entry pair by pair in increasing k, adding the odd element's product before
// the even one's (products of bfloat16 are exact in float32, each addition rounds), and read
// denormal inputs as zero and flush denormal sums to zero (DAZ, FTZ): the scores q_t·k_j and
// k_j·q_t still have the same bits (same pairs, same order), and causality and thread-count
// independence hold as above; results differ from the float32 FMA path's in the last bits.
#pragma once

#include <cstddef>

#include "wte/config.h"

namespace wte {

/// Tile shape of the tiled attention: query rows by keys per tile. Both are rounded up to a
/// multiple of the vector width of the CPU's float vectors (16 with AVX-512, 8 with AVX2). 0: the
/// default of the path that runs (attention_tiles): 64 by 64, and 128 by 128 on the bf16 pair
/// products, whose tile products are fast enough that each tile's fixed work (the softmax's
/// per-row reductions, the accumulators' loads and stores) is a larger share. Tiles that are
/// not square skip no work on the diagonal.
struct AttentionTiles {
  size_t q_rows = 0;
  size_t k_cols = 0;
};

/// The tile shape that `tiles` stands for on this CPU (its zeros replaced by the defaults above),
/// before the rounding to the vector width.
AttentionTiles attention_tiles(AttentionTiles tiles, bool bf16_inputs);

/// model.attention = auto runs the tiled attention on sequences of at least this many tokens, on the
/// Highway target the kernels run now (the table in attention_tiled.cc: per vector width, each
/// entry citing the measurement that chose it).
size_t tiled_attention_min_t();

/// Whether a model of `config` runs the tiled attention on sequences of T tokens
/// (model.attention: tiled, or auto with T >= auto_min_t); otherwise the dense one. A model passes
/// the threshold it read when it was made.
bool use_tiled_attention(const ModelConfig& config, size_t T,
                         size_t auto_min_t = tiled_attention_min_t());

/// out (B,T,C) written: merge_heads(causal_softmax(q·kᵀ/√hs)·v); lse (B,NH,T) written: the
/// log-sum-exp of each row's scaled scores, log Σ_{j<=t} exp(q_t·k_j/√hs). qkv (B,T,3C) is c_attn's
/// output [q | k | v], head h in columns h·hs..(h+1)·hs-1 of each part (hs = C/NH; NH divides C).
void attention_tiled_forward(float* out, float* lse, const float* qkv, size_t B, size_t T,
                             size_t C, size_t NH, bool bf16_inputs, AttentionTiles tiles = {});

/// Its backward: dqkv (B,T,3C) written (=); dout (B,T,C) the gradient of out; qkv, out and lse as
/// the forward left them.
void attention_tiled_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                              const float* lse, size_t B, size_t T, size_t C, size_t NH,
                              bool bf16_inputs, AttentionTiles tiles = {});

}  // namespace wte
