#include "src/analysis/geometry.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "wte/error.h"
#include "wte/rng.h"

namespace wte {
namespace {

using MatrixRM = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The rows as a double matrix (N, C).
MatrixRM to_double(RowsView w) {
  MatrixRM m(w.rows, w.cols);
  for (size_t i = 0; i < w.rows; ++i)
    for (size_t c = 0; c < w.cols; ++c) m(i, c) = w.row(i)[c];
  return m;
}

// Unit rows; throws naming the first row of norm 0.
MatrixRM unit_rows(RowsView w, const char* what) {
  MatrixRM m = to_double(w);
  for (size_t i = 0; i < w.rows; ++i) {
    const double n = m.row(i).norm();
    if (n == 0.0)
      throw Error(std::string(what) + ": row " + std::to_string(i) +
                  " has norm 0, so its cosine with any row is undefined");
    m.row(i) /= n;
  }
  return m;
}

void check_labels(RowsView w, const std::vector<int>& labels, const char* what) {
  if (labels.size() != w.rows)
    throw Error(std::string(what) + ": " + std::to_string(labels.size()) + " labels for " +
                std::to_string(w.rows) + " rows; need one label per row");
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0)
      throw Error(std::string(what) + ": label " + std::to_string(labels[i]) + " of row " +
                  std::to_string(i) + " is negative; labels are class indices >= 0");
}

// Mean cosine of distinct pairs of the nonzero rows of m; returns (mean, rows of norm 0).
std::pair<double, size_t> mean_pair_cosine(const MatrixRM& m) {
  Eigen::RowVectorXd sum = Eigen::RowVectorXd::Zero(m.cols());
  size_t n = 0, zero = 0;
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    const double norm = m.row(i).norm();
    if (norm == 0.0) {
      ++zero;
      continue;
    }
    sum += m.row(i) / norm;
    ++n;
  }
  if (n < 2)
    throw Error("anisotropy: " + std::to_string(n) +
                " rows of nonzero norm; the mean cosine of pairs needs at least 2");
  const double nd = static_cast<double>(n);
  return {(sum.squaredNorm() - nd) / (nd * (nd - 1.0)), zero};
}

}  // namespace

std::vector<std::vector<Neighbour>> nearest_neighbours(RowsView w,
                                                       const std::vector<int32_t>& queries,
                                                       size_t k) {
  for (int32_t query : queries)
    if (query < 0 || static_cast<size_t>(query) >= w.rows)
      throw Error("nearest_neighbours: token id " + std::to_string(query) + " is outside [0, " +
                  std::to_string(w.rows) + ")");
  const MatrixRM u = unit_rows(w, "nearest_neighbours");
  std::vector<std::vector<Neighbour>> result;
  for (int32_t query : queries) {
    const Eigen::VectorXd cos = u * u.row(query).transpose();
    std::vector<Neighbour> all;
    all.reserve(w.rows);
    for (size_t i = 0; i < w.rows; ++i)
      if (static_cast<int32_t>(i) != query) all.push_back({static_cast<int32_t>(i), cos(i)});
    const size_t kk = std::min(k, all.size());
    auto better = [](const Neighbour& a, const Neighbour& b) {
      return a.cosine != b.cosine ? a.cosine > b.cosine : a.id < b.id;
    };
    std::partial_sort(all.begin(), all.begin() + static_cast<long>(kk), all.end(), better);
    all.resize(kk);
    result.push_back(std::move(all));
  }
  return result;
}

Anisotropy anisotropy(RowsView w) {
  MatrixRM m = to_double(w);
  Anisotropy a;
  std::tie(a.raw, a.zero_rows_raw) = mean_pair_cosine(m);
  const Eigen::RowVectorXd mean = m.colwise().mean();
  m.rowwise() -= mean;
  std::tie(a.centred, a.zero_rows_centred) = mean_pair_cosine(m);
  return a;
}

std::vector<double> row_norms(RowsView w) {
  std::vector<double> out(w.rows);
  for (size_t i = 0; i < w.rows; ++i) {
    double s = 0;
    for (size_t c = 0; c < w.cols; ++c) s += double(w.row(i)[c]) * double(w.row(i)[c]);
    out[i] = std::sqrt(s);
  }
  return out;
}

double effective_rank(RowsView w) {
  const MatrixRM m = to_double(w);
  Eigen::MatrixXd gram(m.cols(), m.cols());
  gram.setZero();
  gram.selfadjointView<Eigen::Lower>().rankUpdate(m.transpose());  // WᵀW, lower triangle
  gram = gram.selfadjointView<Eigen::Lower>();
  const double trace = gram.trace();
  const double frob2 = gram.squaredNorm();
  if (frob2 == 0.0) throw Error("effective_rank: every row is zero; the rank is undefined");
  return trace * trace / frob2;
}

double knn_purity(RowsView w, const std::vector<int>& labels, size_t k) {
  check_labels(w, labels, "knn_purity");
  if (k == 0 || k >= w.rows)
    throw Error("knn_purity: k = " + std::to_string(k) + " must be in [1, N-1] = [1, " +
                std::to_string(w.rows == 0 ? 0 : w.rows - 1) + "]");
  const MatrixRM u = unit_rows(w, "knn_purity");
  const Eigen::MatrixXd cos = u * u.transpose();
  double total = 0;
  std::vector<int> order(w.rows);
  for (size_t i = 0; i < w.rows; ++i) {
    order.clear();
    for (size_t j = 0; j < w.rows; ++j)
      if (j != i) order.push_back(static_cast<int>(j));
    std::partial_sort(order.begin(), order.begin() + static_cast<long>(k), order.end(),
                      [&](int a, int b) {
                        return cos(i, a) != cos(i, b) ? cos(i, a) > cos(i, b) : a < b;
                      });
    size_t same = 0;
    for (size_t n = 0; n < k; ++n) same += labels[order[n]] == labels[i];
    total += static_cast<double>(same) / static_cast<double>(k);
  }
  return total / static_cast<double>(w.rows);
}

double knn_purity_chance(const std::vector<int>& labels) {
  const size_t n = labels.size();
  if (n < 2) throw Error("knn_purity_chance: " + std::to_string(n) + " labels; need at least 2");
  std::map<int, size_t> counts;
  for (int l : labels) ++counts[l];
  double chance = 0;
  const double nd = static_cast<double>(n);
  for (const auto& [label, c] : counts)
    chance += (double(c) / nd) * (double(c) - 1.0) / (nd - 1.0);
  return chance;
}

double silhouette(RowsView w, const std::vector<int>& labels) {
  check_labels(w, labels, "silhouette");
  std::map<int, int> index;  // label -> dense class index
  for (int l : labels) index.emplace(l, 0);
  if (index.size() < 2)
    throw Error("silhouette: " + std::to_string(index.size()) +
                " class among the labelled rows; the silhouette needs at least 2");
  int next = 0;
  for (auto& [label, idx] : index) idx = next++;
  const size_t K = index.size(), N = w.rows;
  std::vector<size_t> size(K, 0);
  std::vector<int> cls(N);
  for (size_t i = 0; i < N; ++i) ++size[cls[i] = index[labels[i]]];
  const MatrixRM u = unit_rows(w, "silhouette");
  const Eigen::MatrixXd dist = (Eigen::MatrixXd::Ones(N, N) - u * u.transpose());
  double total = 0;
  std::vector<double> sum(K);
  for (size_t i = 0; i < N; ++i) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (size_t j = 0; j < N; ++j)
      if (j != i) sum[cls[j]] += dist(i, j);
    const size_t own = cls[i];
    if (size[own] == 1) continue;  // s = 0 for a singleton (Rousseeuw 1987)
    const double a = sum[own] / double(size[own] - 1);
    double b = INFINITY;
    for (size_t c = 0; c < K; ++c)
      if (c != own) b = std::min(b, sum[c] / double(size[c]));
    const double denom = std::max(a, b);
    total += denom > 0 ? (b - a) / denom : 0.0;
  }
  return total / double(N);
}

Pca2 pca_2d(RowsView w) {
  if (w.rows < 2 || w.cols < 2)
    throw Error("pca_2d: needs at least 2 rows and 2 columns, got (" + std::to_string(w.rows) +
                ", " + std::to_string(w.cols) + ")");
  MatrixRM m = to_double(w);
  const Eigen::RowVectorXd mean = m.colwise().mean();
  m.rowwise() -= mean;
  const Eigen::MatrixXd cov = (m.transpose() * m) / double(w.rows - 1);
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(cov);
  if (eig.info() != Eigen::Success) throw Error("pca_2d: the eigensolver did not converge");
  const Eigen::VectorXd& values = eig.eigenvalues();  // ascending
  const double total = values.sum();
  Pca2 out;
  out.x.resize(w.rows);
  out.y.resize(w.rows);
  for (int axis = 0; axis < 2; ++axis) {
    const Eigen::Index col = values.size() - 1 - axis;
    Eigen::VectorXd v = eig.eigenvectors().col(col);
    Eigen::Index big = 0;
    v.cwiseAbs().maxCoeff(&big);
    if (v(big) < 0) v = -v;
    const Eigen::VectorXd proj = m * v;
    for (size_t i = 0; i < w.rows; ++i) (axis == 0 ? out.x : out.y)[i] = proj(i);
    out.explained[axis] = total > 0 ? std::max(0.0, values(col)) / total : 0.0;
  }
  return out;
}

std::vector<double> pair_cosines(RowsView w, size_t max_pairs, uint64_t seed) {
  const std::vector<double> norms = row_norms(w);
  auto cosine = [&](size_t i, size_t j) {
    double s = 0;
    for (size_t c = 0; c < w.cols; ++c) s += double(w.row(i)[c]) * double(w.row(j)[c]);
    return s / (norms[i] * norms[j]);
  };
  std::vector<double> out;
  const size_t N = w.rows;
  if (N < 2) return out;
  const double all = double(N) * double(N - 1) / 2.0;
  if (all <= double(max_pairs)) {
    for (size_t i = 0; i < N; ++i)
      for (size_t j = i + 1; j < N; ++j)
        if (norms[i] > 0 && norms[j] > 0) out.push_back(cosine(i, j));
    return out;
  }
  Rng rng(seed);
  out.reserve(max_pairs);
  for (size_t p = 0; p < max_pairs; ++p) {
    const size_t i = rng.below(N);
    size_t j = rng.below(N - 1);
    if (j >= i) ++j;
    if (norms[i] > 0 && norms[j] > 0) out.push_back(cosine(i, j));
  }
  return out;
}

}  // namespace wte
