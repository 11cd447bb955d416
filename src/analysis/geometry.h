// Measures of an embedding table's geometry: how wte's rows, which start as noise, come to point
// alike for tokens that behave alike. Used by `wte geometry` (cli/cmd_geometry.cc).
//
// Every function takes the rows as a row-major float matrix (N, C) (N rows of width C = d_model)
// and computes in double. Cosine of rows u, v: u·v / (|u| |v|). A row of norm 0 has no direction:
// functions that need directions throw wte::Error naming the row, except anisotropy(), which skips
// such rows and counts them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace wte {

/// A read-only view of N rows of width C, row-major, contiguous.
struct RowsView {
  const float* data = nullptr;
  size_t rows = 0;   // N
  size_t cols = 0;   // C
  const float* row(size_t i) const { return data + i * cols; }
};

/// One neighbour of a query row: its row index and cosine with the query.
struct Neighbour {
  int32_t id = 0;
  double cosine = 0;
};

/// For each query row, the k rows with the highest cosine to it, the query itself excluded, best
/// first; ties by lower id. k is capped at N - 1. Throws wte::Error if a query is outside [0, N) or
/// a row has norm 0. Cost O(N·C) per query (rows normalised once).
std::vector<std::vector<Neighbour>> nearest_neighbours(RowsView w,
                                                       const std::vector<int32_t>& queries,
                                                       size_t k);

/// Anisotropy (Ethayarajh 2019, "How Contextual are Contextualized Word Representations?", sec. 3.3:
/// the expected cosine of two random distinct rows; 0 for directions spread evenly, near 1 when
/// every row points into one narrow cone).
/// Computed exactly, not sampled: with unit rows û_i, sum_{i≠j} û_i·û_j = |sum_i û_i|² - n, so the
/// mean over the n(n-1) ordered distinct pairs is (|sum_i û_i|² - n) / (n(n-1)). O(N·C).
/// `centred` is the same after subtracting the mean row from every row (Mu & Viswanath 2018,
/// "All-but-the-Top", remove the common mean vector). Rows whose norm is 0 (before, respectively
/// after, centring) are left out and counted. Throws wte::Error if fewer than 2 rows remain.
struct Anisotropy {
  double raw = 0;
  double centred = 0;
  size_t zero_rows_raw = 0;
  size_t zero_rows_centred = 0;
};
Anisotropy anisotropy(RowsView w);

/// Euclidean norm of every row, (N).
std::vector<double> row_norms(RowsView w);

/// Effective rank as the participation ratio of the squared singular values σ_i² of W (N, C):
///   PR = (sum_i σ_i²)² / sum_i σ_i⁴,
/// between 1 (rank one) and min(N, C) (all σ equal). The σ_i² are the eigenvalues of the Gram matrix
/// G = WᵀW (C, C), so PR = trace(G)² / |G|_F², computed with Eigen in double (no SVD needed).
/// Source: the participation ratio of Gao et al. 2017, "A theory of multineuronal dimensionality,
/// dynamics and measurement" (eq. for PR of covariance eigenvalues), here of the uncentred W.
/// (Roy & Vetterli 2007 define another effective rank, the exponential of the entropy of the
/// normalised σ; wte uses the participation ratio.) For W with i.i.d. N(0, s²) entries, N ≫ 1,
/// PR ≈ C / (1 + C/N) (Marchenko-Pastur moments). Throws wte::Error if W is all zero.
double effective_rank(RowsView w);

/// k-nearest-neighbour class purity: for each row i, the share of its k nearest rows by cosine
/// (itself excluded, among the N given rows only) whose label equals label[i]; the mean over rows.
/// labels: (N) class indices >= 0. Throws wte::Error if labels.size() != N, a label is negative,
/// k == 0 or k >= N, or a row has norm 0. O(N²·C).
double knn_purity(RowsView w, const std::vector<int>& labels, size_t k);

/// The purity a table with no class structure scores in expectation: a neighbour of a row of class
/// c is then a uniformly random other row, of class c with probability (n_c - 1)/(N - 1), so
///   chance = sum_c (n_c/N) · (n_c - 1)/(N - 1)   (≈ sum_c (n_c/N)² ≈ 1/K for K balanced classes).
/// Independent of k. Throws wte::Error if N < 2.
double knn_purity_chance(const std::vector<int>& labels);

/// Mean silhouette coefficient (Rousseeuw 1987, "Silhouettes: a graphical aid to the interpretation
/// and validation of cluster analysis") with cosine distance d = 1 - cos: for row i, a = mean d to
/// the other rows of its class, b = the smallest mean d to the rows of another class,
/// s = (b - a) / max(a, b) (0 for a row alone in its class, as Rousseeuw sets it). In [-1, 1];
/// near 1: classes tight and apart. Throws wte::Error if labels.size() != N, fewer than 2 classes,
/// a negative label or a row of norm 0.
double silhouette(RowsView w, const std::vector<int>& labels);

/// PCA to two dimensions: the rows minus their mean, projected on the two eigenvectors of the
/// covariance (C, C) with the largest eigenvalues (Eigen's SelfAdjointEigenSolver, in double).
/// Each axis's sign is fixed so the component's largest-magnitude entry is positive (deterministic).
/// explained[i] = eigenvalue_i / sum of eigenvalues. x, y: (N). Throws wte::Error if N < 2 or C < 2.
struct Pca2 {
  std::vector<double> x, y;
  double explained[2] = {0, 0};
};
Pca2 pca_2d(RowsView w);

/// Cosines of pairs of distinct rows for a histogram: all N(N-1)/2 pairs if that is at most
/// max_pairs, else max_pairs pairs (i, j), i ≠ j, drawn uniformly with wte::Rng(seed). Rows of norm 0
/// are skipped. Deterministic.
std::vector<double> pair_cosines(RowsView w, size_t max_pairs, uint64_t seed);

}  // namespace wte
