// The arithmetic of data-parallel training, without any communication (train/distributed/grad_sync.h moves
// the bytes with MPI): which samples of a global batch a rank takes, and the fixed-order sums that
// make the ranks' gradients the gradient of the whole batch.
//
// Each rank r of R takes a contiguous slice of n_r samples of the global batch of B samples (B·T
// target tokens); its Model::forward gives the mean loss over its n_r·T targets and a gradient
// already divided by n_r·T. The whole batch's loss and gradient, the mean over all B·T targets,
// are then  L = Σ_r w_r·L_r,  g = Σ_r w_r·g_r  with  w_r = n_r / B  (exact: Σ_r n_r·T·L_r / (B·T)).
// Sums run over r = 0, 1, ..., R-1 in that order, so the bits depend only on R and the inputs,
// never on which message arrived first. With R = 2 and B even, w_r = 1/2 (exact in float).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace wte {

/// Samples [first, first + count) of a global batch of B samples belong to `rank` of `ranks`:
/// B / ranks each, the first B % ranks ranks one more. Throws wte::Error if ranks > B (a rank
/// would get no sample; the error names both numbers) or ranks < 1.
struct BatchSlice {
  size_t first = 0;
  size_t count = 0;
};
BatchSlice batch_slice(size_t B, int rank, int ranks);

/// Each rank's weight w_r = n_r / B (float; the same on every rank).
std::vector<float> rank_weights(size_t B, int ranks);

/// out[i] = Σ_r w[r]·parts[r·stride + i] for i in [0, n), r = 0..R-1 in that order (out starts at
/// w[0]·part 0). OpenMP over i; bit-identical for any thread count. out may alias no part.
void ordered_weighted_sum(float* out, const float* parts, size_t stride, size_t n,
                          const std::vector<float>& w);

/// The same sum with part r at parts[r] (R = w.size() pointers): out[i] = Σ_r w[r]·parts[r][i],
/// r = 0..R-1 in that order; the same bits as the strided form. out may be one of the parts
/// (element i of every part is read before out[i] is written; data-parallel training sums a rank's
/// own block in place, without copying it), but may not overlap a part at another offset.
void ordered_weighted_sum(float* out, const std::vector<const float*>& parts, size_t n,
                          const std::vector<float>& w);

/// The reduce-scatter's split of n gradient floats over `ranks` (ZeRO-1: rank r sums, clips and
/// updates floats [displs[r], displs[r] + counts[r])): the n floats are cut into units of `align`
/// floats (the last one shorter), rank r gets units / ranks of them in order, the first
/// units % ranks ranks one more, so every rank's block starts at a multiple of align (clip_grad_norm's
/// squared-norm partial sums, include/wte/optimizer.h, then never straddle two ranks). A rank may
/// get no floats (n < ranks · align). Throws wte::Error if ranks < 1 or align is 0.
void split_blocks(size_t n, int ranks, size_t align, std::vector<size_t>* counts,
                  std::vector<size_t>* displs);

/// Merges R row-sparse gradients (rank r: counts[r] rows of C floats, ids distinct and
/// increasing) into one: `ids` = the sorted union, `rows` (ids.size(), C) = Σ_r w[r]·row_r(id)
/// summed in rank order (a row a rank did not touch contributes nothing). all_ids and all_rows are
/// the ranks' lists concatenated in rank order. Throws wte::Error if a rank's ids are not
/// increasing.
void merge_sparse_rows(const int32_t* all_ids, const float* all_rows,
                       const std::vector<size_t>& counts, size_t C, const std::vector<float>& w,
                       std::vector<int32_t>* ids, std::vector<float>* rows);

}  // namespace wte
