// The fused, chunked unembedding + cross-entropy: for h' (N, C), the unembedding W (V, C)
// (wte when tied, lm_head when not) and next-token targets (N),
//
//   logits = h' · Wᵀ                              (N, V)   never stored whole
//   loss_n = logsumexp(logits[n]) - logits[n, targets[n]]
//   dlogits = grad_scale · (softmax(logits) - onehot(targets))
//   dh = dlogits · W  (N, C),   dW = dlogitsᵀ · h'  (V, C)
//
// computed in row blocks of `rows` rows of h', each over the vocabulary in tiles of `tile` ids:
//   1. for each tile: logits tile (rows, tile) = h'_block · W_tileᵀ (oneDNN matmul), then at once,
//      while it is in cache, the online max and sum of exponentials per row (cross_entropy_tile_stats);
//   2. the row's loss from the final statistics;
//   3. for each tile: its softmax gradient in place (cross_entropy_tile_grad), then
//      dh_block += dlogits_tile · W_tile and dW_tile += dlogits_tileᵀ · h'_block (oneDNN matmuls; the
//      first tile writes dh_block; the first row block writes dW_tile, or adds to it when the
//      caller accumulates gradients, as wte::Model does).
// The workspace holds one row block's logits (rows × V floats, tile-major, so each tile is one
// contiguous (rows, width) matrix) and three floats per row: memory grows with `rows`, not with N.
//
// Threads: with P > 1 OpenMP threads (at most tiles.threads, the threads the workspace was sized
// for, and at most the number of tiles), each row block's tiles go in G = min(4·P, tiles) groups
// of contiguous tiles (tile counts differing by at most one), which the threads take as they come
// free. A group's GEMMs run on the one thread that takes it (Gemm::worker), and each group keeps
// its own statistics per row; the G statistics are merged in group order (the max of the maxes,
// each sum rescaled to it) before the losses and the backward. Each group adds its tiles' dh into
// its own (rows, C) partial (the first group's is dh_block), and the partials are added to
// dh_block in group order; the dW tiles of different groups are different rows of dW. Why split
// the vocabulary rather than each GEMM: a tile's GEMMs are small (rows × tile × C), and oneDNN
// splitting each over the threads pays a fork/join and a partition per GEMM, with every thread
// waiting at each GEMM's end for the slowest (on a busy machine, for the one whose core is shared);
// groups taken as they come free wait once per phase. The workspace adds, per group, 3 floats per row and (but the first) a (rows, C)
// partial dh, and under bf16 GEMMs one bf16 dlogits tile per thread. P = 1 is the serial path
// above.
//
// Why the gradient is formed in the same pass rather than by recomputing the logits in a separate
// backward: the logits GEMM is 2·N·V·C FLOPs, as much as each of the two gradient GEMMs, so
// recomputing it costs 4 GEMMs against the unfused path's 3 (1.33x the work). Keeping one row block's
// logits costs rows × V floats instead (12.5 MiB at rows 64, V 50257) and keeps 3 GEMMs.
//
// Accuracy: each logit is the same dot product as in the unfused path (oneDNN may block K
// differently for another M, so not the same bits); the row's sum of exponentials is accumulated tile
// by tile with a rescale whenever the max grows (kernels.h). tests/model/test_unembedding.cc states the
// bound against a double reference and checks fused and unfused against it.
// Deterministic for a fixed thread count: row blocks and tiles run in a fixed order, the groups and
// the order of the merges depend on (V, tile, P) alone, not on which thread runs a group; oneDNN fixes its
// partitioning per primitive; the row kernels' bits do not depend on the thread count. Results for
// different thread counts differ in the last bits (the sums over the vocabulary are grouped by
// thread, and the serial path's GEMMs are blocked for P threads).
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/model/matmul.h"
#include "wte/config.h"

namespace wte {

/// How the fused layer cuts the work: `rows` rows of h' per block and `tile` vocabulary ids per
/// tile (the last block and the last tile may be shorter). rows == 0: the unfused path.
/// threads: the threads the workspace has room for (the groups' statistics and partial dh, the
/// threads' bf16 dlogits tiles); a call splits the vocabulary among at most this many (1: always
/// serial).
struct UnembeddingTiles {
  size_t rows = 0;
  size_t tile = 0;
  size_t threads = 1;
  bool fused() const { return rows > 0; }
};

/// Vocabularies larger than this use the fused path when model.loss_chunk = 0 (automatic); at or
/// below it the unfused path (the (N, V) logits) is kept.
inline constexpr size_t kFusedLossMinVocab = 16384;

/// The automatic block height: 256 rows, fewer (a multiple of 16, at least 32) where a block's logits
/// (rows × V floats) would pass 64 MiB. Why 256: measured on a 2-core Zen 5 at V 50257, C 768,
/// N 8192 (README, "GPT-2's vocabulary at full batch"), blocks of 64/128/256/512/1024 rows took
/// 1.21/0.91/0.72/0.74/0.73x the unfused path's time: below ~256 rows each block's second pass over
/// W and dW (V × C each) costs more than its GEMMs gain from the cache; above it the time stays flat
/// while the workspace grows with the rows (49 MiB at 256).
size_t auto_loss_rows(size_t V);
/// The automatic tile width: as many ids as keep one tile (rows × tile floats) near 512 KiB (in L2),
/// a multiple of 16, in [256, V rounded up to 16].
size_t auto_loss_tile(size_t rows, size_t V);

/// The tiles a model of `config` uses for batches of up to N rows: model.loss_chunk (0: automatic,
/// fused only when vocab_size > kFusedLossMinVocab) and model.loss_vocab_tile (0: automatic); rows
/// are capped at N. rows == 0 means the unfused path. rows and tile depend on the config (and N
/// only through the cap), never on the thread count; threads is omp_get_max_threads() of the
/// caller (the model lays out its workspace when it reserves, at the thread count it runs with).
UnembeddingTiles resolve_loss_tiles(const ModelConfig& config, size_t N);

/// Floats of the fused layer's workspace for these tiles, with G = 1 for tiles.threads = 1, else
/// 4 × tiles.threads groups: rows × V (one block's logits) + 3 × rows × G (each group's row
/// statistics) + rows × C × (G - 1) (the partial dh of each group but the first).
size_t unembedding_workspace_floats(const UnembeddingTiles& tiles, size_t V, size_t C);

/// bf16 elements of the fused layer's bf16 workspace (bf16 GEMMs only): one dlogits tile per thread,
/// tiles.threads × rows × tile.
size_t unembedding_workspace16_elems(const UnembeddingTiles& tiles);

/// Forward only (evaluation): losses (N) written, nothing else. h (N, C); W (V, C) row-major;
/// both float32 or both with bf16 copies (GemmInput: the tiles' GEMMs then read bf16, accumulate
/// in float32). targets (N), each in [0, V) (callers validate ids first). workspace: at least
/// unembedding_workspace_floats(tiles, V, C) floats (of the logits' part, each group's first tile
/// slot is used; the partial dh are not used).
/// Returns after the stream has finished. Throws wte::Error if tiles.rows or tiles.tile is 0, or if
/// only one of h and W has a bf16 copy.
void unembedding_loss_forward(float* losses, GemmInput h, GemmInput W, const int32_t* targets,
                              size_t N, size_t V, size_t C, const UnembeddingTiles& tiles,
                              float* workspace, Gemm& gemm);

/// Forward and backward in one pass: losses (N) and dh (N, C) written (=), dW (V, C) written, or
/// added to (+=) with accumulate_dW (the model's accumulating gradient), all float32.
/// grad_scale multiplies the softmax gradient (1/N for a mean over these rows; 1/(tokens of the
/// whole batch) under gradient accumulation). dh may not overlap h, W or dW.
/// bf16 GEMMs (h and W with bf16 copies): the logits tiles are h16 · W16ᵀ; each dlogits tile, formed
/// in float32, is rounded to bf16 into workspace16 (unembedding_workspace16_elems(tiles) elements:
/// the tile of the thread that runs it) and dh, dW read that copy with W16 and h16 — the unfused bf16 path's operands, tile by tile;
/// accumulation stays float32. f32 (no bf16 copies): workspace16 is unused (may be nullptr).
/// Throws wte::Error if tiles.rows or tiles.tile is 0, if only one of h and W has a bf16 copy, or if
/// they do and workspace16 is nullptr.
void unembedding_loss_forward_backward(float* losses, float* dh, float* dW, GemmInput h,
                                       GemmInput W, const int32_t* targets, size_t N, size_t V,
                                       size_t C, float grad_scale, const UnembeddingTiles& tiles,
                                       float* workspace, uint16_t* workspace16, Gemm& gemm,
                                       bool accumulate_dW = false);

}  // namespace wte
