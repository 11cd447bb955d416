// `wte profile comm`: what data-parallel training costs in communication, measured on this machine
// and projected to R machines on a network.
//
// Under mpirun (2 or more ranks) profile_comm measures, for a config:
//   * the compute of one training step of the whole global batch on rank 0 (forward + backward,
//     then clip + AdamW), with train.threads threads, while the other ranks sleep in a barrier;
//   * the exchange train/distributed/grad_sync.h does per step (the dense gradient's reduce-scatter
//     with its rank-order sum, the updated parameters' all-gather, the untied wte's (ids, rows)),
//     median of `repeat`, and a sweep of dense sizes from 256 floats up for this transport's
//     latency (the smallest size) and bandwidth (bytes each rank sends / time, at the largest size);
// then projected_step projects the step time of R machines like this one over a network of B
// Gbit/s with latency a µs per message, keeping the global batch fixed (strong scaling, as
// `wte train` under mpirun):
//   t(R) = t_fwd_bwd / R + t_optimizer / R + t_comm(R)   (ZeRO-1: each rank clips and updates
//                                                        1/R of the parameters),
//   t_comm(R) = 2(R-1)·(a + (D/R)·4 / bw) + (R-1)·(a + S/R·(4C + 4) / bw),
// with D dense gradient floats, S sparse rows of the whole batch (about S/R per rank), bw the link
// in bytes/s: each rank sends 2(R-1)/R of the dense gradient in 2(R-1) steps (a ring
// reduce-scatter and all-gather, the bandwidth-optimal schedule; wte's MPI_Alltoallv /
// MPI_Allgatherv move the same bytes; the all-gather sends updated parameters instead of summed
// gradients). Speed-up = t(1) / t(R) with t(1) = t_fwd_bwd + t_optimizer; efficiency = speed-up / R.
#pragma once

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "wte/config.h"
#include "wte/model.h"

namespace wte::profile {

/// The ranks of a data-parallel job, as profile_comm uses them. The `wte` tool implements it over
/// train/distributed's Comm and GradientSync (wte_core links no MPI). Every collective is called
/// by all ranks in the same order.
class RankExchange {
 public:
  virtual ~RankExchange() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() = 0;
  /// A barrier that waits in sleeps, leaving the core to the ranks still working.
  virtual void barrier_sleeping() = 0;
  /// recv (size() · bytes) = every rank's `bytes` bytes of send, in rank order.
  virtual void allgather(const void* send, size_t bytes, void* recv) = 0;
  /// Prepares training's gradient exchange for a global batch of B samples; returns this rank's
  /// samples {first, count}. Throws wte::Error if there are more ranks than samples.
  virtual std::pair<size_t, size_t> start_exchange(size_t B) = 0;
  /// One step's exchange after model.backward() on this rank's samples: the gradient's
  /// reduce-scatter (with the rank-order sum), then the parameters' all-gather (no clip, no AdamW).
  virtual void exchange_step(Model& model) = 0;
  /// A reduce-scatter + all-gather of n floats of g in place, as training does.
  virtual void reduce_floats(float* g, size_t n) = 0;
  /// Bytes this rank sent in the last exchange_step or reduce_floats.
  virtual size_t bytes_sent_last() const = 0;
};

/// One size of the dense sweep.
struct SweepPoint {
  size_t floats = 0;   // floats reduced and gathered
  double seconds = 0;  // median
  size_t sent = 0;     // bytes this rank sent
};

/// profile_comm's measurements (the same on every rank).
struct CommProfile {
  size_t parameters = 0;         // of the config's model
  double forward_backward_s = 0; // rank 0, the whole global batch, median
  double optimizer_s = 0;        // clip + AdamW on rank 0, median
  size_t sparse_rows = 0;        // the untied wte's touched rows in the whole batch
  bool sparse = false;           // wte's gradient is row-sparse (untied)
  double exchange_s = 0;         // the step's whole exchange on every rank's slice, median
  size_t bytes_sent = 0;         // by this rank in that exchange
  size_t dense = 0;              // dense gradient floats
  std::vector<SweepPoint> sweep; // 256, 1024, ... floats up to `dense`
};

/// Measures `config` as the header comment says, each time the median of `repeat` runs after one
/// untimed run (oneDNN's primitives are built then). Sets the OpenMP thread count to train.threads
/// (when > 0). Calls `on_model` (may be empty) with the model's parameter count once the model is
/// built, before anything is timed. Every rank calls it (it is collective).
/// Throws wte::Error as Model does, or as ranks.start_exchange does.
CommProfile profile_comm(const Config& config, size_t repeat, RankExchange& ranks,
                         const std::function<void(size_t parameters)>& on_model = {});

/// A network to project to: link rate and per-message latency.
struct Network {
  double gbits = 0;       // Gbit/s
  double latency_us = 0;  // µs per message
};

/// The projected step of R machines like this one on `net` (the header comment's formula), the
/// global batch of `p` fixed: t_comm(R) (0 for R = 1) and the step time t(R), in seconds.
struct ProjectedStep {
  double comm_s = 0;
  double step_s = 0;
};
ProjectedStep projected_step(const CommProfile& p, size_t C, size_t R, const Network& net);

}  // namespace wte::profile
