// Data-parallel optimizer step for `wte train` under mpirun, ZeRO-1 style (Rajbhandari et al.
// 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", stage 1: the
// optimizer's work partitioned over the ranks): after each rank's backward on its slice of the
// global batch,
//   1. reduce_scatter: rank k receives block k of every rank's dense gradient (MPI_Alltoallv) and
//      sums the R contributions in rank order (ordered_weighted_sum; its own in place, never
//      copied): rank k then holds block k of the whole batch's gradient. The untied wte's
//      row-sparse gradient: MPI_Allgatherv of the ranks' (ids, rows), merged in rank order on every
//      rank (merge_sparse_rows); no rank ever holds a (V, C) gradient for it.
//   2. grad_norm: each rank's squared-norm partial sums of its block (blocks of kSumOfSquaresBlock floats:
//      split_blocks aligns every rank's block to them) are gathered to every rank and added in
//      block order, plus the merged sparse rows' sum: the global norm, bit for bit what
//      wte::grad_norm computes on the whole reduced gradient in one process.
//   3. update: AdamW on the rank's block only (AdamW::update_part; the sparse rows on every rank,
//      lazily, as one process would), reading every gradient times the clipping factor
//      (clip_scale of the norm: no pass rescales the gradients), then MPI_Allgatherv of the
//      updated parameter blocks.
// The bytes are those of an allreduce of the gradient (a reduce-scatter, then an all-gather, of
// parameters instead of gradients), 2·(R-1)/R of the arena per rank; clip and AdamW cost 1/R of a
// replicated step. Every number on every rank is bit for bit what the replicated scheme (all
// ranks reduce the whole gradient, clip and update everything) gives, because every element goes
// through the same operations in the same order; the summation order is ours (rank order), never
// the MPI library's or the network's (MPI_Allreduce's algorithm, and so its order for R >= 3,
// depends on Open MPI's tuning tables, the message size and the transport).
// AdamW's m and v are complete only in each rank's block; gather_optimizer_state() completes them
// before a checkpoint is written, so a checkpoint is the one a single process writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "wte/config.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "train/distributed/data_parallel.h"
#include "train/distributed/comm.h"

namespace wte {

class GradientSync {
 public:
  /// For a global batch of B samples over comm's ranks. Throws wte::Error if comm.size() > B.
  GradientSync(Comm& comm, size_t B);

  int ranks() const { return comm_.size(); }
  /// This rank's samples of every global batch.
  BatchSlice slice() const { return slice_; }

  /// Step 1, after model.backward() on this rank's slice (2 or more ranks): this rank's block of
  /// the dense gradient becomes the whole batch's (the rest of the gradient arena is stale) and
  /// the whole batch's sparse wte rows are kept (wte_rows); returns the whole batch's mean loss
  /// Σ_r w_r·L_r (rank order, in double, rounded once).
  /// `local_rows`: this rank's row-sparse wte gradient when it is not the model's own;
  /// nullptr: model.wte_grad_rows() (with gradient accumulation, the micro-batches' rows merged).
  float reduce_scatter(Model& model, float local_loss, const SparseRowGrad* local_rows = nullptr);
  /// Step 2: the whole batch's gradient norm (before clipping; the same on every rank, and bit for
  /// bit wte::grad_norm of the whole reduced gradient in one process). Reads this rank's block
  /// and the sparse rows; writes no gradient.
  double grad_norm(Model& model);
  /// Step 3: optimizer.update_part on this rank's block and the sparse rows with every gradient
  /// read as g * grad_scale (the clipping factor, wte::clip_scale of grad_norm()), then every
  /// rank's updated parameters to every rank (all_gather_params).
  void update(Model& model, AdamW& optimizer, float lr, const OptimConfig& hp,
              float grad_scale = 1.0f);
  /// The parameter all-gather of update() alone (`wte profile comm` times it).
  void all_gather_params(Model& model);
  /// Completes AdamW's m and v on every rank (each rank's block to all): call on every rank before
  /// rank 0 writes a checkpoint. Nothing for one rank.
  void gather_optimizer_state(AdamW& optimizer);

  /// The whole batch's row-sparse wte gradient of the last reduce_scatter() (untied models).
  SparseRowGrad wte_rows(Model& model);

  /// A reduce-scatter + all-gather of n floats of g in place, as training does (`wte profile
  /// comm`'s size sweep). One rank: nothing.
  void reduce_floats(float* g, size_t n);

  /// Seconds spent in communication (MPI calls, waiting for slower ranks included) since
  /// construction, and bytes this rank sent in its last step.
  double seconds() const { return t_.comm(); }
  size_t bytes_sent_last() const { return bytes_sent_; }
  /// " (data-parallel, ZeRO-1, Open MPI v4.1.4; 8 samples of each batch of 16 per rank)", or
  /// "" for one rank (the model line of `wte train`, after "2 ranks x 1 thread").
  std::string describe() const;
  /// Prints (stdout) the share of `step_seconds` (this rank's time in `steps` steps) spent in
  /// communication, per step and split by phase, the bytes sent per step, and the time of the
  /// rank-order sum and of this rank's clip + AdamW; then each rank's split of its step time.
  /// Collective (an all-gather of the ranks' times): every rank calls it. Nothing for one rank.
  void print_share(double step_seconds, size_t steps) const;

 private:
  // The dense gradient's split for an arena of n floats from dense_begin (split_blocks, aligned to
  // kSumOfSquaresBlock); cached: it changes only with the model.
  void layout(size_t dense_begin, size_t n);
  void reduce_scatter_dense(float* g, size_t n, const std::vector<size_t>& counts,
                            const std::vector<size_t>& displs);

  struct Times {  // seconds, summed over steps
    double reduce_scatter = 0, all_gather = 0, sparse = 0, small = 0;  // MPI
    double sum = 0, optimizer = 0;                                     // compute
    double comm() const { return reduce_scatter + all_gather + sparse + small; }
  };

  Comm& comm_;
  size_t B_;
  BatchSlice slice_;
  std::vector<float> w_;            // (R) rank weights n_r / B
  size_t dense_begin_ = 0, n_ = 0;  // the laid-out arena: dense floats [dense_begin_, n_)
  std::vector<size_t> counts_, displs_;  // (R) each rank's block, relative to dense_begin_
  std::vector<float> recv_;         // the other ranks' contributions to this rank's block
  std::vector<int32_t> ids_;        // merged sparse ids
  std::vector<float> rows_;         // merged sparse rows
  std::vector<int32_t> all_ids_;    // gathered ids of every rank
  std::vector<float> all_rows_;     // gathered rows of every rank
  bool have_rows_ = false;
  Times t_;
  size_t bytes_sent_ = 0;
};

}  // namespace wte
