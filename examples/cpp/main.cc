// An embedding table's forward and backward with wte's kernels: lookup, scatter-add of the
// upstream gradient (deterministic for any thread count), then a lazy AdamW step on the rows used.
#include <wte/kernels.h>

#include <cstdio>
#include <vector>

int main() {
  const size_t V = 8, C = 4;                        // vocab_size, d_model
  std::vector<float> wte(V * C), m(V * C, 0.0f), v(V * C, 0.0f);
  for (size_t i = 0; i < wte.size(); ++i) wte[i] = 0.01f * static_cast<float>(i);
  const std::vector<int32_t> ids = {5, 2, 5};       // N = 3 token ids, id 5 twice
  const size_t N = ids.size();

  // Forward: hidden[n] = wte[ids[n]]  (N, C)
  std::vector<float> hidden(N * C);
  wte::embedding_gather(hidden.data(), ids.data(), wte.data(), N, C);

  // Backward: dwte[ids[n]] += dhidden[n]; row 5 receives the sum of two rows.
  std::vector<float> dhidden(N * C, 1.0f), dwte(V * C, 0.0f);
  wte::ScatterWorkspace workspace;                  // reuse across steps: no allocation per step
  wte::embedding_backward_wte(dwte.data(), dhidden.data(), ids.data(), N, C, V, &workspace);
  std::printf("hidden[0][1] = %g, dwte[5][0] = %g, dwte[2][0] = %g\n", hidden[1], dwte[5 * C],
              dwte[2 * C]);

  // Or, for an untied table: backward fused with lazy AdamW (only rows 2 and 5 change).
  const wte::AdamWParams hp{/*lr=*/0.1f, /*beta1=*/0.9f, /*beta2=*/0.999f, /*eps=*/1e-8f,
                            /*weight_decay=*/0.0f, /*step=*/1};
  wte::embedding_backward_adamw_lazy(wte.data(), m.data(), v.data(), dhidden.data(), ids.data(),
                                     N, C, V, hp, &workspace);
  std::printf("after one step: wte[5][0] = %g (was 0.2), wte[0][0] = %g (untouched)\n",
              wte[5 * C], wte[0]);
  return 0;
}
