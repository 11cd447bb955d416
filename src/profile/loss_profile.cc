#include "src/profile/loss_profile.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <random>

#include "src/model/matmul.h"
#include "src/profile/clock.h"
#include "wte/config.h"
#include "wte/kernels.h"
#include "wte/model.h"

namespace wte::profile {
namespace {

// VmRSS and VmHWM of this process in bytes (/proc/self/status), 0 if unreadable.
struct Rss {
  uint64_t now = 0, peak = 0;
};
Rss read_rss() {
  std::ifstream in("/proc/self/status");
  std::string key;
  Rss r;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key) {
    if (key == "VmRSS:" && in >> kib >> unit) r.now = kib * 1024;
    else if (key == "VmHWM:" && in >> kib >> unit) r.peak = kib * 1024;
    else in.ignore(1 << 20, '\n');
  }
  return r;
}

// Resets VmHWM to the current RSS (Linux: "5" > /proc/self/clear_refs). False if not possible.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// One path's buffers, allocated on its first run (so the peak measurement sees them).
struct PathBuffers {
  Model::Buffer losses, dh, dW, work;
  Gemm gemm;
};

// The unfused path as Model runs it: logits = h · Wᵀ; softmax cross-entropy in place (dlogits);
// dW = dlogitsᵀ · h; dh = dlogits · W.
void run_unfused(PathBuffers& p, const float* h, const float* W, const int32_t* y, size_t N,
                 size_t V, size_t C) {
  const auto n = static_cast<int64_t>(N), c = static_cast<int64_t>(C), v = static_cast<int64_t>(V);
  p.gemm.run(p.work.get(), plain(n, v), h, plain(n, c), W, transposed(v, c));
  p.gemm.wait();
  softmax_cross_entropy(p.work.get(), p.losses.get(), y, N, V, 1.0f / static_cast<float>(N));
  p.gemm.run(p.dW.get(), plain(v, c), p.work.get(), transposed(n, v), h, plain(n, c));
  p.gemm.run(p.dh.get(), plain(n, c), p.work.get(), plain(n, v), W, plain(v, c));
  p.gemm.wait();
}

void run_path(const LossPath& path, PathBuffers& p, const float* h, const float* W,
              const int32_t* y, size_t N, size_t V, size_t C) {
  if (!p.losses) {  // first run: allocate (counted in the peak), as a training step's arena would
    p.losses = allocate_floats(N);
    p.dh = allocate_floats(N * C);
    p.dW = allocate_floats(V * C);
    p.work = allocate_floats(loss_path_buffer_floats(path, N, V, C));
  }
  if (path.tiles.fused())
    unembedding_loss_forward_backward(p.losses.get(), p.dh.get(), p.dW.get(), h, W, y, N, V, C,
                                      1.0f / static_cast<float>(N), path.tiles, p.work.get(),
                                      nullptr, p.gemm);
  else
    run_unfused(p, h, W, y, N, V, C);
}

// max |a - b| relative to max |b| (the absolute difference if b is all 0).
double max_rel(const float* a, const float* b, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; ++i) {
    d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
    m = std::max(m, std::abs(static_cast<double>(b[i])));
  }
  return m > 0 ? d / m : d;
}

}  // namespace

std::vector<LossPath> loss_paths(const LossProfileSettings& s) {
  std::vector<LossPath> paths;
  for (size_t chunk : s.chunks) {
    ModelConfig mc;
    mc.vocab_size = s.V;
    mc.d_model = s.C;
    mc.loss_chunk = chunk == 0 ? auto_loss_rows(s.V) : chunk;
    mc.loss_vocab_tile = s.vocab_tile;
    LossPath p;
    p.tiles = resolve_loss_tiles(mc, s.N);
    p.name = "fused " + std::to_string(p.tiles.rows) + " x " + std::to_string(p.tiles.tile);
    paths.push_back(std::move(p));
  }
  if (s.unfused) paths.push_back({"unfused", UnembeddingTiles{}});
  return paths;
}

size_t loss_path_buffer_floats(const LossPath& path, size_t N, size_t V, size_t C) {
  return path.tiles.fused() ? unembedding_workspace_floats(path.tiles, V, C) : N * V;
}

LossProfile profile_loss(const LossProfileSettings& s, const std::vector<LossPath>& paths) {
  const size_t N = s.N, V = s.V, C = s.C;
  // Inputs, allocated and touched before any measurement: h ~ N(0, 1) (an ln_f output), W ~
  // N(0, 0.02²) (GPT-2's init), targets uniform.
  Model::Buffer h = allocate_floats(N * C), W = allocate_floats(V * C);
  std::vector<int32_t> y(N);
  {
    std::mt19937 rng(static_cast<uint32_t>(s.seed));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t i = 0; i < N * C; ++i) h[i] = normal(rng);
    for (size_t i = 0; i < V * C; ++i) W[i] = 0.02f * normal(rng);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V) - 1);
    for (int32_t& t : y) t = pick(rng);
  }
  LossProfile out;
  std::vector<std::unique_ptr<PathBuffers>> bufs;
  for (const LossPath& p : paths) {
    LossPathResult r;
    r.path = p;
    out.paths.push_back(std::move(r));
    bufs.push_back(std::make_unique<PathBuffers>());
  }
  // First runs, one path at a time, each from a reset peak: its own memory.
  out.peak_reset = reset_peak_rss();
  for (size_t i = 0; i < paths.size(); ++i) {
    reset_peak_rss();
    const Rss before = read_rss();
    const auto t0 = Clock::now();
    run_path(paths[i], *bufs[i], h.get(), W.get(), y.data(), N, V, C);
    out.paths[i].first_run_seconds = seconds_since(t0);
    const Rss after = read_rss();
    out.paths[i].peak_bytes = static_cast<double>(after.peak) - static_cast<double>(before.now);
  }
  // Timed runs, interleaved.
  for (size_t k = 0; k < s.repeat; ++k)
    for (size_t i = 0; i < paths.size(); ++i) {
      const auto t0 = Clock::now();
      run_path(paths[i], *bufs[i], h.get(), W.get(), y.data(), N, V, C);
      out.paths[i].samples.push_back(seconds_since(t0));
    }
  if (!s.unfused) return out;
  const PathBuffers& unfused = *bufs.back();
  for (size_t i = 0; i + 1 < paths.size(); ++i) {
    LossPathResult& r = out.paths[i];
    r.compared = true;
    r.diff_loss = max_rel(bufs[i]->losses.get(), unfused.losses.get(), N);
    r.diff_dh = max_rel(bufs[i]->dh.get(), unfused.dh.get(), N * C);
    r.diff_dW = max_rel(bufs[i]->dW.get(), unfused.dW.get(), V * C);
  }
  return out;
}

}  // namespace wte::profile
