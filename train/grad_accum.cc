// Gradient accumulation: see train/grad_accum.h.
#include "train/grad_accum.h"

#include <string>

#include "train/distributed/data_parallel.h"
#include "wte/error.h"

namespace wte {

GradAccumulator::GradAccumulator(const Model& model, size_t micro_batches) : K_(micro_batches) {
  if (K_ == 0) throw Error("GradAccumulator: train.grad_accum_steps must be at least 1");
  if (K_ > 1) acc_.assign(model.num_parameters(), 0.0f);
}

void GradAccumulator::add(Model& model, bool first, bool last) {
  if (K_ == 1) return;
  float* g = model.grad_data();
  float* acc = acc_.data();
  const long n = static_cast<long>(acc_.size());
  if (first) {
    merged_ = false;
    all_ids_.clear();
    all_rows_.clear();
    counts_.clear();
  }
  if (last) {  // the arena becomes g_last + (g_0 + ... )
    if (!first) {
#pragma omp parallel for schedule(static)
      for (long i = 0; i < n; ++i) g[i] += acc[i];
    }
  } else if (first) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) acc[i] = g[i];
  } else {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) acc[i] += g[i];
  }
  if (!model.config().tie_embeddings) {
    const SparseRowGrad r = model.wte_grad_rows();
    all_ids_.insert(all_ids_.end(), r.ids, r.ids + r.count);
    all_rows_.insert(all_rows_.end(), r.rows, r.rows + r.count * r.C);
    counts_.push_back(r.count);
    if (last) {
      merge_sparse_rows(all_ids_.data(), all_rows_.data(), counts_, r.C,
                        std::vector<float>(counts_.size(), 1.0f), &ids_, &rows_);
      merged_ = true;
    }
  }
}

SparseRowGrad GradAccumulator::wte_rows(Model& model) {
  if (!merged_) return model.wte_grad_rows();
  return sparse_row_grad_view(rows_, ids_, model.config().d_model);
}

}  // namespace wte
