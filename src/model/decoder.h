// Inference one position at a time with a KV cache (what `wte sample` and `wte hidden-states` run).
//
// For the token x_t at position t (GPT-2's model.py with `past`, one row instead of (B,T)):
//   h = wte[x_t] + wpe[t]                                    hidden_states[0] row       (C)
//   for each block l:
//     a = ln_1(h);  [q | k | v] = a · c_attn/w + c_attn/b     (3C); k, v appended to the cache
//     per head: att[j] = softmax_j(q·k_j / sqrt(hs)), j <= t   (only cached positions: causal)
//     h = h + (Σ_j att[j] v_j) · attn/c_proj/w + attn/c_proj/b
//     h = h + gelu(ln_2(h) · mlp/c_fc/w + mlp/c_fc/b) · mlp/c_proj/w + mlp/c_proj/b
//   h' = ln_f(h) (or h when ln_f is off);  logits = h' · lm_headᵀ   (V)
// so a new token costs one row of every layer plus t+1 cached keys and values per head: the rows
// of earlier positions are never recomputed, and no row can see a later token.
//
// The decoder reads the parameters of a Model by name (Model::tensors(), the names and shapes of
// include/wte/model.h) and owns only its caches: K and V per layer (n_layer, n_ctx, C).
// It computes with wte's kernels (include/wte/kernels.h: layernorm_forward with N = 1,
// gelu_forward, residual_forward) and plain matrix-vector loops, so its logits equal
// Model::forward_logits's within float rounding, not bit for bit (tests/model/test_decoder.cc states and
// checks the bound). Every output element is summed by one thread in a fixed order: the same
// tokens give the same bits for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "wte/model.h"
#include "wte/rng.h"

namespace wte {

class Decoder {
 public:
  /// Finds the parameters of `model` by name; the model must outlive the decoder and its parameters
  /// must not change while a sequence is decoded (load the checkpoint first). Allocates the caches
  /// (2 · n_layer · n_ctx · C floats). Throws wte::Error if a tensor the config implies is missing
  /// or has another shape.
  explicit Decoder(const Model& model);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  /// Forgets every cached position: the next step() is position 0.
  void reset();

  /// Runs token `id` at position position(), caches its keys and values, and returns the logits
  /// of the next token (V), valid until the next step() or reset(). Throws wte::Error, before any
  /// work, if id is outside [0, vocab_size) or the cache is full (position() == n_ctx: wpe has no
  /// row for it).
  const float* step(int32_t id);
  /// Same, without the unembedding (no logits: the (V,C) product is skipped), for callers that
  /// only read residual() and final_hidden(). Returns nothing; same checks.
  void step_hidden(int32_t id);

  /// Runs the n tokens ids[0..n) at positions position() .. position() + n - 1 in one pass (a
  /// prefill; with `logits`, also their logits). Every row has exactly the bits of n step() /
  /// step_hidden() calls (each output element is summed in the same order), but each weight is
  /// read once per call instead of once per token. Same checks as step(), all before any work.
  /// Afterwards residual_rows(l), final_rows() and logits_rows() hold the n rows; residual(l) and
  /// final_hidden() the last one.
  void prefill(const int32_t* ids, size_t n, bool logits);
  /// The last prefill's (or step's) rows: (n, C) of the residual stream entering block l, l in
  /// [0, n_layer] (throws wte::Error otherwise); (n, C) that the unembedding read; (n, V) logits
  /// (throws wte::Error if the last prefill computed none). Valid until the next call.
  const float* residual_rows(size_t l) const;
  const float* final_rows() const { return final_.data(); }
  const float* logits_rows() const;
  /// Rows of the last prefill (1 after step()).
  size_t rows() const { return rows_; }

  /// Positions decoded since the last reset() (the next step's position).
  size_t position() const { return pos_; }
  size_t n_layer() const { return n_layer_; }
  size_t n_ctx() const { return n_ctx_; }
  size_t vocab_size() const { return V_; }
  size_t d_model() const { return C_; }

  /// The last step's row (C) of the residual stream entering block l, l in [0, n_layer]
  /// (l = 0: wte[id] + wpe[t]; l = n_layer: after the last block, before ln_f), as
  /// Model::residual(l). Throws wte::Error if l > n_layer.
  const float* residual(size_t l) const;
  /// The last step's row (C) that the unembedding reads: ln_f's output (residual(n_layer) when
  /// ln_f is off), as Model::final_hidden().
  const float* final_hidden() const;

 private:
  struct Block;
  void block_forward(size_t l, float* h, size_t n);  // n rows (n, C) in place
  void run_position(int32_t id);  // every layer up to final_hidden; advances the position
  void run_positions(const int32_t* ids, size_t n);  // the same for n positions
  void unembed(size_t n);         // logits_ (n, V) from final_ (n, C)
  void reserve_rows(size_t n);    // scratch and row buffers for n rows; sets rows_

  const Model& model_;
  size_t V_ = 0, C_ = 0, n_ctx_ = 0, n_layer_ = 0, n_head_ = 1;
  size_t pos_ = 0;
  size_t rows_ = 0;          // rows of the last step (1) or prefill (n)
  size_t logits_rows_ = 0;   // rows of logits_ the last prefill computed
  const float* wte_ = nullptr;
  const float* wpe_ = nullptr;
  const float* ln_f_g_ = nullptr;
  const float* ln_f_b_ = nullptr;
  const float* lm_head_ = nullptr;
  std::vector<Block> blocks_;
  std::vector<float> k_cache_, v_cache_;   // (n_layer, n_ctx, C) each
  std::vector<float> residual_;            // (n_layer + 1, rows, C) the last call's residual rows
  std::vector<float> final_;               // (rows, C)
  std::vector<float> logits_;              // (rows, V)
  std::vector<float> a_, qkv_, y_, proj_, fc_, att_;   // scratch: per row C, 3C, C, C, 4C; n_ctx
};

/// How the next token is drawn from the logits.
struct SamplingParams {
  double temperature = 1.0;   // logits are divided by it; 0: greedy (the highest logit)
  size_t top_k = 0;           // keep the k highest logits (0: all V)
};

/// Draws a token id from softmax(logits / temperature) restricted to the top_k highest logits
/// (ties broken by the lower id), with one rng.uniform() draw (none when temperature is 0, which
/// returns the highest logit's id, the lowest id among ties). Computed in double. Deterministic:
/// the same logits and Rng state give the same id. logits (V). Throws wte::Error if V == 0,
/// temperature < 0 or a logit is not finite.
int32_t sample_token(const float* logits, size_t V, const SamplingParams& params, Rng& rng);

}  // namespace wte
