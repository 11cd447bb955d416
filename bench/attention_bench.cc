// Causal attention's forward + backward, dense (src/model/attention.h: oneDNN batched GEMMs over
// the full T×T and the softmax kernels) against tiled (src/model/attention_tiled.h), on the same
// inputs, in interleaved rounds: each round times dense then tiled (each the median of --repeat
// runs); the table gives each side's median over the rounds and the median (min-max) of the
// per-round speed-ups. Also a sweep of the tiled path's tile shapes.
//
//   wte_attention_bench [--B 1] [--T 1024] [--C 768] [--NH 12] [--threads 2] [--rounds 5]
//                       [--repeat 3] [--tiles QxK] [--sweep] [--bf16] [--tiled-only]
// --T may be a comma-separated list (one table row per T). Prints one line per shape:
//   attention B=.. T=.. C=.. NH=.. threads=..: dense X ms, tiled Y ms, speed-up S (min-max)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/model/attention.h"
#include "src/model/attention_tiled.h"
#include "src/model/matmul.h"
#include "wte/kernels.h"

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

template <typename F>
double time_median(int repeat, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < repeat; ++r) {
    const double t0 = now_ms();
    f();
    t.push_back(now_ms() - t0);
  }
  return median(t);
}

struct Args {
  size_t B = 1, C = 768, NH = 12;
  std::vector<size_t> Ts{1024};
  int threads = 2, rounds = 5, repeat = 3;
  wte::AttentionTiles tiles{};
  bool sweep = false, bf16 = false, tiled_only = false;
};

std::vector<size_t> parse_list(const char* s) {
  std::vector<size_t> v;
  for (const char* p = s; *p;) {
    char* end;
    v.push_back(std::strtoull(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p) break;
  }
  return v;
}

void run(const Args& a, size_t T) {
  const size_t B = a.B, C = a.C, NH = a.NH, N = B * T;
  std::vector<float> qkv(N * 3 * C), out(N * C), dout(N * C), dqkv(N * 3 * C), lse(B * NH * T);
  std::vector<float> att(B * NH * T * T), datt(B * NH * T * T);
  uint32_t x = 12345;
  auto rnd = [&] { x = x * 1664525u + 1013904223u; return (x >> 8) * (2.0f / 16777216.0f) - 1.0f; };
  for (float& v : qkv) v = 1.5f * rnd();
  for (float& v : dout) v = rnd();
  wte::Gemm gemm;
  std::vector<uint16_t> qkv16, att16, dout16, datt16;
  if (a.bf16) {
    qkv16.resize(N * 3 * C), att16.resize(att.size()), dout16.resize(N * C), datt16.resize(att.size());
  }
  auto p16 = [&](std::vector<uint16_t>& v) { return a.bf16 ? v.data() : nullptr; };
  auto dense = [&] {
    const wte::GemmInput qkv_in(qkv.data(), p16(qkv16));
    wte::attention_forward(out.data(), {att.data(), p16(att16)}, qkv_in, B, T, C, NH, gemm);
    wte::attention_backward(dqkv.data(), {datt.data(), p16(datt16)}, {dout.data(), p16(dout16)},
                            qkv_in, {att.data(), p16(att16)}, B, T, C, NH, gemm);
  };
  auto tiled = [&](wte::AttentionTiles tiles) {
    wte::attention_tiled_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH, a.bf16, tiles);
    wte::attention_tiled_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T,
                                  C, NH, a.bf16, tiles);
  };
  if (a.tiled_only) {  // for a profiler: the tiled path alone
    for (int r = 0; r < a.rounds * a.repeat; ++r) tiled(a.tiles);
    return;
  }
  dense();
  tiled(a.tiles);  // warm-up: primitives created, pages touched
  std::vector<double> td, tt, ratio;
  for (int r = 0; r < a.rounds; ++r) {
    td.push_back(time_median(a.repeat, dense));
    tt.push_back(time_median(a.repeat, [&] { tiled(a.tiles); }));
    ratio.push_back(td.back() / tt.back());
  }
  std::printf("attention B=%zu T=%zu C=%zu NH=%zu threads=%d%s tiles=%zux%zu: dense %.3f ms, tiled %.3f ms, "
              "speed-up %.3f (%.3f-%.3f)\n",
              B, T, C, NH, a.threads, a.bf16 ? " bf16" : "",
              wte::attention_tiles(a.tiles, a.bf16).q_rows, wte::attention_tiles(a.tiles, a.bf16).k_cols,
              median(td), median(tt), median(ratio), *std::min_element(ratio.begin(), ratio.end()),
              *std::max_element(ratio.begin(), ratio.end()));
  std::fflush(stdout);
  if (!a.sweep) return;
  const size_t sizes[] = {16, 32, 48, 64, 96, 128};
  for (size_t qr : sizes)
    for (size_t kc : sizes) {
      const wte::AttentionTiles t{qr, kc};
      tiled(t);
      std::vector<double> v;
      for (int r = 0; r < a.rounds; ++r) v.push_back(time_median(a.repeat, [&] { tiled(t); }));
      std::printf("  sweep T=%zu tiles=%zux%zu: tiled %.3f ms (%.3f-%.3f)\n", T, qr, kc, median(v),
                  *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
      std::fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", k.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (k == "--B") a.B = std::strtoull(val(), nullptr, 10);
    else if (k == "--T") a.Ts = parse_list(val());
    else if (k == "--C") a.C = std::strtoull(val(), nullptr, 10);
    else if (k == "--NH") a.NH = std::strtoull(val(), nullptr, 10);
    else if (k == "--threads") a.threads = std::atoi(val());
    else if (k == "--rounds") a.rounds = std::atoi(val());
    else if (k == "--repeat") a.repeat = std::atoi(val());
    else if (k == "--tiles") {
      const char* s = val();
      a.tiles.q_rows = std::strtoull(s, nullptr, 10);
      const char* xp = std::strchr(s, 'x');
      a.tiles.k_cols = xp ? std::strtoull(xp + 1, nullptr, 10) : a.tiles.q_rows;
    } else if (k == "--sweep") a.sweep = true;
    else if (k == "--bf16") a.bf16 = true;
    else if (k == "--tiled-only") a.tiled_only = true;
    else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  if (a.B == 0 || a.C == 0 || a.NH == 0 || a.C % a.NH != 0 || a.rounds < 1 || a.repeat < 1 ||
      a.threads < 1 || a.Ts.empty()) {
    std::fprintf(stderr, "bad shape or counts (NH must divide C; counts >= 1)\n");
    return 2;
  }
  omp_set_num_threads(a.threads);
  for (size_t T : a.Ts) run(a, T);
  return 0;
}
