// The float32 GEMMs of one training step of a model, each on every GEMM library (oneDNN, OpenBLAS,
// BLIS) and as wte runs it (model.gemm = auto: the planner's choice, src/model/gemm_plan.h), with
// the views (shapes, strides, transposes, accumulate, bias) the model passes to Gemm::run
// (src/model/matmul.cc, model.cc, unembedding.cc), at each thread count. Interleaved rounds: each
// round runs every variant of a GEMM back to back (each the median of --repeat runs); the table
// gives each variant's median GFLOP/s over the rounds and wte's time against the fastest library's
// (the median of the per-round ratios, with their min-max).
//
//   wte_gemm_bench [--B 16] [--T 128] [--C 256] [--V 8192] [--fused-rows 0] [--fused-tile 0]
//                  [--threads 1,2] [--rounds 5] [--repeat 3] [--peak 2048]
// --fused-rows R (with --fused-tile W) lists the fused loss's tile GEMMs (R rows of h', W vocabulary
// ids) instead of the unfused logits GEMMs; at more than one thread they run one per thread
// (workers), so they are timed at one thread. --peak S adds the S³ GEMM.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/model/matmul.h"
#include "wte/error.h"

namespace {

using wte::GemmChoice;
using wte::MatView;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One GEMM of the step: dst (M,N) (+)= src · wei (+ bias), as the model calls Gemm::run.
struct Case {
  std::string name;
  MatView dst, src, wei;
  bool bias = false, accumulate = false;
  bool single_thread = false;  // runs on a worker thread (the fused loss's tiles)
  int64_t M() const { return dst.dims[0]; }
  int64_t N() const { return dst.dims[1]; }
  int64_t K() const { return src.dims[1]; }
  double gflop() const { return 2e-9 * static_cast<double>(M() * N() * K()); }
  std::string layout() const {
    const auto t = [](const MatView& v) { return v.strides[0] == 1 && v.dims[0] > 1 ? "T" : "N"; };
    return std::string(t(src)) + t(wei) + (accumulate ? " +=" : "") + (bias ? " +b" : "");
  }
};

// A linear layer (N, C) -> (N, OC): forward, then its backward's two GEMMs (matmul_backward).
void add_linear(std::vector<Case>& v, const std::string& name, int64_t n, int64_t c, int64_t oc) {
  using wte::plain;
  using wte::transposed;
  v.push_back({name + " fwd", plain(n, oc), plain(n, c), plain(c, oc), true, false});
  v.push_back({name + " dinp", plain(n, c), plain(n, oc), transposed(c, oc), false, false});
  v.push_back({name + " dweight", plain(c, oc), transposed(n, c), plain(n, oc), false, true});
}

struct Args {
  int64_t B = 16, T = 128, C = 256, V = 8192, rows = 0, tile = 0, peak = 0;
  std::vector<int> threads{1, 2};
  int rounds = 5, repeat = 3;
};

std::vector<Case> step_cases(const Args& a) {
  using wte::plain;
  using wte::transposed;
  const int64_t n = a.B * a.T, c = a.C, v = a.V;
  std::vector<Case> cases;
  add_linear(cases, "qkv (c_attn)", n, c, 3 * c);
  add_linear(cases, "attn c_proj", n, c, c);
  add_linear(cases, "fc (c_fc)", n, c, 4 * c);
  add_linear(cases, "fc proj (mlp c_proj)", n, 4 * c, c);
  if (a.rows == 0) {
    cases.push_back({"logits", plain(n, v), plain(n, c), transposed(v, c)});
    cases.push_back({"dh (dlogits lm_head)", plain(n, c), plain(n, v), plain(v, c)});
    cases.push_back({"dlm_head (dlogits^T h)", plain(v, c), transposed(n, v), plain(n, c), false, true});
  } else {
    const int64_t r = a.rows, w = a.tile;
    cases.push_back({"loss tile logits", plain(r, w), plain(r, c), transposed(w, c), false, false, true});
    cases.push_back({"loss tile dh", plain(r, c), plain(r, w), plain(w, c), false, true, true});
    cases.push_back({"loss tile dW", plain(w, c), transposed(r, w), plain(r, c), false, true, true});
  }
  if (a.peak > 0) {
    const int64_t s = a.peak;
    cases.push_back({"peak " + std::to_string(s) + "^3", plain(s, s), plain(s, s), plain(s, s)});
  }
  return cases;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::vector<float> x(n);
  for (auto& f : x) {
    seed = seed * 1664525u + 1013904223u;
    f = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
  }
  return x;
}

size_t extent(const MatView& v) {
  return static_cast<size_t>((v.dims[0] - 1) * v.strides[0] + (v.dims[1] - 1) * v.strides[1] + 1);
}

std::vector<int> parse_ints(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p != '\0';) {
    char* end = nullptr;
    v.push_back(static_cast<int>(std::strtol(p, &end, 10)));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p != '\0') break;
  }
  return v;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* val = argv[i + 1];
    if (k == "--B") a.B = std::atoll(val);
    else if (k == "--T") a.T = std::atoll(val);
    else if (k == "--C") a.C = std::atoll(val);
    else if (k == "--V") a.V = std::atoll(val);
    else if (k == "--fused-rows") a.rows = std::atoll(val);
    else if (k == "--fused-tile") a.tile = std::atoll(val);
    else if (k == "--threads") a.threads = parse_ints(val);
    else if (k == "--rounds") a.rounds = std::atoi(val);
    else if (k == "--repeat") a.repeat = std::atoi(val);
    else if (k == "--peak") a.peak = std::atoll(val);
    else {
      std::fprintf(stderr, "wte_gemm_bench: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.rows > 0 && a.tile <= 0) {
    std::fprintf(stderr, "wte_gemm_bench: --fused-rows needs --fused-tile\n");
    std::exit(2);
  }
  return a;
}

const GemmChoice kVariants[] = {GemmChoice::automatic, GemmChoice::onednn, GemmChoice::openblas,
                                GemmChoice::blis};

// One GEMM at one thread count: every variant's median GFLOP/s, and wte's ratio to the best
// (returned: the median over the rounds).
double bench_case(const Case& c, int threads, const Args& a) {
  const auto src = random_floats(extent(c.src), 1), wei = random_floats(extent(c.wei), 2),
             bias = random_floats(static_cast<size_t>(c.N()), 3);
  std::vector<float> dst(extent(c.dst), 0.0f);
  std::vector<std::unique_ptr<wte::Gemm>> gemms;
  std::vector<GemmChoice> variants;
  for (GemmChoice g : kVariants) {
    try {
      auto gemm = std::make_unique<wte::Gemm>();
      gemm->set_choice(g);
      gemms.push_back(std::move(gemm));
      variants.push_back(g);
    } catch (const wte::Error&) {
      // a library that cannot run here: no column
    }
  }
  const int t = c.single_thread ? 1 : threads;
  omp_set_num_threads(t);
  std::vector<std::vector<double>> gflops(variants.size());
  std::vector<double> ratio;
  std::string wte_impl;
  for (int r = -1; r < a.rounds; ++r) {  // round -1: primitives made, plans timed, pages touched
    std::vector<double> secs(variants.size());
    for (size_t i = 0; i < variants.size(); ++i) {
      std::vector<double> runs;
      for (int k = 0; k < a.repeat; ++k) {
        const double t0 = now_s();
        gemms[i]->run(dst.data(), c.dst, src.data(), c.src, wei.data(), c.wei,
                      c.bias ? bias.data() : nullptr, c.accumulate);
        gemms[i]->wait();
        runs.push_back(now_s() - t0);
      }
      secs[i] = median(runs);
      if (r >= 0) gflops[i].push_back(c.gflop() / secs[i]);
    }
    if (r >= 0) {
      const double best = *std::min_element(secs.begin() + 1, secs.end());
      ratio.push_back(best / secs[0]);
    }
  }
  wte_impl = gemms[0]->kernels().empty() ? "?" : gemms[0]->kernels()[0].impl;
  std::printf("| %s | %s | %lldx%lldx%lld %s | %s |", c.name.c_str(), c.single_thread ? "1 (worker)" : std::to_string(t).c_str(),
              static_cast<long long>(c.M()), static_cast<long long>(c.N()),
              static_cast<long long>(c.K()), c.layout().c_str(), wte_impl.c_str());
  for (size_t i = 0; i < variants.size(); ++i) std::printf(" %.1f |", median(gflops[i]));
  for (size_t i = variants.size(); i < 4; ++i) std::printf(" - |");
  std::printf(" %.0f%% (%.0f-%.0f) |\n", 100 * median(ratio),
              100 * *std::min_element(ratio.begin(), ratio.end()),
              100 * *std::max_element(ratio.begin(), ratio.end()));
  std::fflush(stdout);
  return median(ratio);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    for (GemmChoice g : {GemmChoice::onednn, GemmChoice::openblas, GemmChoice::blis}) {
      const wte::GemmLibrary lib = g == GemmChoice::onednn     ? wte::GemmLibrary::onednn
                                   : g == GemmChoice::openblas ? wte::GemmLibrary::openblas
                                                               : wte::GemmLibrary::blis;
      std::printf("%s: %s\n", wte::to_string(g), wte::gemm_library_version(lib).c_str());
    }
    std::printf("\nGEMMs of a step at B %lld, T %lld, d_model %lld, vocab_size %lld%s; GFLOP/s "
                "(median of %d rounds of the median of %d runs); wte/best: the fastest library's "
                "time over wte's (model.gemm = auto), median (min-max) over the rounds\n\n",
                static_cast<long long>(a.B), static_cast<long long>(a.T),
                static_cast<long long>(a.C), static_cast<long long>(a.V),
                a.rows > 0 ? (", fused loss tiles " + std::to_string(a.rows) + "x" +
                              std::to_string(a.tile)).c_str()
                           : "",
                a.rounds, a.repeat);
    std::printf("| GEMM | threads | M x N x K (layout) | wte runs | wte | onednn | openblas | blis "
                "| wte / best |\n|---|---:|---|---|---:|---:|---:|---:|---:|\n");
    const std::vector<Case> cases = step_cases(a);
    std::vector<std::string> summary;
    for (int threads : a.threads) {
      std::vector<double> ratios;
      for (const Case& c : cases) {
        if (c.single_thread && threads != a.threads.front()) continue;
        const double r = bench_case(c, threads, a);
        if (c.name.rfind("peak", 0) != 0) ratios.push_back(r);
      }
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "summary B=%lld T=%lld C=%lld V=%lld threads=%d: wte/best min %.0f%%, median "
                    "%.0f%% over %zu GEMMs",
                    static_cast<long long>(a.B), static_cast<long long>(a.T),
                    static_cast<long long>(a.C), static_cast<long long>(a.V), threads,
                    100 * *std::min_element(ratios.begin(), ratios.end()), 100 * median(ratios),
                    ratios.size());
      summary.push_back(buf);
    }
    std::printf("\n");
    for (const std::string& line : summary) std::printf("%s\n", line.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wte_gemm_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
