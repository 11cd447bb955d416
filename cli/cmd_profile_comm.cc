// `wte profile comm`: what data-parallel training costs in communication, measured on this machine
// and projected to R machines on a network (src/profile/comm_profile.h measures and projects;
// this file reads the options, binds the measurement to MPI's ranks and prints the results).
#include <boost/program_options.hpp>
#include <omp.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/profile/comm_profile.h"
#include "wte/config.h"
#include "wte/error.h"
#include "wte/model.h"
#include "cli/options.h"
#include "cli/config_path.h"
#include "train/distributed/comm.h"
#include "cli/commands.h"
#include "train/distributed/grad_sync.h"

namespace po = boost::program_options;

namespace wte::cli {
namespace {

using profile::Network;

constexpr const char* kCommUsage =
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

constexpr const char* kCommExample =
    "Example (README: Data-parallel training):\n"
    "  mpirun --allow-run-as-root --oversubscribe --bind-to none --mca oob_tcp_if_include lo \\\n"
    "    --mca btl_tcp_if_include lo -np 2 build/wte profile comm --config configs/default.ini\n";

// `wte profile comm`'s command line, every value and config key checked.
struct CommOptions {
  bool help = false;  // --help was given (printed by rank 0 alone)
  Config config;
  size_t repeat = 20;
  std::vector<Network> nets;
  std::vector<size_t> machine_counts;
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

// Parses and checks `wte profile comm`'s command line (argv[0] is "comm") before MPI is asked for
// its ranks; with --help, rank 0 prints the help. Throws UsageError for a bad option, value or
// config key, wte::Error for an unusable config file.
CommOptions parse_comm_options(int argc, char** argv) {
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
  spec.usage = kCommUsage;
  spec.example = kCommExample;
  spec.config_overrides = true;
  spec.help_out = nullptr;  // printed below by rank 0 alone
  const CommandLine cl = parse_command_line(argc, argv, desc, spec);
  CommOptions o;
  if ((o.help = cl.help)) {
    if (Comm::world().rank() == 0) print_help(std::cout, desc, spec);
    return o;
  }
  const po::variables_map& vm = cl.vm;
  o.config = usage_errors_of_overrides([&] {
    return load_config(resolve_config_path(file_option(vm, "config")), cl.overrides);
  });
  o.repeat = whole_number_option(vm, "repeat", 3, 10000);
  o.nets = parse_networks(vm["net"].as<std::string>());
  for (const std::string& r : split_list("--ranks", vm["ranks"].as<std::string>()))
    o.machine_counts.push_back(parse_whole_number("--ranks", r, 1, 1 << 20));
  return o;
}

// profile::RankExchange over MPI's ranks (Comm) and training's exchange (GradientSync).
class MpiExchange : public profile::RankExchange {
 public:
  explicit MpiExchange(Comm& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  void barrier() override { comm_.barrier(); }
  void barrier_sleeping() override { comm_.barrier_sleeping(); }
  void allgather(const void* send, size_t bytes, void* recv) override {
    comm_.allgather(send, bytes, recv);
  }
  std::pair<size_t, size_t> start_exchange(size_t B) override {
    sync_ = std::make_unique<GradientSync>(comm_, B);
    const BatchSlice mine = sync_->slice();
    return {mine.first, mine.count};
  }
  void exchange_step(Model& model) override {
    sync_->reduce_scatter(model, 1.0f);
    sync_->all_gather_params(model);
  }
  void reduce_floats(float* g, size_t n) override { sync_->reduce_floats(g, n); }
  size_t bytes_sent_last() const override { return sync_->bytes_sent_last(); }

 private:
  Comm& comm_;
  std::unique_ptr<GradientSync> sync_;
};

// The first line (rank 0): the config's shapes, the parameters and the ranks.
void print_comm_header(const Config& cfg, size_t parameters, const Comm& comm) {
  std::printf("profile comm: vocab_size %zu, d_model %zu, n_ctx %zu, n_layer %zu, %s lm_head, "
              "batch %zu x %zu; %zu parameters; %d ranks (%s)\n",
              cfg.model.vocab_size, cfg.model.d_model, cfg.model.n_ctx, cfg.model.n_layer,
              cfg.model.tie_embeddings ? "tied" : "untied", cfg.train.batch_size, cfg.data.seq_len,
              parameters, comm.size(), comm.describe().c_str());
  std::fflush(stdout);
}

// The measurements (rank 0): the exchanged gradient, the compute, the exchange and the sweep.
void print_comm_measurements(const profile::CommProfile& p, const CommOptions& o, int ranks) {
  const size_t B = o.config.train.batch_size, T = o.config.data.seq_len,
               V = o.config.model.vocab_size, C = o.config.model.d_model;
  const double latency = p.sweep.front().seconds;
  const double bandwidth = static_cast<double>(p.sweep.back().sent) / p.sweep.back().seconds;
  std::printf("gradient exchanged per step: dense %zu floats (%.2f MB)", p.dense, p.dense * 4e-6);
  if (p.sparse)
    std::printf(", wte's sparse rows: %zu of %zu (%.2f MB, uniform random ids)", p.sparse_rows, V,
                p.sparse_rows * (C * 4 + 4) * 1e-6);
  std::printf("\ncompute of one step on rank 0 (%d threads, batch %zu x %zu): forward + backward "
              "%.2f ms, clip + AdamW %.2f ms (median of %zu)\n",
              omp_get_max_threads(), B, T, p.forward_backward_s * 1e3, p.optimizer_s * 1e3,
              o.repeat);
  std::printf("this machine's exchange between %d ranks: the step's whole exchange %.3f ms (%.2f MB "
              "sent by each rank) = %.1f%% of the step's compute\n",
              ranks, p.exchange_s * 1e3, p.bytes_sent * 1e-6,
              100 * p.exchange_s / (p.forward_backward_s + p.optimizer_s));
  std::printf("  dense sweep (floats: ms):");
  for (const profile::SweepPoint& s : p.sweep) std::printf(" %zu: %.3f", s.floats, s.seconds * 1e3);
  std::printf("\n  latency %.1f µs (%zu floats), bandwidth %.2f GB/s sent per rank (%zu floats)\n",
              latency * 1e6, p.sweep.front().floats, bandwidth * 1e-9, p.sweep.back().floats);
}

// The projection table (rank 0): step time, communication, speed-up and efficiency per network
// and machine count.
void print_comm_projection(const profile::CommProfile& p, const CommOptions& o) {
  std::printf("\nprojection: R machines like this one, global batch %zu x %zu fixed (t(R) = "
              "t_fwd_bwd/R + t_adamw/R + t_comm(R), ZeRO-1, ring exchange):\n",
              o.config.train.batch_size, o.config.data.seq_len);
  std::printf("%-22s %6s %10s %10s %9s %11s\n", "network", "R", "step ms", "comm ms",
              "speed-up", "efficiency");
  const double t1 = p.forward_backward_s + p.optimizer_s;
  for (const Network& net : o.nets)
    for (size_t R : o.machine_counts) {
      const profile::ProjectedStep s = profile::projected_step(p, o.config.model.d_model, R, net);
      char name[64];
      std::snprintf(name, sizeof name, "%g Gbit/s, %g us", net.gbits, net.latency_us);
      std::printf("%-22s %6zu %10.2f %10.2f %8.2fx %10.0f%%\n", name, R, s.step_s * 1e3,
                  s.comm_s * 1e3, t1 / s.step_s, 100 * t1 / s.step_s / static_cast<double>(R));
    }
}

}  // namespace

int cmd_profile_comm(int argc, char** argv) {
  const CommOptions o = parse_comm_options(argc, argv);
  Comm& comm = Comm::world();
  if (o.help) {
    comm.finalize();
    return 0;
  }
  if (comm.size() < 2)
    throw Error("wte profile comm measures the exchange between ranks, and this process is the only "
                "one (" + comm.describe() + "): run it under mpirun -np 2 (see wte profile comm "
                "--help)");
  const bool root = comm.rank() == 0;
  MpiExchange ranks(comm);
  const profile::CommProfile p = profile::profile_comm(o.config, o.repeat, ranks, [&](size_t n) {
    if (root) print_comm_header(o.config, n, comm);
  });
  if (root) {
    print_comm_measurements(p, o, comm.size());
    print_comm_projection(p, o);
  }
  comm.finalize();
  return 0;
}

}  // namespace wte::cli
