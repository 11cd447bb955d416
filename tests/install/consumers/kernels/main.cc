// Calls wte's gather and scatter through the installed package and checks values that are exact
// in binary. Exit 0 on success; prints the first wrong value otherwise.
#include <wte/kernels.h>

#include <cstdio>
#include <vector>

int main() {
  const size_t V = 4, C = 3, N = 3;
  const std::vector<float> wte = {0, 0, 0,  1, 2, 3,  4, 5, 6,  7, 8, 9};  // (V, C)
  const std::vector<int32_t> ids = {3, 1, 3};                              // id 3 twice
  std::vector<float> out(N * C);
  wte::embedding_gather(out.data(), ids.data(), wte.data(), N, C);
  const std::vector<float> want_out = {7, 8, 9,  1, 2, 3,  7, 8, 9};

  // Lookup backward: dwte[ids[n]] += dout[n]; the duplicate id 3 sums its two rows.
  const std::vector<float> dout = {0.5f, 1, 2,  10, 20, 30,  100, 200, 300};
  std::vector<float> dwte(V * C, 0.0f);
  wte::ScatterWorkspace workspace;
  wte::embedding_backward_wte_strategy(wte::ScatterStrategy::kAuto, dwte.data(), dout.data(),
                                       ids.data(), N, C, V, &workspace);
  const std::vector<float> want_dwte = {0, 0, 0,  10, 20, 30,  0, 0, 0,  100.5f, 201, 302};

  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != want_out[i]) {
      std::printf("gather: out[%zu] = %g, want %g\n", i, out[i], want_out[i]);
      return 1;
    }
  for (size_t i = 0; i < dwte.size(); ++i)
    if (dwte[i] != want_dwte[i]) {
      std::printf("scatter: dwte[%zu] = %g, want %g\n", i, dwte[i], want_dwte[i]);
      return 1;
    }
  std::printf("gather and scatter ok: dwte[3] = [%g, %g, %g]\n", dwte[9], dwte[10], dwte[11]);
  return 0;
}
