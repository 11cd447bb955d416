// The fused, chunked unembedding + cross-entropy: see src/model/unembedding.h.
#include "src/model/unembedding.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "wte/error.h"
#include "wte/kernels.h"

namespace wte {

namespace {

size_t round_down16(size_t x) { return x / 16 * 16; }

void check_tiles(const UnembeddingTiles& tiles) {
  if (tiles.rows == 0 || tiles.tile == 0)
    throw Error("fused unembedding: rows per block (" + std::to_string(tiles.rows) +
                ") and ids per tile (" + std::to_string(tiles.tile) + ") must be positive");
}

// A row block's statistics: the three (rows) arrays after the block's logits.
struct RowStats {
  float* max;
  float* sum;
  float* target_logit;
  RowStats(float* workspace, const UnembeddingTiles& t, size_t V)
      : max(workspace + t.rows * V), sum(max + t.rows), target_logit(sum + t.rows) {}
  void reset(size_t R) {
    std::fill(max, max + R, -std::numeric_limits<float>::infinity());
    std::fill(sum, sum + R, 0.0f);
    std::fill(target_logit, target_logit + R, 0.0f);
  }
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
void finish_losses(float* losses, const RowStats& s, size_t R) {
  for (size_t r = 0; r < R; ++r) losses[r] = (s.max[r] - s.target_logit[r]) + std::log(s.sum[r]);
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
  return {std::min(rows, std::max<size_t>(N, 1)), std::min(tile, V)};
}

size_t unembedding_workspace_floats(const UnembeddingTiles& tiles, size_t V) {
  return tiles.rows * V + 3 * tiles.rows;
}

size_t unembedding_workspace16_elems(const UnembeddingTiles& tiles) { return tiles.rows * tiles.tile; }

void unembedding_loss_forward(float* losses, GemmInput h, GemmInput W, const int32_t* targets,
                              size_t N, size_t V, size_t C, const UnembeddingTiles& tiles,
                              float* workspace, Gemm& gemm) {
  check_tiles(tiles);
  check_operands(h, W);
  const auto c = static_cast<int64_t>(C);
  RowStats stats(workspace, tiles, V);
  for (size_t n0 = 0; n0 < N; n0 += tiles.rows) {
    const size_t R = std::min(tiles.rows, N - n0);
    const auto r = static_cast<int64_t>(R);
    const GemmInput hb = offset(h, n0 * C);
    stats.reset(R);
    for (size_t v0 = 0; v0 < V; v0 += tiles.tile) {
      const size_t w = std::min(tiles.tile, V - v0);
      const auto wi = static_cast<int64_t>(w);
      // logits tile (R, w) = h_block · W[v0 : v0 + w]ᵀ, always into the first tile's slot
      gemm.run(workspace, plain(r, wi), hb.operand(plain(r, c)),
               offset(W, v0 * C).operand(transposed(wi, c)));
      gemm.wait();
      cross_entropy_tile_stats(workspace, R, w, w, v0, targets + n0, stats.max, stats.sum,
                               stats.target_logit);
    }
    finish_losses(losses + n0, stats, R);
  }
}

void unembedding_loss_forward_backward(float* losses, float* dh, float* dW, GemmInput h,
                                       GemmInput W, const int32_t* targets, size_t N, size_t V,
                                       size_t C, float grad_scale, const UnembeddingTiles& tiles,
                                       float* workspace, uint16_t* workspace16, Gemm& gemm,
                                       bool accumulate_dW) {
  check_tiles(tiles);
  const bool bf16 = check_operands(h, W);
  if (bf16 && workspace16 == nullptr)
    throw Error("fused unembedding: bf16 GEMMs need the bf16 workspace of one dlogits tile (" +
                std::to_string(unembedding_workspace16_elems(tiles)) + " elements), got none");
  const auto c = static_cast<int64_t>(C);
  RowStats stats(workspace, tiles, V);
  for (size_t n0 = 0; n0 < N; n0 += tiles.rows) {
    const size_t R = std::min(tiles.rows, N - n0);
    const auto r = static_cast<int64_t>(R);
    const GemmInput hb = offset(h, n0 * C);
    const int32_t* tb = targets + n0;
    stats.reset(R);
    // 1. Forward: every tile's logits, kept (tile-major: tile v0 is the (R, w) matrix at R·v0), and
    //    the online max / sum of exponentials while the tile is hot.
    for (size_t v0 = 0; v0 < V; v0 += tiles.tile) {
      const size_t w = std::min(tiles.tile, V - v0);
      const auto wi = static_cast<int64_t>(w);
      float* lt = workspace + R * v0;
      gemm.run(lt, plain(r, wi), hb.operand(plain(r, c)),
               offset(W, v0 * C).operand(transposed(wi, c)));
      gemm.wait();
      cross_entropy_tile_stats(lt, R, w, w, v0, tb, stats.max, stats.sum, stats.target_logit);
    }
    // 2. The block's losses.
    finish_losses(losses + n0, stats, R);
    // 3. Backward, tile by tile: dlogits in place, then both gradient GEMMs read it from cache.
    for (size_t v0 = 0; v0 < V; v0 += tiles.tile) {
      const size_t w = std::min(tiles.tile, V - v0);
      const auto wi = static_cast<int64_t>(w);
      float* lt = workspace + R * v0;
      cross_entropy_tile_grad(lt, R, w, w, v0, tb, stats.max, stats.sum, grad_scale);
      // bf16 GEMMs: the tile's bf16 copy, rounded as softmax_cross_entropy's dlogits16 is
      if (bf16) convert_f32_to_bf16(workspace16, lt, R * w);
      const GemmInput dl(lt, bf16 ? workspace16 : nullptr);
      const GemmInput Wt = offset(W, v0 * C);
      //   dh_block (R, C) (+)= dlogits_tile (R, w) · W_tile (w, C)      first tile writes
      gemm.run(dh + n0 * C, plain(r, c), dl.operand(plain(r, wi)), Wt.operand(plain(wi, c)),
               nullptr, /*accumulate=*/v0 > 0);
      //   dW_tile (w, C) (+)= dlogits_tileᵀ (w, R) · h_block (R, C)     first block writes,
      //   unless accumulate_dW
      gemm.run(dW + v0 * C, plain(wi, c), dl.operand(transposed(r, wi)), hb.operand(plain(r, c)),
               nullptr, /*accumulate=*/accumulate_dW || n0 > 0);
      gemm.wait();
    }
  }
}

}  // namespace wte
