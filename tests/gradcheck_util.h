// Finite-difference helpers shared by the per-op gradient checks in double precision
// (tests/reference/test_gradcheck_ops.cc, tests/reference/test_gradcheck_block_kernels.cc).
//
// An op y = op(x) is checked through the scalar L = Σ U ⊙ y for a fixed random upstream gradient U,
// so dL/dx is exactly op_backward(U), and the central difference
//   numeric = (L(x + eps·e_i) - L(x - eps·e_i)) / (2·eps),  eps = kFdEps = 1e-6
// must satisfy |analytic - numeric| <= kFdAtol + kFdRtol·|numeric| (1e-5 + 1e-3·|numeric|) at
// every entry.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace wte::test {

inline constexpr double kFdEps = 1e-6, kFdAtol = 1e-5, kFdRtol = 1e-3;

// n values drawn uniformly from [-scale, scale).
inline std::vector<double> uniform(size_t n, std::mt19937& rng, double scale = 1.0) {
  std::uniform_real_distribution<double> d(-scale, scale);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

// Σ a[i]·b[i] over a's size (b at least as long).
inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// What central_differences found over one tensor.
struct FdResult {
  size_t checked = 0;   // entries compared
  size_t failures = 0;  // entries out of tolerance
  double max_err = 0;   // max |analytic - numeric|
  double max_abs = 0;   // max |numeric|
};

// The check of the header comment for callers that report failures their own way: central
// differences of loss() w.r.t. every entry of *theta (each entry restored to its bits afterwards)
// against `analytic` (at least theta->size() entries); on_failure(i, analytic[i], numeric,
// |analytic[i] - numeric|) is called for every entry out of tolerance.
template <typename Loss, typename OnFailure>
FdResult central_differences(const Loss& loss, std::vector<double>* theta,
                             const std::vector<double>& analytic, const OnFailure& on_failure) {
  FdResult r;
  for (size_t i = 0; i < theta->size(); ++i) {
    const double saved = (*theta)[i];
    (*theta)[i] = saved + kFdEps;
    const double up = loss();
    (*theta)[i] = saved - kFdEps;
    const double down = loss();
    (*theta)[i] = saved;
    const double numeric = (up - down) / (2 * kFdEps);
    const double err = std::fabs(analytic[i] - numeric);
    r.max_err = std::max(r.max_err, err);
    r.max_abs = std::max(r.max_abs, std::fabs(numeric));
    ++r.checked;
    if (!(err <= kFdAtol + kFdRtol * std::fabs(numeric))) {
      ++r.failures;
      on_failure(i, analytic[i], numeric, err);
    }
  }
  return r;
}

// Central differences of loss() w.r.t. every entry of *theta (restored afterwards), against
// `analytic`; one failure per entry out of tolerance (the first 10 printed), labelled `label`.
inline void expect_fd(const std::function<double()>& loss, std::vector<double>* theta,
                      const std::vector<double>& analytic, const std::string& label) {
  ASSERT_EQ(theta->size(), analytic.size()) << label;
  size_t printed = 0;
  const FdResult r =
      central_differences(loss, theta, analytic, [&](size_t i, double a, double numeric, double) {
        if (++printed <= 10)
          ADD_FAILURE() << label << "[" << i << "]: analytic " << a << " numeric " << numeric;
      });
  EXPECT_EQ(r.failures, 0u) << label << ": max |analytic - numeric| " << r.max_err;
}

}  // namespace wte::test
