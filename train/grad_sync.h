// Data-parallel gradient exchange for `wte train` under mpirun: after each rank's backward on its
// slice of the global batch, every rank holds the loss and gradient of the whole batch, bit for
// bit the same on every rank and in every run with the same rank and thread counts.
//
// Dense gradients (the arena, minus an untied wte's unused slot): a reduce-scatter written by hand
// (MPI_Alltoallv moves rank q's block k to rank k; rank k sums the R blocks in rank order with
// ordered_weighted_sum) followed by MPI_Allgatherv of the summed blocks. It moves the bytes of a
// ring allreduce, 2·(R-1)/R of the gradient per rank, but the summation order is ours (rank
// order), not the MPI library's: MPI_Allreduce's algorithm (and so its order for R >= 3) depends
// on Open MPI's tuning tables, the message size and the transport, which a user cannot see.
// The untied wte's row-sparse gradient: MPI_Allgatherv of the ranks' (ids, rows), merged in rank
// order on every rank (merge_sparse_rows); no rank ever holds a (V, C) gradient for it.
// Gradient clipping and AdamW then run on every rank on the same numbers (after the reduction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "wte/model.h"
#include "src/model/data_parallel.h"
#include "train/comm.h"

namespace wte {

class GradientSync {
 public:
  /// For a global batch of B samples over comm's ranks. Throws wte::Error if comm.size() > B.
  GradientSync(Comm& comm, size_t B);

  int ranks() const { return comm_.size(); }
  /// This rank's samples of every global batch.
  BatchSlice slice() const { return slice_; }

  /// After model.backward() on this rank's slice: replaces the model's dense gradients by the
  /// whole batch's and keeps the whole batch's sparse wte rows (see wte_rows); returns the whole
  /// batch's mean loss. One rank: returns local_loss and changes nothing.
  float reduce(Model& model, float local_loss);

  /// The whole batch's row-sparse wte gradient of the last reduce() (untied models), writable
  /// (clipping scales it); one rank: the model's own.
  SparseRowGrad wte_rows(Model& model);

  /// The dense exchange alone on n floats of g (in place; `wte profile comm`'s size sweep).
  void reduce_floats(float* g, size_t n) {
    bytes_sent_ = 0;
    if (comm_.size() > 1) reduce_dense(g, n);
  }

  /// Seconds spent in reduce() since construction (includes waiting for slower ranks), and bytes
  /// this rank sent in its last reduce().
  double seconds() const { return seconds_; }
  /// " x 2 ranks (data-parallel, Open MPI v4.1.4; 8 samples of each batch of 16 per rank)", or ""
  /// for one rank (the model line of `wte train`).
  std::string describe() const;
  /// Prints (stdout) the share of `step_seconds` (this rank's time in `steps` steps) spent in
  /// reduce(), per step, and the bytes sent per step. Nothing for one rank.
  void print_share(double step_seconds, size_t steps) const;
  size_t bytes_sent_last() const { return bytes_sent_; }

 private:
  void reduce_dense(float* g, size_t n);
  void reduce_sparse(const SparseRowGrad& local, size_t C);

  Comm& comm_;
  size_t B_;
  BatchSlice slice_;
  std::vector<float> w_;            // (R) rank weights n_r / B
  std::vector<float> recv_;         // (R · block) the R contributions to this rank's block
  std::vector<int32_t> ids_;        // merged sparse ids
  std::vector<float> rows_;         // merged sparse rows
  std::vector<int32_t> all_ids_;    // gathered ids of every rank
  std::vector<float> all_rows_;     // gathered rows of every rank
  bool have_rows_ = false;
  double seconds_ = 0;
  size_t bytes_sent_ = 0;
};

}  // namespace wte
