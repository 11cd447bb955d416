// The fused, chunked unembedding + cross-entropy: see src/model/unembedding.h.
#include "src/model/unembedding.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include "wte/error.h"
#include "wte/kernels.h"

namespace wte {

namespace {

size_t round_down16(size_t x) { return x / 16 * 16; }

size_t threads_of(const UnembeddingTiles& t) { return std::max<size_t>(t.threads, 1); }

// With P > 1 threads a row block's tiles go in 4·P groups (at most one per tile), which the threads
// take as they come free. Why more groups than threads: a thread that shares its core with another
// process (a busy machine) takes fewer groups, where a fixed split makes every call wait for the
// slower half (as long as one thread when another process keeps one core busy); on idle cores both
// take the same time (bench/torch_loss.py measures the idle case). Why 4:
// finer groups balance better, but each group but the first keeps a (rows, C) partial dh
// (0.75 MiB at 256 rows, C 768).
constexpr size_t kGroupsPerThread = 4;

// The groups the workspace has room for: 1 (the serial path) for one thread.
size_t group_capacity(const UnembeddingTiles& t) {
  return threads_of(t) == 1 ? 1 : kGroupsPerThread * threads_of(t);
}

void check_tiles(const UnembeddingTiles& tiles) {
  if (tiles.rows == 0 || tiles.tile == 0)
    throw Error("fused unembedding: rows per block (" + std::to_string(tiles.rows) +
                ") and ids per tile (" + std::to_string(tiles.tile) + ") must be positive");
}

// Statistics of a row block's rows over some tiles: running max, sum of exponentials (relative to
// the max) and the target's logit (0 where the target is in none of the tiles).
struct RowStats {
  float* max;
  float* sum;
  float* target_logit;
  RowStats(float* at, size_t rows) : max(at), sum(at + rows), target_logit(at + 2 * rows) {}
  void reset(size_t R) const {
    std::fill(max, max + R, -std::numeric_limits<float>::infinity());
    std::fill(sum, sum + R, 0.0f);
    std::fill(target_logit, target_logit + R, 0.0f);
  }
};

// The workspace's views (unembedding_workspace_floats): one row block's logits (rows × V,
// tile-major: tile v0 is the (R, w) matrix at R·v0), then each group's row statistics (3 × rows;
// group 0's hold the merged ones), then each group's partial dh but the first's (rows × C; the
// first group writes dh itself).
struct Workspace {
  float* logits;
  size_t rows, V, C, groups;
  RowStats stats(size_t g) const { return RowStats(logits + rows * V + 3 * rows * g, rows); }
  float* dh_part(size_t g) const { return logits + rows * V + 3 * rows * groups + (g - 1) * rows * C; }
};

// h or W moved on by `elems` elements (both copies).
GemmInput offset(const GemmInput& x, size_t elems) {
  return GemmInput(x.f32 + elems, x.bf16 != nullptr ? x.bf16 + elems : nullptr);
}

// Both operands of every tile GEMM are of one type (Gemm::run).
bool check_operands(const GemmInput& h, const GemmInput& W) {
  if ((h.bf16 == nullptr) != (W.bf16 == nullptr))
    throw Error("fused unembedding: h' and the unembedding weights must both be float32 or both "
                "have bf16 copies (h' bf16: " + std::string(h.bf16 ? "yes" : "no") +
                ", W bf16: " + std::string(W.bf16 ? "yes" : "no") + ")");
  return h.bf16 != nullptr;
}

// losses[r] = (m - x_target) + log(S): softmax_cross_entropy's formula (exact for ties).
void finish_loss(float* losses, const RowStats& s, size_t r) {
  losses[r] = (s.max[r] - s.target_logit[r]) + std::log(s.sum[r]);
}

// One call's operands, outputs and buffers (dh and dW nullptr: forward only).
struct Call {
  GemmInput h, W;
  const int32_t* targets;
  size_t N, V, C;
  UnembeddingTiles tiles;
  Workspace ws;
  uint16_t* ws16;  // bf16 GEMMs: one dlogits tile (rows × tile) per thread
  float *losses, *dh, *dW;
  float grad_scale;
  bool accumulate_dW;
};

// The tile's logits out (R, w) = h_block · W[v0 : v0 + w]ᵀ, then at once, while they are in
// cache, the online max and sum of exponentials of its rows into s.
void tile_logits(const Call& c, size_t n0, size_t R, size_t v0, float* out, const RowStats& s,
                 Gemm& gemm) {
  const size_t w = std::min(c.tiles.tile, c.V - v0);
  const auto r = static_cast<int64_t>(R), wi = static_cast<int64_t>(w), ci = static_cast<int64_t>(c.C);
  gemm.run(out, plain(r, wi), offset(c.h, n0 * c.C).operand(plain(r, ci)),
           offset(c.W, v0 * c.C).operand(transposed(wi, ci)));
  gemm.wait();
  cross_entropy_tile_stats(out, R, w, w, v0, c.targets + n0, s.max, s.sum, s.target_logit);
}

// The tile's backward from the row block's final statistics s: dlogits in place of its logits
// (tile-major slot), its bf16 copy in ws16 (bf16 GEMMs), then both gradient GEMMs read it from
// cache: dh_out (R, C) (+)= dlogits_tile · W_tile (+ when add_dh) and dW_tile (+)= dlogits_tileᵀ ·
// h_block (+ after the first row block, or always when the call accumulates dW).
void tile_backward(const Call& c, size_t n0, size_t R, size_t v0, const RowStats& s, uint16_t* ws16,
                   float* dh_out, bool add_dh, Gemm& gemm) {
  const size_t w = std::min(c.tiles.tile, c.V - v0);
  const auto r = static_cast<int64_t>(R), wi = static_cast<int64_t>(w), ci = static_cast<int64_t>(c.C);
  float* lt = c.ws.logits + R * v0;
  cross_entropy_tile_grad(lt, R, w, w, v0, c.targets + n0, s.max, s.sum, c.grad_scale);
  // bf16 GEMMs: the tile's bf16 copy, rounded as softmax_cross_entropy's dlogits16 is
  const bool bf16 = c.h.bf16 != nullptr;
  if (bf16) convert_f32_to_bf16(ws16, lt, R * w);
  const GemmInput dl(lt, bf16 ? ws16 : nullptr);
  const GemmInput hb = offset(c.h, n0 * c.C), Wt = offset(c.W, v0 * c.C);
  gemm.run(dh_out, plain(r, ci), dl.operand(plain(r, wi)), Wt.operand(plain(wi, ci)), nullptr,
           add_dh);
  gemm.run(c.dW + v0 * c.C, plain(wi, ci), dl.operand(transposed(r, wi)), hb.operand(plain(r, ci)),
           nullptr, /*accumulate=*/c.accumulate_dW || n0 > 0);
  gemm.wait();
}

// One row block on the calling thread (one thread: the call's own GEMM object, whose oneDNN
// primitives split each product over the OpenMP threads). Forward only: every tile's logits go to
// the first tile's slot. Forward and backward: each tile keeps its slot for step 3.
void block_serial(const Call& c, size_t n0, Gemm& gemm) {
  const size_t R = std::min(c.tiles.rows, c.N - n0);
  const bool backward = c.dh != nullptr;
  const RowStats s = c.ws.stats(0);
  s.reset(R);
  // 1. Every tile's logits and the rows' online statistics.
  for (size_t v0 = 0; v0 < c.V; v0 += c.tiles.tile)
    tile_logits(c, n0, R, v0, c.ws.logits + (backward ? R * v0 : 0), s, gemm);
  // 2. The block's losses.
  for (size_t r = 0; r < R; ++r) finish_loss(c.losses + n0, s, r);
  if (!backward) return;
  // 3. Backward, tile by tile; the first tile writes dh_block.
  for (size_t v0 = 0; v0 < c.V; v0 += c.tiles.tile)
    tile_backward(c, n0, R, v0, s, c.ws16, c.dh + n0 * c.C, /*add_dh=*/v0 > 0, gemm);
}

// Group g's tiles of `groups`: ids [begin, end), whole tiles, a contiguous range, tile counts
// differing by at most one. It depends on (V, tile, groups) alone, so every run with as many
// groups sums in the same order, whichever thread runs a group.
struct IdRange {
  size_t begin, end;
};
IdRange group_ids(size_t V, size_t tile, size_t g, size_t groups) {
  const size_t tiles = (V + tile - 1) / tile;
  return {std::min(tiles * g / groups * tile, V), std::min(tiles * (g + 1) / groups * tile, V)};
}

// Row r's statistics of the groups, merged into group 0's in group order: the max of the maxes,
// each sum rescaled to it (by exp(m_g - m), exactly 1 for a group holding the max), and the
// target's logit (only the group whose tiles hold the target has a non-zero one).
void merge_stats(const Workspace& ws, size_t groups, size_t r) {
  const RowStats s0 = ws.stats(0);
  float m = s0.max[r];
  for (size_t g = 1; g < groups; ++g) m = std::max(m, ws.stats(g).max[r]);
  float sum = s0.sum[r] * std::exp(s0.max[r] - m), target = s0.target_logit[r];
  for (size_t g = 1; g < groups; ++g) {
    const RowStats sg = ws.stats(g);
    sum += sg.sum[r] * std::exp(sg.max[r] - m);
    target += sg.target_logit[r];
  }
  s0.max[r] = m;
  s0.sum[r] = sum;
  s0.target_logit[r] = target;
}

// dh row r += the partial dh rows of groups 1..groups-1, in group order.
void add_dh_parts(const Call& c, size_t n0, size_t groups, size_t r) {
  float* row = c.dh + (n0 + r) * c.C;
  for (size_t g = 1; g < groups; ++g) {
    const float* part = c.ws.dh_part(g) + r * c.C;
    for (size_t j = 0; j < c.C; ++j) row[j] += part[j];
  }
}

// Runs f, keeping what it throws in `error` (nothing may leave an OpenMP region).
template <typename F>
void keep_error(std::exception_ptr& error, F&& f) {
  try {
    f();
  } catch (...) {
    if (!error) error = std::current_exception();
  }
}

// Group g's forward: its tiles' logits and its own statistics. Forward only: all its tiles' logits
// go to its first tile's slot; forward and backward: each tile keeps its slot.
void group_logits(const Call& c, size_t n0, size_t R, size_t g, size_t groups, Gemm& gemm) {
  const IdRange ids = group_ids(c.V, c.tiles.tile, g, groups);
  const RowStats s = c.ws.stats(g);
  s.reset(R);
  for (size_t v0 = ids.begin; v0 < ids.end; v0 += c.tiles.tile)
    tile_logits(c, n0, R, v0, c.ws.logits + R * (c.dh != nullptr ? v0 : ids.begin), s, gemm);
}

// Group g's backward from the merged statistics: its tiles' dlogits, dW tiles (rows of dW no other
// group writes) and its partial dh (group 0's is dh_block), written by its first tile.
void group_backward(const Call& c, size_t n0, size_t R, size_t g, size_t groups, uint16_t* ws16,
                    Gemm& gemm) {
  const IdRange ids = group_ids(c.V, c.tiles.tile, g, groups);
  float* dh_out = g == 0 ? c.dh + n0 * c.C : c.ws.dh_part(g);
  for (size_t v0 = ids.begin; v0 < ids.end; v0 += c.tiles.tile)
    tile_backward(c, n0, R, v0, c.ws.stats(0), ws16, dh_out, v0 > ids.begin, gemm);
}

// One row block over `groups` groups of tiles, run by workers.size() threads, each group's GEMMs on
// one thread with that thread's worker (Gemm::worker). The groups' statistics are merged before the
// losses and the backward, their partial dh after it. Why split the vocabulary rather than each
// GEMM: the tile GEMMs are small (R × w × C), and splitting each one over the threads pays a
// fork/join and a partition per GEMM.
void block_parallel(const Call& c, size_t n0, const std::vector<Gemm*>& workers, size_t groups) {
  const size_t R = std::min(c.tiles.rows, c.N - n0);
  const bool backward = c.dh != nullptr;
  std::vector<std::exception_ptr> errors(workers.size());
#pragma omp parallel num_threads(static_cast<int>(workers.size()))
  {
    // This thread's GEMMs and row kernels run on it alone; the setting is this task's own and
    // ends with the region.
    omp_set_num_threads(1);
    const auto t = static_cast<size_t>(omp_get_thread_num());
    Gemm& gemm = *workers[t];
    uint16_t* ws16 = c.ws16 != nullptr ? c.ws16 + t * c.tiles.rows * c.tiles.tile : nullptr;
#pragma omp for schedule(dynamic, 1)
    for (size_t g = 0; g < groups; ++g)
      keep_error(errors[t], [&] { group_logits(c, n0, R, g, groups, gemm); });
#pragma omp for schedule(static)
    for (size_t r = 0; r < R; ++r) {
      merge_stats(c.ws, groups, r);
      finish_loss(c.losses + n0, c.ws.stats(0), r);
    }
    if (backward) {
#pragma omp for schedule(dynamic, 1)
      for (size_t g = 0; g < groups; ++g)
        keep_error(errors[t], [&] { group_backward(c, n0, R, g, groups, ws16, gemm); });
#pragma omp for schedule(static)
      for (size_t r = 0; r < R; ++r) add_dh_parts(c, n0, groups, r);
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// The threads a call splits the vocabulary among (1: the serial path): the OpenMP threads, at
// most as many as the workspace has room for (tiles.threads) and as there are tiles.
size_t split_threads(const UnembeddingTiles& tiles, size_t V) {
  const size_t n_tiles = (V + tiles.tile - 1) / tiles.tile;
  return std::min({static_cast<size_t>(std::max(omp_get_max_threads(), 1)), threads_of(tiles),
                   n_tiles});
}

void run_blocks(const Call& c, Gemm& gemm) {
  const size_t P = split_threads(c.tiles, c.V);
  if (P == 1) {
    for (size_t n0 = 0; n0 < c.N; n0 += c.tiles.rows) block_serial(c, n0, gemm);
    return;
  }
  const size_t n_tiles = (c.V + c.tiles.tile - 1) / c.tiles.tile;
  const size_t groups = std::min(n_tiles, kGroupsPerThread * P);
  std::vector<Gemm*> workers(P);
  for (size_t t = 0; t < P; ++t) workers[t] = &gemm.worker(t);
  for (size_t n0 = 0; n0 < c.N; n0 += c.tiles.rows) block_parallel(c, n0, workers, groups);
}

}  // namespace

size_t auto_loss_rows(size_t V) {
  const size_t budget = (size_t{64} << 20) / sizeof(float);  // at most 64 MiB of logits per block
  return std::clamp<size_t>(round_down16(budget / std::max<size_t>(V, 1)), 32, 256);
}

size_t auto_loss_tile(size_t rows, size_t V) {
  const size_t budget = (size_t{512} << 10) / sizeof(float);  // 512 KiB per tile
  const size_t v16 = (V + 15) / 16 * 16;
  return std::clamp<size_t>(round_down16(budget / std::max<size_t>(rows, 1)), std::min<size_t>(256, v16),
                            v16);
}

UnembeddingTiles resolve_loss_tiles(const ModelConfig& config, size_t N) {
  const size_t V = config.vocab_size;
  size_t rows = config.loss_chunk;
  if (rows == 0) {
    if (V <= kFusedLossMinVocab) return {};  // automatic: unfused for small vocabularies
    rows = auto_loss_rows(V);
  }
  // The tile width follows the configured height, not the capped one, so a batch's result never
  // depends on the capacity reserved before it.
  const size_t tile = config.loss_vocab_tile > 0 ? config.loss_vocab_tile : auto_loss_tile(rows, V);
  const auto threads = static_cast<size_t>(std::max(omp_get_max_threads(), 1));
  return {std::min(rows, std::max<size_t>(N, 1)), std::min(tile, V), threads};
}

size_t unembedding_workspace_floats(const UnembeddingTiles& tiles, size_t V, size_t C) {
  const size_t G = group_capacity(tiles);
  return tiles.rows * V + 3 * tiles.rows * G + (G - 1) * tiles.rows * C;
}

size_t unembedding_workspace16_elems(const UnembeddingTiles& tiles) {
  return threads_of(tiles) * tiles.rows * tiles.tile;
}

void unembedding_loss_forward(float* losses, GemmInput h, GemmInput W, const int32_t* targets,
                              size_t N, size_t V, size_t C, const UnembeddingTiles& tiles,
                              float* workspace, Gemm& gemm) {
  check_tiles(tiles);
  check_operands(h, W);
  const Call c{h, W, targets, N, V, C, tiles, Workspace{workspace, tiles.rows, V, C, group_capacity(tiles)},
               nullptr, losses, nullptr, nullptr, 0.0f, false};
  run_blocks(c, gemm);
}

void unembedding_loss_forward_backward(float* losses, float* dh, float* dW, GemmInput h,
                                       GemmInput W, const int32_t* targets, size_t N, size_t V,
                                       size_t C, float grad_scale, const UnembeddingTiles& tiles,
                                       float* workspace, uint16_t* workspace16, Gemm& gemm,
                                       bool accumulate_dW) {
  check_tiles(tiles);
  const bool bf16 = check_operands(h, W);
  if (bf16 && workspace16 == nullptr)
    throw Error("fused unembedding: bf16 GEMMs need the bf16 workspace of one dlogits tile per "
                "thread (" + std::to_string(unembedding_workspace16_elems(tiles)) +
                " elements), got none");
  const Call c{h, W, targets, N, V, C, tiles, Workspace{workspace, tiles.rows, V, C, group_capacity(tiles)},
               bf16 ? workspace16 : nullptr, losses, dh, dW, grad_scale, accumulate_dW};
  run_blocks(c, gemm);
}

}  // namespace wte
