#include "src/profile/comm_profile.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "src/profile/clock.h"
#include "src/profile/profile.h"
#include "wte/optimizer.h"
#include "wte/rng.h"

namespace wte::profile {
namespace {

// Uniform random ids: every rank the same global batch (the untied wte's touched rows are then
// about min(V, B·T): more than text, whose frequent tokens repeat).
struct GlobalBatch {
  std::vector<int32_t> inputs, targets;
};
GlobalBatch random_global_batch(const Config& cfg) {
  const size_t B = cfg.train.batch_size, T = cfg.data.seq_len, V = cfg.model.vocab_size;
  GlobalBatch g{std::vector<int32_t>(B * T), std::vector<int32_t>(B * T)};
  Rng rng(cfg.train.seed);
  for (size_t i = 0; i < B * T; ++i) {
    g.inputs[i] = static_cast<int32_t>(rng.below(V));
    g.targets[i] = static_cast<int32_t>(rng.below(V));
  }
  return g;
}

// 1. Compute on rank 0, the whole global batch (forward + backward, then clip + AdamW as
// train_step); the other ranks wait without spinning. Shared with every rank afterwards.
void time_compute(CommProfile& p, Model& model, const Config& cfg, const GlobalBatch& g,
                  size_t repeat, RankExchange& ranks) {
  const size_t B = cfg.train.batch_size, T = cfg.data.seq_len;
  if (ranks.rank() == 0) {
    AdamW optimizer(model);
    std::vector<double> fb, opt;
    for (size_t i = 0; i < repeat + 1; ++i) {
      auto t0 = Clock::now();
      model.zero_grad();  // as train_step: backward adds
      model.forward(g.inputs.data(), g.targets.data(), B, T);
      model.backward();
      const double a = seconds_since(t0);
      t0 = Clock::now();
      const double norm = grad_norm(model, model.wte_grad_rows());  // as train_step
      optimizer.update(model, 1e-5f, cfg.optim, model.wte_grad_rows(),
                       clip_scale(norm, cfg.optim.grad_clip));
      const double b = seconds_since(t0);
      if (i > 0) fb.push_back(a), opt.push_back(b);  // the first builds oneDNN's primitives
    }
    p.forward_backward_s = median(fb);
    p.optimizer_s = median(opt);
    p.sparse_rows = model.wte_grad_rows().count;
  }
  ranks.barrier_sleeping();  // the other ranks leave rank 0's threads the cores meanwhile
  double shared[3] = {p.forward_backward_s, p.optimizer_s, static_cast<double>(p.sparse_rows)};
  std::vector<double> all_shared(3 * static_cast<size_t>(ranks.size()));
  ranks.allgather(shared, sizeof shared, all_shared.data());
  p.forward_backward_s = all_shared[0], p.optimizer_s = all_shared[1];
  p.sparse_rows = static_cast<size_t>(all_shared[2]);
}

// Median seconds of `repeat` runs of fn, each after a barrier, after one untimed run.
template <typename Fn>
double median_after_barrier(size_t repeat, RankExchange& ranks, Fn&& fn) {
  std::vector<double> ts;
  for (size_t i = 0; i < repeat + 1; ++i) {
    ranks.barrier();
    const auto t0 = Clock::now();
    fn();
    if (i > 0) ts.push_back(seconds_since(t0));
  }
  return median(ts);
}

}  // namespace

CommProfile profile_comm(const Config& cfg, size_t repeat, RankExchange& ranks,
                         const std::function<void(size_t)>& on_model) {
  if (cfg.train.threads > 0) omp_set_num_threads(static_cast<int>(cfg.train.threads));
  const size_t B = cfg.train.batch_size, T = cfg.data.seq_len;
  Model model(cfg.model);
  model.init_weights(cfg.train.seed);
  const GlobalBatch g = random_global_batch(cfg);
  CommProfile p;
  p.parameters = model.num_parameters();
  if (on_model) on_model(p.parameters);
  time_compute(p, model, cfg, g, repeat, ranks);

  // 2. The training exchange itself, on every rank's slice of the batch: the gradient's
  // reduce-scatter (with the rank-order sum) and the parameters' all-gather, without the clip and
  // AdamW between them (measured above).
  const auto [first, count] = ranks.start_exchange(B);
  model.zero_grad();
  model.forward(g.inputs.data() + first * T, g.targets.data() + first * T, count, T);
  model.backward();
  p.exchange_s = median_after_barrier(repeat, ranks, [&] { ranks.exchange_step(model); });
  p.bytes_sent = ranks.bytes_sent_last();
  const TensorSpec& wte = model.tensors().front();
  p.sparse = wte.sparse_grad;
  p.dense = model.num_parameters() - (wte.sparse_grad ? wte.size : 0);

  // 3. Latency and bandwidth of this transport: the dense exchange at sizes from 256 floats up.
  std::vector<float> buf(p.dense, 1.0f);
  for (size_t n = 256;; n = std::min(p.dense, n * 4)) {
    const double s = median_after_barrier(repeat, ranks, [&] { ranks.reduce_floats(buf.data(), n); });
    p.sweep.push_back({n, s, ranks.bytes_sent_last()});
    if (n == p.dense) break;
  }
  return p;
}

ProjectedStep projected_step(const CommProfile& p, size_t C, size_t R, const Network& net) {
  const double bw = net.gbits * 1e9 / 8, a = net.latency_us * 1e-6;
  const double r = static_cast<double>(R);
  ProjectedStep out;
  if (R > 1) {
    out.comm_s = 2 * (r - 1) * (a + static_cast<double>(p.dense) / r * 4 / bw);
    if (p.sparse)
      out.comm_s += (r - 1) * (a + static_cast<double>(p.sparse_rows) / r * (4.0 * C + 4) / bw);
  }
  out.step_s = (p.forward_backward_s + p.optimizer_s) / r + out.comm_s;
  return out;
}

}  // namespace wte::profile
