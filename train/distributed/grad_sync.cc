#include "train/distributed/grad_sync.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "src/profile/clock.h"
#include "wte/error.h"

namespace wte {
namespace {

// Σ partials in order from 0.0: clip_grad_norm's combination of its block sums.
double sum_in_order(const std::vector<double>& partials) {
  double total = 0.0;
  for (double s : partials) total += s;
  return total;
}

size_t norm_blocks(size_t n) { return (n + kSumOfSquaresBlock - 1) / kSumOfSquaresBlock; }

// Where the untied wte's unused slot ends: the dense gradient is the arena from here on.
size_t dense_begin_of(const Model& model) {
  const TensorSpec& first = model.tensors().front();
  return first.sparse_grad ? first.offset + first.size : 0;
}

}  // namespace

GradientSync::GradientSync(Comm& comm, size_t B)
    : comm_(comm), B_(B), slice_(batch_slice(B, comm.rank(), comm.size())),
      w_(rank_weights(B, comm.size())) {}

void GradientSync::layout(size_t dense_begin, size_t n) {
  if (dense_begin == dense_begin_ && n == n_ && !counts_.empty()) return;
  dense_begin_ = dense_begin;
  n_ = n;
  split_blocks(n - dense_begin, comm_.size(), kSumOfSquaresBlock, &counts_, &displs_);
}

float GradientSync::reduce_scatter(Model& model, float local_loss,
                                   const SparseRowGrad* local_rows) {
  have_rows_ = false;
  bytes_sent_ = 0;
  const size_t R = static_cast<size_t>(comm_.size());
  // The loss and the sparse row count in one small message.
  struct Small {
    float loss;
    uint32_t pad;
    uint64_t sparse_count;
  };
  const SparseRowGrad local = local_rows != nullptr ? *local_rows : model.wte_grad_rows();
  const Small mine{local_loss, 0, local.count};
  std::vector<Small> all(R);
  auto t0 = Clock::now();
  comm_.allgather(&mine, sizeof mine, all.data());
  t_.small += seconds_since(t0);
  double loss = 0.0;  // Σ_r w_r·L_r in rank order, in double, rounded once
  for (size_t r = 0; r < R; ++r) loss += static_cast<double>(w_[r]) * all[r].loss;

  layout(dense_begin_of(model), model.num_parameters());
  reduce_scatter_dense(model.grad_data() + dense_begin_, n_ - dense_begin_, counts_, displs_);
  if (model.tensors().front().sparse_grad) {
    std::vector<size_t> counts(R);
    for (size_t r = 0; r < R; ++r) counts[r] = static_cast<size_t>(all[r].sparse_count);
    t0 = Clock::now();
    const size_t C = model.config().d_model;
    std::vector<size_t> row_counts(R);
    size_t total = 0;
    for (size_t r = 0; r < R; ++r) row_counts[r] = counts[r] * C, total += counts[r];
    all_ids_.resize(total);
    all_rows_.resize(total * C);
    comm_.allgatherv(local.ids, all_ids_.data(), counts, sizeof(int32_t));
    comm_.allgatherv(local.rows, all_rows_.data(), row_counts, sizeof(float));
    t_.sparse += seconds_since(t0);
    t0 = Clock::now();
    merge_sparse_rows(all_ids_.data(), all_rows_.data(), counts, C, w_, &ids_, &rows_);
    t_.sum += seconds_since(t0);
    bytes_sent_ += (R - 1) * local.count * (C * sizeof(float) + sizeof(int32_t));
    have_rows_ = true;
  }
  return static_cast<float>(loss);
}

void GradientSync::reduce_scatter_dense(float* g, size_t n, const std::vector<size_t>& counts,
                                        const std::vector<size_t>& displs) {
  const size_t R = static_cast<size_t>(comm_.size()), me = static_cast<size_t>(comm_.rank());
  const size_t mine = counts[me];
  // Rank q's contribution to this rank's block lands in slot q (q < me) or q - 1 (q > me) of
  // recv_; this rank's own contribution stays where it is (no message to itself).
  recv_.resize((R - 1) * mine);
  std::vector<size_t> send_counts(counts), recv_counts(R, mine), recv_displs(R, 0);
  send_counts[me] = 0;
  recv_counts[me] = 0;
  std::vector<const float*> parts(R);
  for (size_t q = 0; q < R; ++q) {
    const size_t slot = q < me ? q : q - 1;
    if (q != me) recv_displs[q] = slot * mine;
    parts[q] = q == me ? g + displs[me] : recv_.data() + slot * mine;
  }
  auto t0 = Clock::now();
  comm_.alltoallv(g, send_counts, displs, recv_.data(), recv_counts, recv_displs);
  t_.reduce_scatter += seconds_since(t0);
  t0 = Clock::now();
  ordered_weighted_sum(g + displs[me], parts, mine, w_);  // in place on this rank's block
  t_.sum += seconds_since(t0);
  bytes_sent_ += (n - mine) * sizeof(float);
}

double GradientSync::grad_norm(Model& model) {
  const size_t R = static_cast<size_t>(comm_.size()), me = static_cast<size_t>(comm_.rank());
  float* block = model.grad_data() + dense_begin_ + displs_[me];
  auto t0 = Clock::now();
  // This rank's squared-norm partial sums; every rank's, in rank order, are the dense gradient's
  // in block order (the blocks start at multiples of kSumOfSquaresBlock).
  std::vector<double> mine(norm_blocks(counts_[me]));
  squared_norm_partials(block, counts_[me], mine.data());
  t_.optimizer += seconds_since(t0);
  std::vector<size_t> partial_counts(R);
  size_t total_blocks = 0;
  for (size_t r = 0; r < R; ++r) partial_counts[r] = norm_blocks(counts_[r]), total_blocks += partial_counts[r];
  std::vector<double> partials(total_blocks);
  t0 = Clock::now();
  comm_.allgatherv(mine.data(), partials.data(), partial_counts, sizeof(double));
  t_.small += seconds_since(t0);
  t0 = Clock::now();
  double total = sum_in_order(partials);
  const SparseRowGrad sparse = wte_rows(model);
  if (sparse.count > 0) {
    std::vector<double> sp(norm_blocks(sparse.count * sparse.C));
    squared_norm_partials(sparse.rows, sparse.count * sparse.C, sp.data());
    total += sum_in_order(sp);
  }
  t_.optimizer += seconds_since(t0);
  return std::sqrt(total);
}

void GradientSync::update(Model& model, AdamW& optimizer, float lr, const OptimConfig& hp,
                          float grad_scale) {
  const size_t me = static_cast<size_t>(comm_.rank());
  const size_t begin = dense_begin_ + displs_[me];
  const auto t0 = Clock::now();
  optimizer.update_part(model, lr, hp, begin, begin + counts_[me], wte_rows(model),
                        grad_scale);
  t_.optimizer += seconds_since(t0);
  all_gather_params(model);
}

void GradientSync::all_gather_params(Model& model) {
  layout(dense_begin_of(model), model.num_parameters());
  const auto t0 = Clock::now();
  comm_.allgatherv_inplace(model.param_data() + dense_begin_, counts_, displs_);
  t_.all_gather += seconds_since(t0);
  bytes_sent_ += (n_ - dense_begin_ - counts_[static_cast<size_t>(comm_.rank())]) * sizeof(float);
}

void GradientSync::gather_optimizer_state(AdamW& optimizer) {
  if (comm_.size() == 1 || counts_.empty()) return;
  comm_.allgatherv_inplace(optimizer.m() + dense_begin_, counts_, displs_);
  comm_.allgatherv_inplace(optimizer.v() + dense_begin_, counts_, displs_);
}

void GradientSync::reduce_floats(float* g, size_t n) {
  bytes_sent_ = 0;
  if (comm_.size() == 1) return;
  std::vector<size_t> counts, displs;
  split_blocks(n, comm_.size(), 1, &counts, &displs);
  reduce_scatter_dense(g, n, counts, displs);
  const auto t0 = Clock::now();
  comm_.allgatherv_inplace(g, counts, displs);
  t_.all_gather += seconds_since(t0);
  bytes_sent_ += (n - counts[static_cast<size_t>(comm_.rank())]) * sizeof(float);
}

std::string GradientSync::describe() const {
  if (comm_.size() == 1) return "";
  const size_t R = static_cast<size_t>(comm_.size());
  char buf[256];
  std::snprintf(buf, sizeof buf,
                " (data-parallel, ZeRO-1, %s; %zu%s samples of each batch of %zu per rank)",
                comm_.describe().c_str(), batch_slice(B_, 0, comm_.size()).count,
                B_ % R ? " or fewer" : "", B_);
  return buf;
}

void GradientSync::print_share(double step_seconds, size_t steps) const {
  if (comm_.size() == 1 || steps == 0 || step_seconds <= 0) return;
  // Every rank's times (collective: every rank calls this at the end of the run).
  const double mine[8] = {step_seconds,  t_.comm(),       t_.reduce_scatter, t_.all_gather,
                          t_.sparse,     t_.small,        t_.sum,            t_.optimizer};
  const size_t R = static_cast<size_t>(comm_.size());
  std::vector<double> all(8 * R);
  comm_.allgather(mine, sizeof mine, all.data());
  const double per = 1e3 / static_cast<double>(steps);
  std::printf("communication: %.3f s of %.3f s step time (%.1f%%), %.2f ms per step (reduce-scatter "
              "%.2f, all-gather %.2f, sparse rows %.2f, loss and norm %.2f; waiting for the other "
              "ranks included), %.2f MB sent per step by each rank; rank-order sum %.2f ms, clip + "
              "AdamW on this rank's 1/%d %.2f ms per step\n",
              t_.comm(), step_seconds, 100.0 * t_.comm() / step_seconds, t_.comm() * per,
              t_.reduce_scatter * per, t_.all_gather * per, t_.sparse * per, t_.small * per,
              static_cast<double>(bytes_sent_) / 1e6, t_.sum * per, comm_.size(),
              t_.optimizer * per);
  for (size_t r = 0; r < R; ++r) {
    const double* a = all.data() + 8 * r;
    std::printf("  rank %zu: step %.2f ms = communication %.2f (reduce-scatter %.2f, all-gather "
                "%.2f, sparse %.2f, small %.2f) + sum %.2f + clip and AdamW %.2f + forward, "
                "backward and the rest %.2f ms\n",
                r, a[0] * per, a[1] * per, a[2] * per, a[3] * per, a[4] * per, a[5] * per,
                a[6] * per, a[7] * per, (a[0] - a[1] - a[6] - a[7]) * per);
  }
}

SparseRowGrad GradientSync::wte_rows(Model& model) {
  if (!have_rows_) return model.wte_grad_rows();
  return sparse_row_grad_view(rows_, ids_, model.config().d_model);
}

}  // namespace wte
