// The memory plan: every buffer wte::Model and the training loop allocate, by name and bytes, from
// the model's config and the shape of one forward. It is the one description of the layout:
//  - wte::Model allocates from it: its activation arenas are laid out by lay_out_activations /
//    lay_out_activations16 below (the plan counts with the same functions), its other buffers
//    are sized by the same formulas (plan_memory's code names each one);
//  - the start-up memory check and report of `wte train` (train/run_directory.h,
//    estimate_training_memory) add the plan's buffers up by part.
// What lives outside the plan (the program and its libraries, the tokenizer, the token streams,
// oneDNN's own scratch and primitive objects) is measured by the training loop, not estimated here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/model/block.h"
#include "src/model/parameters.h"  // parameter_tensors
#include "src/model/unembedding.h"
#include "wte/config.h"

namespace wte {

/// The shape the plan is for.
struct PlanShape {
  size_t B = 0;              // sequences per forward (a micro-batch); 0 with T = 0: no activations
  size_t T = 0;              // tokens per sequence
  size_t micro_batches = 1;  // backward passes per Model::zero_grad (train.grad_accum_steps)
  bool adamw = true;         // AdamW's two moments (wte::AdamW)
  bool trainer = true;       // the training loop's batch buffers (one micro-batch's ids)
};

/// Who allocates a buffer.
enum class PlanOwner { kModel, kOptimizer, kTrainer };

/// One buffer (or one group of views inside an arena) of the plan.
struct PlannedBuffer {
  std::string name;     // "gradients", "activations: residual stream", ...
  std::string part;     // the memory report's part it counts in: "hidden states of one step", ...
  size_t bytes = 0;     // as allocated: views rounded to 64 bytes, allocations as allocate_aligned
                        // hands them out (src/model/memory.h: aligned_allocation_bytes)
  PlanOwner owner = PlanOwner::kModel;
};

/// The plan: buffers in allocation order.
struct MemoryPlan {
  std::vector<PlannedBuffer> buffers;
  /// Every buffer's bytes.
  size_t bytes() const;
  /// The bytes of one owner's buffers.
  size_t bytes(PlanOwner owner) const;
  /// The bytes of the buffers counted in `part` (0 if none).
  size_t part_bytes(const std::string& part) const;
  /// The parts in order of first appearance, with their bytes.
  std::vector<std::pair<std::string, size_t>> parts() const;
};

/// Whether a model of `config` runs bf16 GEMMs (and so allocates the bf16 copies):
/// model.matmul_precision = bf16 on a CPU with a native bf16 matmul (Model::gemm_precision).
bool plan_bf16_gemms(const ModelConfig& config);

/// The plan of a model of `config` (and, per `shape`, of its training loop). Throws nothing; the
/// config's shapes are checked by Model's constructor.
/// Parts (the report's names): "parameters", "gradients", "AdamW m and v", "logits of one step" or
/// "loss workspace (fused, R rows x vocab_size)", "hidden states of one step", "block activations
/// of one step", "wte gradient rows" (untied), "bf16 copy of the parameters" and "bf16 copies of
/// one step's GEMM inputs" (bf16 GEMMs), "allocation rounding" (64-byte alignment and whole 2 MiB
/// pages), "batch ids and lookup sort buffers".
MemoryPlan plan_memory(const ModelConfig& config, const PlanShape& shape);

/// Views of the float32 activation arena (every activation of one forward and backward of up to
/// N rows), set by lay_out_activations.
struct ActivationViews {
  std::vector<float*> residual;          // (n_layer+1) x (N,C)
  std::vector<BlockActivations> blocks;  // (n_layer)
  BlockScratch scratch{};
  float* ln_out = nullptr;     // (N,C) ln_f output
  float* ln_mean = nullptr;    // (N)   ln_f statistics: mean and 1/sqrt(var + eps), as the
  float* ln_rstd = nullptr;    //       blocks' ln_1 and ln_2 keep them (layernorm_forward)
  float* dln_out = nullptr;    // (N,C)
  float* dresidual = nullptr;  // (N,C)
  UnembeddingTiles loss_tiles;
  size_t loss_floats = 0;      // logits (N,V) or the fused workspace
  float* logits = nullptr;     // unfused loss
  float* loss_ws = nullptr;    // fused loss
  float* losses = nullptr;     // (N)
  float* wte_rows = nullptr;   // (N,C) untied: one backward's wte gradient rows
  // bf16 GEMMs (lay_out_activations16):
  uint16_t* h16 = nullptr;
  uint16_t* dresidual16 = nullptr;  // (N,C) dresidual's copy, read by each block's first GEMMs
  uint16_t* dlogits16 = nullptr;
  uint16_t* loss_ws16 = nullptr;
  size_t loss16_elems = 0;
};

/// Lays out the float32 activation arena for N rows and BTT = B·T·T attention entries per head
/// (0 when only the tiled attention runs: it keeps N log-sum-exps per head instead) into `v` (base == nullptr: only counts; the views are then null). Each view is rounded up to
/// 64 bytes. Returns the floats needed. `parts` (optional): each view's rounded bytes added to its
/// report part.
size_t lay_out_activations(float* base, size_t N, size_t BTT, const ModelConfig& c,
                           ActivationViews* v, std::map<std::string, size_t>* parts = nullptr);

/// The bf16 copies of the GEMM inputs (bf16 GEMMs only), laid out likewise into v (call after
/// lay_out_activations, which resets the blocks' views). Returns the bf16 elements needed.
size_t lay_out_activations16(uint16_t* base, size_t N, size_t BTT, const ModelConfig& c,
                             ActivationViews* v, std::map<std::string, size_t>* parts = nullptr);

/// Rows of an untied wte's gradient kept across `micro_batches` backward passes of N rows each:
/// min(micro_batches·N, vocab_size) (0 for micro_batches <= 1, when one backward's rows are kept
/// in the activation arena).
size_t accumulated_wte_rows(const ModelConfig& c, size_t N, size_t micro_batches);

}  // namespace wte
