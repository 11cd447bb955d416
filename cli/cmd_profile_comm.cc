// `wte profile comm`: what data-parallel training costs in communication, measured on this machine
// and projected to R machines on a network.
//
// Under mpirun (2 or more ranks) it measures, for a config:
//   * the compute of one training step of the whole global batch on rank 0 (forward + backward,
//     then clip + AdamW), with train.threads threads, while the other ranks sleep in a barrier;
//   * the exchange train/distributed/grad_sync.h does per step (the dense gradient's reduce-scatter with its
//     rank-order sum, the updated parameters' all-gather, the untied wte's (ids, rows)), median of
//     --repeat, and a sweep of dense sizes from 1 KiB up for this
//     transport's latency (the smallest size) and bandwidth (bytes each rank sends / time, at the
//     largest size);
// then projects the step time of R machines like this one over a network of B Gbit/s with latency
// a µs per message, keeping the global batch fixed (strong scaling, as `wte train` under mpirun):
//   t(R) = t_fwd_bwd / R + t_optimizer / R + t_comm(R)   (ZeRO-1: each rank clips and updates
//                                                        1/R of the parameters),
//   t_comm(R) = 2(R-1)·(a + (D/R)·4 / bw) + (R-1)·(a + S/R·(4C + 4) / bw),
// with D dense gradient floats, S sparse rows of the whole batch (about S/R per rank), bw the link
// in bytes/s: each rank sends 2(R-1)/R of the dense gradient in 2(R-1) steps (a ring reduce-scatter
// and all-gather, the bandwidth-optimal schedule; wte's MPI_Alltoallv/MPI_Allgatherv move the same
// bytes; the all-gather sends updated parameters instead of summed gradients). Speed-up = t(1) / t(R) with t(1) = t_fwd_bwd + t_optimizer; efficiency = speed-up / R.
#include <boost/program_options.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "src/profile/profile.h"
#include "src/profile/clock.h"
#include "wte/config.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "wte/rng.h"
#include "cli/options.h"
#include "train/distributed/comm.h"
#include "cli/commands.h"
#include "train/distributed/grad_sync.h"

namespace po = boost::program_options;

namespace wte::cli {
namespace {

using profile::median;

// A network to project to: link rate and per-message latency.
struct Network {
  double gbits;
  double latency_us;
};

std::vector<Network> parse_networks(const std::string& text) {
  std::vector<Network> out;
  for (const std::string& item : split_list("--net", text)) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw UsageError("--net item '" + item + "': allowed GBITS:LATENCY_US, e.g. 10:30 (10 Gbit/s, "
                  "30 µs per message)");
    Network n{};
    try {
      n.gbits = std::stod(item.substr(0, colon));
      n.latency_us = std::stod(item.substr(colon + 1));
    } catch (const std::exception&) {
      throw UsageError("--net item '" + item + "': GBITS and LATENCY_US must be numbers");
    }
    if (!(n.gbits > 0) || !(n.latency_us >= 0))
      throw UsageError("--net item '" + item + "': GBITS must be > 0 and LATENCY_US >= 0");
    out.push_back(n);
  }
  return out;
}

}  // namespace

int cmd_profile_comm(int argc, char** argv) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "print this help")(
      "config,c", po::value<std::string>(), "config whose shapes and batch are measured (default: "
      "the built-in defaults); --section.key=value overrides any key")(
      "repeat", po::value<std::string>()->default_value("20"), "timed repeats (median), in [3, 10000]")(
      "net", po::value<std::string>()->default_value("10:30,100:3"),
      "networks to project to, GBITS:LATENCY_US per message (default: 10 Gbit/s Ethernet with TCP, "
      "30 µs; 100 Gbit/s InfiniBand/RoCE, 3 µs)")(
      "ranks", po::value<std::string>()->default_value("2,4,8,16,32,64"),
      "machine counts R to project to");
  CommandSpec spec;
  spec.usage =
      "Usage: mpirun -np 2 [--bind-to none] wte profile comm [-c/--config FILE] "
      "[--section.key=value ...] [options]\n\n"
      "Measures what data-parallel `wte train` pays to exchange gradients: the compute\n"
      "of one step of the config's global batch on rank 0, the per-step exchange of its\n"
      "gradients between the ranks (median), this transport's latency and bandwidth,\n"
      "and projects step time, speed-up and efficiency for R machines like this one on\n"
      "the given networks, the global batch fixed. --bind-to none lets rank 0 use every\n"
      "core for the compute measurement (mpirun binds each rank to one core otherwise).\n"
      "Keep Open MPI on loopback when testing on one machine: --mca oob_tcp_if_include lo\n"
      "--mca btl_tcp_if_include lo.\n\n";
  spec.example =
      "Example (README: Data-parallel training):\n"
      "  mpirun --allow-run-as-root --oversubscribe --bind-to none --mca oob_tcp_if_include lo \\\n"
      "    --mca btl_tcp_if_include lo -np 2 build/wte profile comm --config configs/default.ini\n";
  spec.config_overrides = true;
  spec.help_out = nullptr;  // printed below by rank 0 alone
  const CommandLine cl = parse_command_line(argc, argv, desc, spec);
  if (cl.help) {
    Comm& comm = Comm::world();
    if (comm.rank() == 0) print_help(std::cout, desc, spec);
    comm.finalize();
    return 0;
  }
  const po::variables_map& vm = cl.vm;
  // Every option and config key checked before MPI is asked for its ranks.
  const Config cfg = usage_errors_of_overrides([&] {
    return load_config(file_option(vm, "config"), cl.overrides);
  });
  const size_t repeat = whole_number_option(vm, "repeat", 3, 10000);
  const std::vector<Network> nets = parse_networks(vm["net"].as<std::string>());
  std::vector<size_t> machine_counts;
  for (const std::string& r : split_list("--ranks", vm["ranks"].as<std::string>()))
    machine_counts.push_back(parse_whole_number("--ranks", r, 1, 1 << 20));
  Comm& comm = Comm::world();
  if (comm.size() < 2)
    throw Error("wte profile comm measures the exchange between ranks, and this process is the only "
                "one (" + comm.describe() + "): run it under mpirun -np 2 (see wte profile comm "
                "--help)");
  if (cfg.train.threads > 0) omp_set_num_threads(static_cast<int>(cfg.train.threads));
  const bool root = comm.rank() == 0;
  const size_t B = cfg.train.batch_size, T = cfg.data.seq_len, V = cfg.model.vocab_size,
               C = cfg.model.d_model;

  Model model(cfg.model);
  model.init_weights(cfg.train.seed);
  AdamW optimizer(model);
  // Uniform random ids: every rank the same global batch (the untied wte's touched rows are then
  // about min(V, B·T): more than text, whose frequent tokens repeat).
  std::vector<int32_t> inputs(B * T), targets(B * T);
  Rng rng(cfg.train.seed);
  for (size_t i = 0; i < B * T; ++i) {
    inputs[i] = static_cast<int32_t>(rng.below(V));
    targets[i] = static_cast<int32_t>(rng.below(V));
  }
  if (root) {
    std::printf("profile comm: vocab_size %zu, d_model %zu, n_ctx %zu, %s lm_head, batch %zu x %zu; "
                "%zu parameters; %d ranks (%s)\n",
                V, C, cfg.model.n_ctx, cfg.model.tie_embeddings ? "tied" : "untied", B, T,
                model.num_parameters(), comm.size(), comm.describe().c_str());
    std::fflush(stdout);
  }

  // 1. Compute on rank 0, the whole global batch; the others wait without spinning.
  double t_fb = 0, t_opt = 0;
  size_t sparse_rows = 0;
  if (root) {
    std::vector<double> fb, opt;
    for (size_t i = 0; i < repeat + 1; ++i) {
      auto t0 = Clock::now();
      model.zero_grad();  // as train_step: backward adds
      model.forward(inputs.data(), targets.data(), B, T);
      model.backward();
      const double a = seconds_since(t0);
      t0 = Clock::now();
      const double norm = grad_norm(model, model.wte_grad_rows());  // as train_step
      optimizer.update(model, 1e-5f, cfg.optim, model.wte_grad_rows(),
                       clip_scale(norm, cfg.optim.grad_clip));
      const double b = seconds_since(t0);
      if (i > 0) fb.push_back(a), opt.push_back(b);  // the first builds oneDNN's primitives
    }
    t_fb = median(fb);
    t_opt = median(opt);
    sparse_rows = model.wte_grad_rows().count;
  }
  comm.barrier_sleeping();  // the other ranks leave rank 0's threads the cores meanwhile
  double shared[3] = {t_fb, t_opt, static_cast<double>(sparse_rows)};
  std::vector<double> all_shared(3 * comm.size());
  comm.allgather(shared, sizeof shared, all_shared.data());
  t_fb = all_shared[0], t_opt = all_shared[1], sparse_rows = static_cast<size_t>(all_shared[2]);

  // 2. The training exchange itself, on every rank's slice of the batch: the gradient's
  // reduce-scatter (with the rank-order sum) and the parameters' all-gather, without the clip and
  // AdamW between them (measured above).
  GradientSync sync(comm, B);
  const BatchSlice mine = sync.slice();
  model.zero_grad();
  model.forward(inputs.data() + mine.first * T, targets.data() + mine.first * T, mine.count, T);
  model.backward();
  std::vector<double> ex;
  for (size_t i = 0; i < repeat + 1; ++i) {
    comm.barrier();
    const auto t0 = Clock::now();
    sync.reduce_scatter(model, 1.0f);
    sync.all_gather_params(model);
    if (i > 0) ex.push_back(seconds_since(t0));
  }
  const double t_exchange = median(ex);
  const size_t bytes_sent = sync.bytes_sent_last();
  const TensorSpec& first = model.tensors().front();
  const size_t dense = model.num_parameters() - (first.sparse_grad ? first.size : 0);

  // 3. Latency and bandwidth of this transport: the dense exchange at sizes from 256 floats up.
  std::vector<float> buf(dense, 1.0f);
  struct Point { size_t floats; double seconds; size_t sent; };
  std::vector<Point> sweep;
  for (size_t n = 256;; n = std::min(dense, n * 4)) {
    std::vector<double> ts;
    for (size_t i = 0; i < repeat + 1; ++i) {
      comm.barrier();
      const auto t0 = Clock::now();
      sync.reduce_floats(buf.data(), n);
      if (i > 0) ts.push_back(seconds_since(t0));
    }
    sweep.push_back({n, median(ts), sync.bytes_sent_last()});
    if (n == dense) break;
  }
  if (root) {
    const double latency = sweep.front().seconds;
    const double bandwidth = static_cast<double>(sweep.back().sent) / sweep.back().seconds;
    std::printf("gradient exchanged per step: dense %zu floats (%.2f MB)", dense, dense * 4e-6);
    if (first.sparse_grad)
      std::printf(", wte's sparse rows: %zu of %zu (%.2f MB, uniform random ids)", sparse_rows, V,
                  sparse_rows * (C * 4 + 4) * 1e-6);
    std::printf("\ncompute of one step on rank 0 (%d threads, batch %zu x %zu): forward + backward "
                "%.2f ms, clip + AdamW %.2f ms (median of %zu)\n",
                omp_get_max_threads(), B, T, t_fb * 1e3, t_opt * 1e3, repeat);
    std::printf("this machine's exchange between %d ranks: the step's whole exchange %.3f ms (%.2f MB "
                "sent by each rank) = %.1f%% of the step's compute\n",
                comm.size(), t_exchange * 1e3, bytes_sent * 1e-6, 100 * t_exchange / (t_fb + t_opt));
    std::printf("  dense sweep (floats: ms):");
    for (const Point& p : sweep) std::printf(" %zu: %.3f", p.floats, p.seconds * 1e3);
    std::printf("\n  latency %.1f µs (%zu floats), bandwidth %.2f GB/s sent per rank (%zu floats)\n",
                latency * 1e6, sweep.front().floats, bandwidth * 1e-9, sweep.back().floats);
    std::printf("\nprojection: R machines like this one, global batch %zu x %zu fixed (t(R) = "
                "t_fwd_bwd/R + t_adamw/R + t_comm(R), ZeRO-1, ring exchange):\n",
                B, T);
    std::printf("%-22s %6s %10s %10s %9s %11s\n", "network", "R", "step ms", "comm ms",
                "speed-up", "efficiency");
    const double t1 = t_fb + t_opt;
    for (const Network& net : nets) {
      const double bw = net.gbits * 1e9 / 8, a = net.latency_us * 1e-6;
      for (size_t R : machine_counts) {
        const double r = static_cast<double>(R);
        double t_comm = 0;
        if (R > 1) {
          t_comm = 2 * (r - 1) * (a + static_cast<double>(dense) / r * 4 / bw);
          if (first.sparse_grad)
            t_comm += (r - 1) * (a + static_cast<double>(sparse_rows) / r * (4.0 * C + 4) / bw);
        }
        const double t = (t_fb + t_opt) / r + t_comm;
        char name[64];
        std::snprintf(name, sizeof name, "%g Gbit/s, %g us", net.gbits, net.latency_us);
        std::printf("%-22s %6zu %10.2f %10.2f %8.2fx %10.0f%%\n", name, R, t * 1e3, t_comm * 1e3,
                    t1 / t, 100 * t1 / t / r);
      }
    }
  }
  comm.finalize();
  return 0;
}

}  // namespace wte::cli
