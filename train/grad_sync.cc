#include "train/grad_sync.h"

#include <chrono>
#include <cstdio>

#include "wte/error.h"

namespace wte {

GradientSync::GradientSync(Comm& comm, size_t B)
    : comm_(comm), B_(B), slice_(batch_slice(B, comm.rank(), comm.size())),
      w_(rank_weights(B, comm.size())) {}

float GradientSync::reduce(Model& model, float local_loss) {
  have_rows_ = false;
  bytes_sent_ = 0;
  if (comm_.size() == 1) return local_loss;
  const auto t0 = std::chrono::steady_clock::now();
  const size_t R = static_cast<size_t>(comm_.size());
  // The loss: Σ_r w_r·L_r in rank order, in double, rounded once.
  std::vector<float> losses(R);
  comm_.allgather(&local_loss, sizeof(float), losses.data());
  double loss = 0.0;
  for (size_t r = 0; r < R; ++r) loss += static_cast<double>(w_[r]) * losses[r];
  // Dense: the arena minus an untied wte's slot (tensor 0, unused: its gradient is sparse).
  const TensorSpec& first = model.tensors().front();
  const size_t dense_begin = first.sparse_grad ? first.offset + first.size : 0;
  reduce_dense(model.grad_data() + dense_begin, model.num_parameters() - dense_begin);
  if (first.sparse_grad) {
    reduce_sparse(model.wte_grad_rows(), model.config().d_model);
    have_rows_ = true;
  }
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<float>(loss);
}

void GradientSync::reduce_dense(float* g, size_t n) {
  const size_t R = static_cast<size_t>(comm_.size()), me = static_cast<size_t>(comm_.rank());
  // Block k = floats [k·block, min(n, (k+1)·block)) is summed by rank k.
  const size_t block = (n + R - 1) / R;
  std::vector<size_t> counts(R), displs(R);
  for (size_t k = 0; k < R; ++k) {
    displs[k] = std::min(n, k * block);
    counts[k] = std::min(n, (k + 1) * block) - displs[k];
  }
  const size_t mine = counts[me];
  recv_.resize(R * block);
  std::vector<size_t> recv_counts(R, mine), recv_displs(R);
  for (size_t q = 0; q < R; ++q) recv_displs[q] = q * block;
  comm_.alltoallv(g, counts, displs, recv_.data(), recv_counts, recv_displs);
  ordered_weighted_sum(g + displs[me], recv_.data(), block, mine, w_);
  comm_.allgatherv_inplace(g, counts, displs);
  bytes_sent_ += 2 * (n - mine) * sizeof(float);
}

void GradientSync::reduce_sparse(const SparseRowGrad& local, size_t C) {
  const size_t R = static_cast<size_t>(comm_.size());
  const uint64_t my_count = local.count;
  std::vector<uint64_t> counts64(R);
  comm_.allgather(&my_count, sizeof my_count, counts64.data());
  std::vector<size_t> counts(R), row_counts(R);
  size_t total = 0;
  for (size_t r = 0; r < R; ++r) {
    counts[r] = static_cast<size_t>(counts64[r]);
    row_counts[r] = counts[r] * C;
    total += counts[r];
  }
  all_ids_.resize(total);
  all_rows_.resize(total * C);
  comm_.allgatherv(local.ids, all_ids_.data(), counts, sizeof(int32_t));
  comm_.allgatherv(local.rows, all_rows_.data(), row_counts, sizeof(float));
  merge_sparse_rows(all_ids_.data(), all_rows_.data(), counts, C, w_, &ids_, &rows_);
  bytes_sent_ += (R - 1) * local.count * (C * sizeof(float) + sizeof(int32_t));
}

std::string GradientSync::describe() const {
  if (comm_.size() == 1) return "";
  const size_t R = static_cast<size_t>(comm_.size());
  char buf[256];
  std::snprintf(buf, sizeof buf,
                " x %zu ranks (data-parallel, %s; %zu%s samples of each batch of %zu per rank)", R,
                comm_.describe().c_str(), batch_slice(B_, 0, comm_.size()).count,
                B_ % R ? " or fewer" : "", B_);
  return buf;
}

void GradientSync::print_share(double step_seconds, size_t steps) const {
  if (comm_.size() == 1 || steps == 0 || step_seconds <= 0) return;
  std::printf("communication: %.3f s of %.3f s step time (%.1f%%), %.2f ms per step, %.2f MB sent "
              "per step by each rank\n",
              seconds_, step_seconds, 100.0 * seconds_ / step_seconds,
              1e3 * seconds_ / static_cast<double>(steps),
              static_cast<double>(bytes_sent_) / 1e6);
}

SparseRowGrad GradientSync::wte_rows(Model& model) {
  if (!have_rows_) return model.wte_grad_rows();
  SparseRowGrad g;
  g.rows = rows_.data();
  g.ids = ids_.data();
  g.count = ids_.size();
  g.C = model.config().d_model;
  return g;
}

}  // namespace wte
