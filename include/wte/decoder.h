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
// checks the bound). It runs the model's own GEMM precision (Model::gemm_precision): when the
// model's GEMMs take bf16 inputs (model.matmul_precision = bf16), every product the model computes
// with a GEMM (the four linear layers, q·kᵀ, att·v, the unembedding) reads its inputs rounded to
// bf16 here too, with float32 products and sums, so sampled text and hidden states are the trained
// model's. Every output element is summed by one thread in a fixed order: the same
// tokens give the same bits for any thread count.
#pragma once

#include <algorithm>
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
  bool bf16_ = false;        // the model's GEMMs take bf16 inputs (Model::gemm_precision)
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

/// A Decoder whose sequence may grow past n_ctx: the context window slides (what `wte sample`
/// runs). Each next token is predicted from the most recent tokens only, as nanoGPT's sample.py
/// crops its input to the last block_size tokens (idx[:, -block_size:]).
///
/// The cache holds window() at positions 0 .. window().size() - 1. While the window has fewer than
/// n_ctx tokens, push() is one Decoder::step(). When it is full (n_ctx tokens) and a token comes,
/// the window drops its `drop` oldest tokens, then the decoder is reset and re-prefilled with the
/// remaining n_ctx + 1 - drop tokens (the new one last): with learned positions (wpe) every kept
/// token moves to a new position, so its cached keys and values cannot be reused. So after the
/// sequence first fills n_ctx, each prediction sees the last n_ctx + 1 - drop .. n_ctx tokens, and
/// a prefill of n_ctx + 1 - drop rows happens once every `drop` tokens:
///   drop = 1        nanoGPT's window exactly (always the last n_ctx tokens), but every token past
///                   n_ctx costs a prefill of n_ctx rows (about n_ctx times a step);
///   drop = n_ctx/4  (default_drop) at least 3/4 of n_ctx tokens of context, and on average about
///                   4 rows per token instead of 1.
/// Logits are always those of a fresh Decoder fed window() from position 0 (the same bits:
/// Decoder::prefill gives step()'s bits), so they equal Model::forward_logits on window() within
/// the Decoder's bound.
class SlidingDecoder {
 public:
  /// The decoder of `model` (see Decoder's constructor: the same lifetime rule and errors); `drop`
  /// in [1, n_ctx], else throws wte::Error naming it.
  SlidingDecoder(const Model& model, size_t drop);
  /// n_ctx / 4, at least 1: the drop `wte sample` uses unless told otherwise.
  static size_t default_drop(size_t n_ctx) { return std::max<size_t>(1, n_ctx / 4); }

  /// Starts a new sequence with the n tokens ids[0..n), n >= 1, and returns the logits of the
  /// next token (V), valid until the next call. A start longer than n_ctx is cropped to its last
  /// n_ctx tokens (the caller says so to the user: see cropped()). Throws wte::Error, before any
  /// work, if n == 0 or an id is outside [0, vocab_size).
  const float* start(const int32_t* ids, size_t n);
  /// Appends token `id` and returns the logits of the token after it (V), sliding the window if
  /// it is full. Throws wte::Error, before any work, if id is outside [0, vocab_size) or start()
  /// was not called.
  const float* push(int32_t id);

  /// The tokens the last logits were computed from, oldest first (at most n_ctx).
  const std::vector<int32_t>& window() const { return window_; }
  /// Tokens start() dropped from the front of its input (0 if it fitted in n_ctx).
  size_t cropped() const { return cropped_; }
  /// Re-prefills since start() (each after `drop` new tokens once the window is full).
  size_t slides() const { return slides_; }
  size_t drop() const { return drop_; }
  size_t n_ctx() const { return dec_.n_ctx(); }
  size_t vocab_size() const { return dec_.vocab_size(); }

 private:
  // Resets the decoder and runs window_ from position 0; returns the last row's logits.
  const float* refill();

  Decoder dec_;
  size_t drop_;
  std::vector<int32_t> window_;
  size_t cropped_ = 0, slides_ = 0;
  bool started_ = false;
};

/// How the next token is drawn from the logits.
struct SamplingParams {
  double temperature = 1.0;   // logits are divided by it; 0: greedy (the highest logit)
  size_t top_k = 0;           // keep the k highest logits (0: all V)
  double top_p = 1.0;         // nucleus: keep the most likely tokens up to this mass, in (0, 1]
};

/// Draws a token id from the logits (V) as Hugging Face's generate() with do_sample does, in its
/// order: softmax(logits / temperature), restricted to the top_k highest logits (ties broken by
/// the lower id), then to the nucleus: the most likely of those, in that order, while the mass of
/// the tokens before them (renormalised over the top_k) is below top_p, so the smallest prefix
/// whose mass reaches top_p (at least one token; top_p = 1 keeps all k). One rng.uniform() draw
/// (none when temperature is 0, which returns the highest logit's id, the lowest id among ties).
/// Computed in double. Deterministic: the same logits and Rng state give the same id. Throws
/// wte::Error if V == 0, temperature < 0, top_p outside (0, 1] or a logit is not finite.
int32_t sample_token(const float* logits, size_t V, const SamplingParams& params, Rng& rng);

/// The hidden-state layers of a model with n_layer blocks, as `wte hidden-states` and Python's
/// Model(ids, output_hidden_states=True) return them: the embeddings, each block's input, the last
/// after ln_f: n_layer + 1 entries (2 when n_layer = 0).
size_t hidden_state_layers(size_t n_layer);

/// Every layer's rows and the logits of the T tokens ids[0..T) through the KV-cache decoder's
/// prefill (each row has the bits of decoding the tokens one position at a time), written into
/// the caller's buffers: with `layers` non-null, layers[l] (T, C) for each of the
/// L = hidden_state_layers(dec.n_layer()) layers (the last one after ln_f); with `logits`
/// non-null, (T, vocab_size) (the unembedding is skipped otherwise). Resets `dec`. Throws
/// wte::Error as Decoder::prefill (T == 0 or > n_ctx, an id outside [0, vocab_size)), before
/// any work. (src/analysis/hidden_states.cc)
void decode_hidden_states(Decoder& dec, const int32_t* ids, size_t T, float* const* layers,
                          float* logits);

}  // namespace wte
