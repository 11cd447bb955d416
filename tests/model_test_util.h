// Helpers shared by the model tests (tests/model/test_model.cc, test_reference_blocks.cc,
// test_blocks_vs_reference.cc, test_blocks.cc, test_unembedding.cc, test_grad_accum.cc,
// test_data_parallel.cc): uniform random tensors, batches of token ids (with repeats, or uniform
// input/target pairs), and the central-difference check of one tensor of the double reference
// (on tests/gradcheck_util.h's loop).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/gradcheck_util.h"
#include "wte/rng.h"

namespace wte::test {

// Fills *v with values uniform in [-scale, scale) drawn from *rng (one rng->uniform() per value).
template <typename F>
void fill_uniform(std::vector<F>* v, Rng* rng, double scale) {
  for (F& x : *v) x = static_cast<F>(scale * (2.0 * rng->uniform() - 1.0));
}

// A batch of n ids in [0, used_ids) (so rows >= used_ids of a V-row table are not in the batch)
// that repeats ids on purpose: the first two are equal, and ids come from a small range.
inline std::vector<int32_t> make_ids(size_t n, size_t used_ids, Rng* rng) {
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng->below(used_ids));
  if (n >= 2) ids[1] = ids[0];
  return ids;
}

// A batch of n positions: inputs x and targets y, each id uniform in [0, V), drawn from *rng in the
// order x[0], y[0], x[1], y[1], ... (one rng->below(V) each).
struct TokenBatch {
  std::vector<int32_t> x, y;  // (n) each
};
inline TokenBatch random_batch(size_t n, size_t V, Rng* rng) {
  TokenBatch b{std::vector<int32_t>(n), std::vector<int32_t>(n)};
  for (size_t i = 0; i < n; ++i) {
    b.x[i] = static_cast<int32_t>(rng->below(V));
    b.y[i] = static_cast<int32_t>(rng->below(V));
  }
  return b;
}

// Central differences of `loss()` (the double reference's loss at the current parameters) for
// every entry of one parameter tensor *theta against its analytic gradient, by
// tests/gradcheck_util.h's central_differences (eps 1e-6, pass iff |analytic - numeric| <= 1e-5 +
// 1e-3·|numeric|). Adds the entries checked and failed to *checked and *failures, counted over all
// the tensors of one model; the first 20 failures of that count are reported with ADD_FAILURE as
// "<label>: <name>[i] analytic A numeric N |diff| D". Returns this tensor's max |analytic - numeric|
// and max |numeric|.
template <typename Loss>
FdResult check_tensor_fd(const Loss& loss, std::vector<double>* theta,
                         const std::vector<double>& analytic, const std::string& label,
                         const std::string& name, size_t* checked, size_t* failures) {
  const FdResult r =
      central_differences(loss, theta, analytic, [&](size_t i, double a, double numeric, double err) {
        if (++*failures <= 20)
          ADD_FAILURE() << label << ": " << name << "[" << i << "] analytic " << a << " numeric "
                        << numeric << " |diff| " << err;
      });
  *checked += r.checked;
  return r;
}

}  // namespace wte::test
