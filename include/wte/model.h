// GPT-2 (Radford et al. 2019, model.py) on the CPU in float32, with n_layer transformer blocks
// (n_layer = 0: the embedding-only model, bit for bit what wte trained before blocks existed).
//
//   residual(0) = wte[x] + wpe[t]              (B,T,C)  lookup + position  (simd kernel)
//   for l in 0..n_layer-1:                              block h{l}          (src/model/block.*)
//     x = residual(l)
//     x = x + attn(ln_1(x))                             c_attn, causal multi-head attention, c_proj
//     residual(l+1) = x + mlp(ln_2(x))                  c_fc, GELU (tanh form), c_proj
//   h'     = ln_f(residual(n_layer))           (B,T,C)  optional final norm (simd kernel)
//   logits = h' · wteᵀ                         (B,T,V)  tied lm_head        (oneDNN matmul)
//   loss   = mean cross-entropy of logits against the next tokens           (simd kernel)
//
// Source: GPT-2's model.py: model(), block(), attn(), mlp(), norm(), the tied
// `tf.matmul(h_flat, wte, transpose_b=True)`; initialisation from the same file and the GPT-2
// paper (residual projections scaled by 1/√(2·n_layer)).
//
// Gradients accumulate (llm.c's convention): backward() adds every parameter gradient into the
// gradient arena, and Model::zero_grad() zeroes it, once per optimizer step, before the first
// micro-batch; gradient accumulation is then just several forward/backward passes.
// wte's gradient has two paths that add into ONE buffer, grads.wte: the unembedding GEMM
// (dlogitsᵀ · h', dense, added through oneDNN's sum post-op) and the lookup backward (a sparse-row
// scatter-add of dhidden into the rows whose ids are in the batch).
//
// Untied (model.tie_embeddings = false): logits = h' · lm_headᵀ with a separate lm_head (V,C) whose
// gradient is dense (the GEMM); wte's gradient is row-sparse and never stored as (V,C): backward
// leaves the touched rows' sums in wte_grad_rows() (merged over the passes since zero_grad) and
// the optimizer applies a lazy AdamW to those rows only (include/wte/optimizer.h). grads().wte is
// then unused (zero, never touched).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wte/config.h"

namespace wte {

/// Named views of one block's tensors (GPT-2's names under h{l}/; linear weights stored (in, out)).
struct BlockTensors {
  float* ln_1_g;         // (C)      h{l}/ln_1/g
  float* ln_1_b;         // (C)      h{l}/ln_1/b
  float* c_attn_w;       // (C,3C)   h{l}/attn/c_attn/w   columns [q | k | v]
  float* c_attn_b;       // (3C)     h{l}/attn/c_attn/b
  float* attn_c_proj_w;  // (C,C)    h{l}/attn/c_proj/w
  float* attn_c_proj_b;  // (C)      h{l}/attn/c_proj/b
  float* ln_2_g;         // (C)      h{l}/ln_2/g
  float* ln_2_b;         // (C)      h{l}/ln_2/b
  float* c_fc_w;         // (C,4C)   h{l}/mlp/c_fc/w
  float* c_fc_b;         // (4C)     h{l}/mlp/c_fc/b
  float* mlp_c_proj_w;   // (4C,C)   h{l}/mlp/c_proj/w
  float* mlp_c_proj_b;   // (C)      h{l}/mlp/c_proj/b
};

/// Named views into one parameter arena (or the gradient arena, same layout).
struct ParameterTensors {
  float* wte;     // (V, C)      token embedding, also the (tied) lm_head
  float* wpe;     // (n_ctx, C)  position embedding
  float* ln_f_g;  // (C)         ln_f gain   (GPT-2's name: model/ln_f/g)
  float* ln_f_b;  // (C)         ln_f bias   (GPT-2's name: model/ln_f/b)
  float* lm_head; // (V, C)      untied lm_head; nullptr when tie_embeddings (wte is the lm_head)
  std::vector<BlockTensors> h;  // (n_layer) blocks h0, h1, ...
};

/// wte's row-sparse gradient of an untied model (see Model::wte_grad_rows).
struct SparseRowGrad {
  float* rows = nullptr;          // (count, C) gradient rows
  const int32_t* ids = nullptr;   // (count) their row ids in wte, distinct, increasing
  size_t count = 0;
  size_t C = 0;
};

/// Sums of squares of the gradient's first `count` blocks of kSumOfSquaresBlock floats (Model::grad_norm_head,
/// wte::grad_norm): sums[b] = Σ g[i]² over block b, in double.
struct GradNormHead {
  const double* sums = nullptr;
  size_t count = 0;
};

/// The SparseRowGrad view of rows kept in vectors, e.g. merged by merge_sparse_rows
/// (train/distributed/data_parallel.h): `ids` (count) distinct and increasing, `rows` (count, C). The view
/// points into the vectors: valid while they are not resized or freed.
inline SparseRowGrad sparse_row_grad_view(std::vector<float>& rows, const std::vector<int32_t>& ids,
                                          size_t C) {
  return SparseRowGrad{rows.data(), ids.data(), ids.size(), C};
}

class PartTimer;    // src/model/part_timer.h: seconds per step part (`wte profile step`)
struct GemmKernel;  // src/model/matmul.h: one GEMM primitive's kernel and step part

/// One tensor of the arena: its name (also its HDF5 dataset name), shape, offset and size in floats.
struct TensorSpec {
  std::string name;            // "wte", "wpe", "ln_f/g", "ln_f/b", "h0/attn/c_attn/w", ...
  std::vector<size_t> shape;
  size_t offset;
  size_t size;
  bool weight_decay;           // AdamW decays the embedding tables, lm_head and */w; never
                               // biases or LayerNorms
  bool sparse_grad = false;    // gradient is row-sparse (Model::wte_grad_rows), not in the arena
};

/// The model: parameters, gradients and activations, each in one 64-byte-aligned arena, plus the
/// oneDNN primitives (created once per batch shape and reused).
/// Not thread-safe; the kernels inside run in parallel with OpenMP.
/// Reproducibility: the same inputs give bit-identical results for the same OpenMP thread count.
/// oneDNN fixes its GEMM partitioning when a primitive is created (first use of a batch shape), so
/// keep the thread count fixed for a model's lifetime. The lookup kernels are
/// bit-identical for any thread count.
class Model {
 public:
  /// Allocates the arenas: everything zero except LayerNorm gains (ln_f/g, h{l}/ln_1/g, ln_2/g) = 1
  /// (call init_weights for noise). Tensors in arena order, GPT-2's: wte, wpe, then for each block
  /// l in order h{l}/ln_1/g, ln_1/b, attn/c_attn/w, attn/c_attn/b, attn/c_proj/w, attn/c_proj/b,
  /// ln_2/g, ln_2/b, mlp/c_fc/w, mlp/c_fc/b, mlp/c_proj/w, mlp/c_proj/b, then ln_f/g, ln_f/b, then
  /// lm_head (V,C) if untied (docs/checkpoint.md). Throws wte::Error if a shape is 0 or, with
  /// n_layer > 0, if n_head is 0 or does not divide d_model.
  explicit Model(const ModelConfig& config);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  /// GPT-2 init: wte ~ N(0, wte_init_std²), wpe ~ N(0, wpe_init_std²), ln_f g = 1, b = 0, then an
  /// untied lm_head ~ N(0, wte_init_std²), then the blocks in arena order: every */w ~ N(0, 0.02²)
  /// except attn/c_proj/w and mlp/c_proj/w ~ N(0, (0.02/√(2·n_layer))²), biases 0, LayerNorm
  /// g = 1, b = 0; all drawn in that order from one wte::Rng(seed): identical on every machine and
  /// thread count (a model draws exactly what it drew before lm_head or the blocks existed).
  void init_weights(uint64_t seed);

  /// Training forward: fills activations, returns the mean loss over the B·T targets, and prepares
  /// backward(). The loss's gradient is divided by `loss_tokens` (0: B·T, the mean over this
  /// batch; gradient accumulation passes the token count of the whole batch, so the micro-batches'
  /// gradients sum to the gradient of its mean loss).
  /// The loss (src/model/unembedding.h, chosen by model.loss_chunk): unfused, the (B·T, V) logits
  /// are computed, then overwritten by dlogits for backward(); fused, the logits are never stored
  /// whole and the unembedding's gradients (dh' written; dwte or dlm_head added, as backward()
  /// adds) are formed here, in the same pass, so backward() starts below them.
  /// inputs, targets: (B,T) ids. Throws wte::Error before any compute if T > n_ctx, or if an input
  /// or target id is outside [0, vocab_size) (names the id, its position and vocab_size).
  float forward(const int32_t* inputs, const int32_t* targets, size_t B, size_t T,
                size_t loss_tokens = 0);

  /// Evaluation forward: the per-token losses (B·T) into `losses`, no gradient; with the fused
  /// loss no (B·T, V) buffer is used (forward_logits needs one). Same checks as forward().
  void forward_losses(const int32_t* inputs, const int32_t* targets, size_t B, size_t T,
                      float* losses);

  /// Gradients of the loss of the last forward() ADDED into grads() (+=, every parameter
  /// gradient; the activations' gradients are written): call zero_grad() before the step's first
  /// forward() (the fused loss adds its part of the gradient there), once per optimizer step;
  /// several forward/backward pairs in between accumulate (gradient accumulation: pass forward()
  /// the step's loss_tokens so the sum is the mean's gradient).
  /// Order: the unembedding's dh GEMM (writes the residual stream's gradient, or ln_f's input
  /// gradient), its dlm_head GEMM (adds into grads.wte when tied; the fused loss did both in
  /// forward()), the ln_f backward (writes the residual gradient, adds grads.ln_f), the blocks
  /// from last to first (add their gradients, update the residual gradient in place), the scatter
  /// adds into grads.wte (tied: and sums the squares of the finished blocks for the gradient norm,
  /// grad_norm_head()) or forms an untied wte's rows and merges them with the earlier passes',
  /// then dwpe is added.
  void backward();

  /// Zeroes the gradient: the dense arena (an untied wte's unused slot is left untouched), an
  /// untied wte's rows (wte_grad_rows() becomes empty) and the norm's block sums. The training
  /// loop calls it once per optimizer step, before the step's first forward() (not between a
  /// forward and its backward: the fused loss adds gradient in forward). A new model's gradient
  /// is zero already.
  void zero_grad();

  /// Inference forward: returns the logits (B,T,V), valid until the next call; if targets is not
  /// null, also writes the per-token losses (B·T) into `losses`. Same checks as forward(). Always
  /// the unfused path; under the fused loss its (B·T, V) buffer is allocated on the first call
  /// (outside the activation arena) and kept.
  const float* forward_logits(const int32_t* inputs, size_t B, size_t T,
                              const int32_t* targets = nullptr, float* losses = nullptr);

  /// Untied models: wte's gradient since zero_grad() as touched rows, the backward passes' rows
  /// merged (a row in several is their sum, in pass order), valid until the next backward or
  /// zero_grad. Tied models: count 0 (wte's gradient is dense in grads().wte).
  SparseRowGrad wte_grad_rows();

  /// Tied models: the gradient norm's sums of squares over the gradient arena's first blocks
  /// (kSumOfSquaresBlock floats each, every block wholly inside wte's gradient), which the last
  /// backward()'s scatter computed as it finished each block (embedding_backward_wte). The
  /// scatter is the last writer of dwte in a backward, so the sums are those of the whole
  /// gradient accumulated since zero_grad(), however many passes ran: give them to
  /// grad_norm(model, wte_rows, head) straight after the step's last backward(), and the norm
  /// reads only the rest of the gradient. One rule: the model empties them (count 0) whenever it
  /// writes the gradient otherwise (forward(), whose fused loss adds dwte, and zero_grad());
  /// anything outside the model that changes the gradient (a data-parallel reduce,
  /// clip_grad_norm) makes them stale, and the norm must then read the whole gradient. Empty for
  /// untied models.
  GradNormHead grad_norm_head() const;

  /// The precision the GEMMs' inputs have in this model: config().matmul_precision, except f32 when
  /// bf16 was asked for on a CPU where oneDNN has no native bf16 matmul (no AVX512_BF16 or AMX;
  /// gemm_precision_note() then says so).
  MatmulPrecision gemm_precision() const { return gemm_precision_; }
  /// One line for start-up output: the GEMMs' precision and oneDNN's kernel for it, e.g.
  /// "bf16 inputs, float32 accumulation (oneDNN brg:avx512_core_bf16)", or why bf16 fell back.
  std::string gemm_precision_note() const;
  /// Every oneDNN GEMM primitive created so far (after a forward/backward: all of a step's), with
  /// its kernel and the step part that runs it (include src/model/matmul.h to use them).
  std::vector<GemmKernel> gemm_kernels() const;

  /// Attach (or detach with nullptr) per-part timing of forward()/backward() (`wte profile step`):
  /// each part of a step then ends with a stream wait (parts do not overlap) and adds (+=) its
  /// seconds to `timer` under its name (src/model/part_timer.h); block parts sum over the layers.
  void set_part_timer(PartTimer* timer) { timer_ = timer; }

  /// hidden_states[0] = wte[x] + wpe[t] (B,T,C) of the last forward (= residual(0)).
  const float* hidden_states() const;

  /// The residual stream entering block l (B,T,C) of the last forward, for l in [0, n_layer]:
  /// residual(0) = wte[x] + wpe[t]; residual(n_layer) = after the last block, before ln_f.
  /// Throws wte::Error if l > n_layer.
  const float* residual(size_t l) const;

  /// What the unembedding read in the last forward (B,T,C): ln_f's output, or residual(n_layer)
  /// when ln_f is off. Hugging Face's hidden_states list is [residual(0), ..., residual(n_layer-1),
  /// final_hidden()].
  const float* final_hidden() const;

  /// The parameter tensor named `name` (e.g. "h0/attn/c_attn/w", see tensors()), or nullptr.
  /// Like every non-const access to the parameters (param_data(), params()), marks their bf16 copy
  /// stale (see params_bf16()).
  float* param(const std::string& name);
  const float* param(const std::string& name) const;

  /// Allocates the buffers of the memory plan (src/model/memory_plan.h, plan_memory with this
  /// shape) now rather than at the first forward: the activation arena for batches up to (B, T)
  /// (forward() grows it when needed) and, for an untied wte, the rows of `micro_batches`
  /// backward passes per zero_grad (grown when more run). Throws wte::Error if T > n_ctx or B or
  /// T is 0.
  void reserve(size_t B, size_t T, size_t micro_batches = 1);
  /// Bytes of every buffer the model holds, counted from the allocations themselves (as
  /// allocate_aligned hands them out, and the small vectors' capacities): after reserve(B, T, K)
  /// and any number of steps of that shape, exactly the model's share of
  /// plan_memory(config, {B, T, K}) (forward_logits's extra (N,V) buffer under the fused loss is
  /// not counted: training never makes it).
  size_t allocated_bytes() const;
  /// Bytes of the activation arena (one allocation: residual stream, every block's saved values,
  /// ln_f, the loss workspace, scratch), 0 before the first reserve/forward.
  size_t activation_bytes() const;
  /// Bytes of that arena that belong to the loss: the (N, V) logits of the unfused path, or the
  /// fused path's workspace (rows × V + 3·rows floats); under bf16 GEMMs also their bf16 part
  /// (dlogits' (N, V) copy, or one (rows, tile) dlogits tile); 0 before the first reserve/forward.
  size_t loss_workspace_bytes() const;
  /// Rows per block of the fused loss for the reserved batch (0: the unfused path).
  size_t loss_rows() const;

  const ModelConfig& config() const { return config_; }
  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  size_t num_parameters() const { return num_parameters_; }
  /// The parameter arena. The non-const accessors (param_data(), params(), param(name)) mark the
  /// parameters' bf16 copy stale: whoever asks for writable parameters is assumed to write them,
  /// so write through a pointer from a non-const access made after the last optimizer step.
  float* param_data() {
    params16_current_ = false;
    return params_memory_.get();
  }
  const float* param_data() const { return params_memory_.get(); }
  float* grad_data() { return grads_memory_.get(); }
  const float* grad_data() const { return grads_memory_.get(); }
  ParameterTensors& params() {
    params16_current_ = false;
    return params_;
  }
  const ParameterTensors& params() const { return params_; }

  /// Under bf16 GEMMs: the parameters' bf16 copy that the GEMMs read (same offsets as
  /// param_data(), convert_f32_to_bf16's bits), else nullptr. A forward converts the whole arena
  /// into it unless it is current: it is current after that conversion, or after
  /// mark_params_bf16_current(), until the next non-const access to the parameters. AdamW writes
  /// it as it updates the weights, so a training step makes no separate pass.
  uint16_t* params_bf16();
  /// True while params_bf16() holds the bits of the current parameters.
  bool params_bf16_current() const { return params16_current_; }
  /// Says that params_bf16() now holds convert_f32_to_bf16 of every parameter (the caller wrote
  /// it, after its last write to the parameters): the next forward skips the conversion.
  void mark_params_bf16_current() { params16_current_ = params_bf16() != nullptr; }
  ParameterTensors& grads() { return grads_; }
  const ParameterTensors& grads() const { return grads_; }

  struct Deleter {
    void operator()(float* p) const;
  };
  using Buffer = std::unique_ptr<float[], Deleter>;

 private:
  struct Impl;  // activations and oneDNN objects, hidden from callers
  void check_batch(const int32_t* inputs, const int32_t* targets, size_t B, size_t T) const;
  // Lookup, blocks and ln_f; returns h' (what the unembedding reads).
  const float* run_forward(const int32_t* inputs, size_t B, size_t T);
  // logits (N,V) = h' · lm_headᵀ (the unfused path and forward_logits).
  void logits_gemm(float* logits, const float* h, size_t N);
  const float* lm_head() const {
    return config_.tie_embeddings ? params_.wte : params_.lm_head;
  }

  ModelConfig config_;
  std::vector<TensorSpec> tensors_;
  size_t num_parameters_ = 0;
  Buffer params_memory_;
  Buffer grads_memory_;
  ParameterTensors params_{};
  ParameterTensors grads_{};
  std::unique_ptr<Impl> impl_;
  PartTimer* timer_ = nullptr;
  MatmulPrecision gemm_precision_ = MatmulPrecision::f32;
  bool params16_current_ = false;  // params_bf16() matches the parameters (see there)
};

/// Allocates n floats, 64-byte aligned, zeroed. Buffers of 4 MiB or more are 2 MiB aligned, rounded
/// up to whole 2 MiB pages and advised as transparent huge pages (madvise(MADV_HUGEPAGE)): no page
/// walks for random rows or for passes over large buffers.
/// Throws wte::Error if memory runs out.
Model::Buffer allocate_floats(size_t n);

}  // namespace wte
