#include "train/distributed/data_parallel.h"

#include <algorithm>
#include <cstring>

#include "wte/error.h"

namespace wte {

BatchSlice batch_slice(size_t B, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw Error("rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
                " ranks is not a rank of the job");
  const size_t R = static_cast<size_t>(ranks), r = static_cast<size_t>(rank);
  if (R > B)
    throw Error("train.batch_size = " + std::to_string(B) + " is smaller than the number of ranks (" +
                std::to_string(R) + "): every rank needs at least one sample of each batch; "
                "use at most " + std::to_string(B) + " ranks or a larger train.batch_size");
  const size_t base = B / R, extra = B % R;
  BatchSlice s;
  s.count = base + (r < extra ? 1 : 0);
  s.first = r * base + std::min(r, extra);
  return s;
}

std::vector<float> rank_weights(size_t B, int ranks) {
  std::vector<float> w(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    w[static_cast<size_t>(r)] =
        static_cast<float>(static_cast<double>(batch_slice(B, r, ranks).count) /
                           static_cast<double>(B));
  return w;
}

void ordered_weighted_sum(float* out, const float* parts, size_t stride, size_t n,
                          const std::vector<float>& w) {
  std::vector<const float*> p(w.size());
  for (size_t r = 0; r < w.size(); ++r) p[r] = parts + r * stride;
  ordered_weighted_sum(out, p, n, w);
}

void ordered_weighted_sum(float* out, const std::vector<const float*>& parts, size_t n,
                          const std::vector<float>& w) {
  const size_t R = w.size();
  if (parts.size() != R)
    throw Error("ordered_weighted_sum: " + std::to_string(parts.size()) + " parts but " +
                std::to_string(R) + " weights");
  if (R == 2) {  // the common case, without the inner loop (same operations, same order)
    const float *p0 = parts[0], *p1 = parts[1];
    const float w0 = w[0], w1 = w[1];
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) {
      const float a = w0 * p0[i], b = w1 * p1[i];
      out[i] = a + b;
    }
    return;
  }
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    float acc = w[0] * parts[0][i];
    for (size_t r = 1; r < R; ++r) acc += w[r] * parts[r][i];
    out[i] = acc;
  }
}

void split_blocks(size_t n, int ranks, size_t align, std::vector<size_t>* counts,
                  std::vector<size_t>* displs) {
  if (ranks < 1 || align == 0)
    throw Error("split_blocks: " + std::to_string(ranks) + " ranks, unit of " +
                std::to_string(align) + " floats: need ranks >= 1 and a unit >= 1");
  const size_t R = static_cast<size_t>(ranks);
  const size_t units = (n + align - 1) / align, base = units / R, extra = units % R;
  counts->assign(R, 0);
  displs->assign(R, 0);
  size_t at = 0;  // in units
  for (size_t r = 0; r < R; ++r) {
    const size_t u = base + (r < extra ? 1 : 0);
    (*displs)[r] = std::min(n, at * align);
    (*counts)[r] = std::min(n, (at + u) * align) - (*displs)[r];
    at += u;
  }
}

void merge_sparse_rows(const int32_t* all_ids, const float* all_rows,
                       const std::vector<size_t>& counts, size_t C, const std::vector<float>& w,
                       std::vector<int32_t>* ids, std::vector<float>* rows) {
  const size_t R = counts.size();
  std::vector<size_t> start(R + 1, 0);
  for (size_t r = 0; r < R; ++r) start[r + 1] = start[r] + counts[r];
  for (size_t r = 0; r < R; ++r)
    for (size_t k = start[r] + 1; k < start[r + 1]; ++k)
      if (all_ids[k] <= all_ids[k - 1])
        throw Error("rank " + std::to_string(r) + "'s sparse gradient ids are not increasing (" +
                    std::to_string(all_ids[k - 1]) + " then " + std::to_string(all_ids[k]) + ")");
  ids->assign(all_ids, all_ids + start[R]);
  std::sort(ids->begin(), ids->end());
  ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  rows->assign(ids->size() * C, 0.0f);
  for (size_t r = 0; r < R; ++r) {  // rank order: every output row sums its ranks r = 0, 1, ...
    const float wr = w[r];
    const long n = static_cast<long>(counts[r]);
#pragma omp parallel for schedule(static)
    for (long k = 0; k < n; ++k) {
      const size_t g = start[r] + static_cast<size_t>(k);
      const size_t u = static_cast<size_t>(
          std::lower_bound(ids->begin(), ids->end(), all_ids[g]) - ids->begin());
      float* dst = rows->data() + u * C;
      const float* src = all_rows + g * C;
      for (size_t c = 0; c < C; ++c) dst[c] += wr * src[c];
    }
  }
}

}  // namespace wte
