// wte's hand-vectorized kernels. The SIMD versions use Highway with dynamic dispatch (the best target
// this CPU supports is chosen at run time); each has a scalar reference with the same signature in
// namespace wte::ref, templated on the float type so tests and gradient checks can run it in double.
//
// No Highway types appear here: callers never see SIMD.
//
// Shapes use GPT-2's letters: B batch, T time (sequence), C channels (d_model), V vocab_size;
// N = B*T rows. All matrices are row-major and contiguous. Sizes are size_t, token ids int32_t.
// No alignment is required of any pointer; no kernel reads or writes past the sizes it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace wte {

// ------------------------------------------------------------------------------------------------
// Embedding forward: gather + position add.
//   hidden_states[b,t,:] = wte[ids[b,t],:] + wpe[t,:]
// hidden_states (B,T,C) out; ids (B,T); wte (V,C); wpe (>=T, C).
// Precondition: every id in [0, V). Callers validate ids first (wte::check_token_ids); the kernel
// does not re-check. Parallel over rows with OpenMP. Exact (one float add per element).
void embedding_forward(float* hidden_states, const int32_t* ids, const float* wte, const float* wpe,
                       size_t B, size_t T, size_t C);

// Embedding gather, the lookup without positions (torch.nn.functional.embedding's forward):
//   out[n,:] = wte[ids[n],:]   for n in [0, N)
// out (N,C) written; ids (N), each in [0, V) (not re-checked, as embedding_forward); wte (V,C).
// out may not overlap wte. Exact copies (bit patterns kept, -0.0 and NaN included) on every target
// and for any thread count. Parallel over rows with OpenMP (static split), prefetching table rows
// ahead. `stores`: kCached writes out with ordinary stores (it stays in the cache for the next
// layer); kStreaming with non-temporal stores (no read of the destination lines, the cache keeps
// other data; out is in memory afterwards); kAuto streams when gather_streams(N, C). (simd/gather.cc)
enum class GatherStores { kAuto, kCached, kStreaming };
void embedding_gather(float* out, const int32_t* ids, const float* wte, size_t N, size_t C,
                      GatherStores stores = GatherStores::kAuto);
/// True if embedding_gather's kAuto streams: the output (N·C·4 bytes) exceeds a quarter of
/// last_level_cache_bytes().
bool gather_streams(size_t N, size_t C);
/// The last-level cache's size in bytes: sysconf(_SC_LEVEL3_CACHE_SIZE) capped at 32 MiB (glibc
/// may report a whole package's L3, not what one core complex shares); 32 MiB if unknown.
size_t last_level_cache_bytes();

// Memory probes of `wte profile`: the machine's limits measured with the same vector loads and
// stores as the kernels, not libc's memcpy. (simd/dev/memory_probes.cc)
//   stream_copy  dst[0, n) = src[0, n) exactly, non-temporal stores, parallel over 1 MiB chunks;
//                dst and src may not overlap.
//   stream_read  Σ src[0, n): every float loaded once; the sum's order depends on the target and
//                the thread count (a probe: exact only when every partial sum is).
//   gather_read  Σ over n < N of the elements of wte[ids[n], :], rows prefetched as in
//                embedding_gather: the random-row read at the bandwidth the hardware allows.
//                ids in [0, V) (not checked); same order caveat as stream_read.
void stream_copy(float* dst, const float* src, size_t n);
float stream_read(const float* src, size_t n);
float gather_read(const int32_t* ids, const float* wte, size_t N, size_t C);

// ------------------------------------------------------------------------------------------------
// Lookup backward of the token table: a sparse-row scatter-add.
//   dwte[ids[n],:] += dhidden[n,:]   for n in [0, N); duplicate ids accumulate.
// Only rows whose ids occur are read or written. Deterministic: ids are counting-sorted into
// per-row segments (positions in increasing order), each touched row's upstream rows are summed
// in that fixed order and added to dwte with one read-modify-write, in parallel over rows. Rows
// with one position (most rows for spread ids) are a single add whatever the order, so without
// dwte_sumsq they are done in position order instead: dhidden is then read front to back.
// The result is bit-identical for any thread count.
// dwte (V,C) accumulated; dhidden (N,C); ids (N), each in [0, V).
// `workspace` holds the sort buffers between calls so no step allocates (may start empty); they
// grow when too small and are never shrunk. N must be below 2^31 (positions are stored as int32_t).
struct ScatterWorkspace {
  std::vector<int32_t> row_start;  // (V+1) segment offsets, counting sort
  std::vector<int32_t> order;      // (N) positions sorted by id, stable
  std::vector<int32_t> touched;    // distinct ids, increasing
  std::vector<int32_t> hot;        // touched rows with >= kScatterHotCount positions, largest first
  std::vector<int32_t> multi;      // touched rows with 2 .. kScatterHotCount-1 positions, increasing
  std::vector<float> scratch;      // per-thread partial sums (kPrivateHot, the fused lazy AdamW)
};
//
// dwte_sumsq (optional): the tied model's gradient-norm block sums, computed on the way. When not
// null, dwte_sumsq[b] = Σ dwte[i]² (in double) over every block b = [b·65536, (b+1)·65536) of
// floats wholly inside dwte (floor(V·C / 65536) values), of dwte's values after the scatter, each
// in sum_of_squares' order: bit for bit sum_of_squares_partials(dwte, V·C, ·)'s first values. The
// rows are scattered in chunks of whole rows and whole blocks (256 rows at C = 256 or 768), and
// each chunk's blocks are summed while the chunk is in cache: no pass over dwte of its own for the
// norm (grad_norm takes the sums). Returns the number of sums written (0 if dwte_sumsq is null).
size_t embedding_backward_wte(float* dwte, const float* dhidden, const int32_t* ids, size_t N,
                              size_t C, size_t V, ScatterWorkspace* workspace,
                              double* dwte_sumsq = nullptr);

// ------------------------------------------------------------------------------------------------
// Scatter strategies for the same lookup backward (dwte[ids[n],:] += dhidden[n,:]); `wte profile
// scatter` compares them. Every strategy gives the reference's result exactly when the sums are
// exact (tests use multiples of 1/64); with general floats they differ only in rounding order:
//   kSerial      one thread, n in increasing order: dwte[ids[n]] += dhidden[n] (a row RMW per n).
//                Deterministic.
//   kSorted      embedding_backward_wte: counting sort into per-row segments, one reduction and
//                one RMW per touched row, parallel over rows; hot rows (>= kScatterHotCount
//                positions) are split into column blocks and scheduled first, largest first.
//                Bit-identical to ref::embedding_backward_wte for any thread count.
//   kRowRange    thread t of P owns rows [t*V/P, (t+1)*V/P): every thread scans all ids and adds
//                the positions of its own rows in increasing n. Same bits as kSerial for any P.
//   kPrivateHot  like kSorted for cold rows; each hot row's positions are split into P chunks
//                summed by P threads into private buffers, then combined in thread order. The
//                grouping depends on P: deterministic for a fixed thread count only.
//   kAuto        choose_scatter_strategy(). Training always runs kSorted (embedding_backward_wte);
//                the others (simd/dev/scatter_strategies.cc) are kept to compare against.
// Same arguments and preconditions as embedding_backward_wte.
struct AdamWParams;  // below
enum class ScatterStrategy { kAuto, kSerial, kSorted, kRowRange, kPrivateHot };
inline constexpr size_t kScatterHotCount = 16;  // positions that make a row "hot"

/// "auto", "serial", "sorted", "row-range", "private-hot".
const char* scatter_strategy_name(ScatterStrategy s);
/// The strategy named `name` (as scatter_strategy_name); returns false if there is none.
bool parse_scatter_strategy(const char* name, ScatterStrategy* out);
/// True if the strategy's bits do not depend on the thread count.
bool scatter_strategy_deterministic(ScatterStrategy s);
/// The automatic choice, from the shape and the ids, never from the thread count (the result's bits
/// must not depend on it, and kSerial and kSorted round differently): kSerial when the work is tiny
/// (N*C < 16384: the O(V) sort set-up would dominate), otherwise kSorted (balanced by hot-row column
/// blocks for any id distribution). Never kAuto.
ScatterStrategy choose_scatter_strategy(const int32_t* ids, size_t N, size_t C, size_t V);
void embedding_backward_wte_strategy(ScatterStrategy strategy, float* dwte, const float* dhidden,
                                     const int32_t* ids, size_t N, size_t C, size_t V,
                                     ScatterWorkspace* workspace);

// ------------------------------------------------------------------------------------------------
// Row-sparse lookup backward for an untied wte (no V×C gradient exists): the touched rows' sums.
//   touched[k] = k-th distinct id (increasing), k < *num_touched <= min(N, V)
//   grad_rows[k,:] = sum_{n: ids[n] == touched[k]} dhidden[n,:]   (increasing n, as the reference)
// grad_rows (>= min(N,V), C) out; touched (>= min(N,V)) out. Bit-identical for any thread count.
void embedding_backward_rows(float* grad_rows, int32_t* touched, size_t* num_touched,
                             const float* dhidden, const int32_t* ids, size_t N, size_t C, size_t V,
                             ScatterWorkspace* workspace);

// Lazy AdamW on the rows of a (V,C) table that a step touched (the row-sparse update of an untied
// wte). For k < num_touched and row r = touched[k], exactly adamw_update on that row:
//   adamw_update(params + r*C, grad_rows + k*C, m + r*C, v + r*C, C, hp)
// Rows not in `touched` are not read or written: their m and v do not decay and weight decay does
// not shrink them that step (semantics of PyTorch's SparseAdam, plus AdamW's decoupled decay on
// touched rows only). Bias correction uses the global step hp.step, not a per-row count.
// params, m, v (V,C); grad_rows (num_touched, C); touched distinct ids in [0, V). Parallel over rows.
// Each gradient is multiplied by grad_scale as it is read (the clipping factor, as adamw_update).
void adamw_update_rows(float* params, float* m, float* v, const float* grad_rows,
                       const int32_t* touched, size_t num_touched, size_t C, const AdamWParams& hp,
                       float grad_scale = 1.0f);

// The two above fused: each touched row's gradient is summed into a per-thread C-float scratch and
// the row is updated at once, so the gradient is never stored. Same bits as embedding_backward_rows
// followed by adamw_update_rows. params, m, v (V,C); dhidden (N,C); ids (N) in [0, V).
void embedding_backward_adamw_lazy(float* params, float* m, float* v, const float* dhidden,
                                   const int32_t* ids, size_t N, size_t C, size_t V,
                                   const AdamWParams& hp, ScatterWorkspace* workspace);

// Position backward: dwpe[t,:] += sum_b dhidden[b,t,:], the sum over b in increasing order
// (deterministic for any thread count; parallel over t).
// dwpe (>=T, C) accumulated; dhidden (B,T,C).
void embedding_backward_wpe(float* dwpe, const float* dhidden, size_t B, size_t T, size_t C);

// ------------------------------------------------------------------------------------------------
// Numerically stable softmax cross-entropy with its gradient, fused, in place.
// For each row n:  m = max_v logits[n,v];  lse = m + log(sum_v exp(logits[n,v] - m))
//   losses[n] = lse - logits[n, targets[n]]
//   logits[n,v] <- grad_scale * (softmax(logits[n])[v] - [v == targets[n]])   (dlogits)
// Subtracting the row max first keeps exp() in (0, 1]: no inf or NaN for any finite logits.
// logits (N,V) in: logits, out: dlogits; targets (N), each in [0, V); losses (N) out.
// grad_scale is usually 1/N for a mean loss. Parallel over rows.
// Accuracy: not bit-identical to the reference (Highway's Exp is within 1 ulp of exp, the row sum
// is taken lane-wise); the loss is formed as (m - logits[n,target]) + log(sum), which is exact for
// ties such as [1000, 1000] -> ln 2. Worst-case error bound: tests/simd/test_simd_kernels.cc.
// dlogits16 (N,V), optional (bf16 GEMMs): also receives dlogits rounded to bf16, the bits
// convert_f32_to_bf16 would give, written row by row while each row is in cache.
void softmax_cross_entropy(float* logits, float* losses, const int32_t* targets, size_t N, size_t V,
                           float grad_scale, uint16_t* dlogits16 = nullptr);

// Forward only (evaluation): losses[n] as above; logits are not modified.
void cross_entropy_loss(float* losses, const float* logits, const int32_t* targets, size_t N,
                        size_t V);

// Cross-entropy over vocabulary tiles (the fused unembedding, src/model/unembedding.h): the logits of
// R rows arrive one tile of W vocabulary ids [v0, v0 + W) at a time, so no row is ever whole.
// tile (R, W) row-major with row stride ld >= W; targets (R), each in [0, V) for the whole V.
//
// Online statistics (one tile, in increasing v0 order over a row's tiles): for each row r,
//   m' = max(row_max[r], max_w tile[r,w])
//   row_sum[r] = row_sum[r]·exp(row_max[r] - m') + Σ_w exp(tile[r,w] - m');  row_max[r] = m'
//   target_logit[r] = tile[r, targets[r] - v0]   if targets[r] is in [v0, v0 + W), else unchanged.
// Start a row with row_max = -inf, row_sum = 0 (the first tile then only sums). After the last
// tile: loss = (row_max - target_logit) + log(row_sum), the unfused kernel's formula. The rescale
// runs only when the max grows (row_sum·exp(0) is skipped), through the same hn::Exp as the terms.
// row_max, row_sum, target_logit (R) in/out. Parallel over rows; bits independent of the thread
// count. (simd/cross_entropy_tiles.cc)
void cross_entropy_tile_stats(const float* tile, size_t R, size_t W, size_t ld, size_t v0,
                              const int32_t* targets, float* row_max, float* row_sum,
                              float* target_logit);

// The softmax gradient of one tile, in place, from a row's final statistics:
//   tile[r,w] <- grad_scale · (exp(tile[r,w] - row_max[r]) / row_sum[r] - [v0 + w == targets[r]])
// the target entry as grad_scale · (p - 1), exactly as softmax_cross_entropy forms dlogits.
// Parallel over rows; bits independent of the thread count.
void cross_entropy_tile_grad(float* tile, size_t R, size_t W, size_t ld, size_t v0,
                             const int32_t* targets, const float* row_max, const float* row_sum,
                             float grad_scale);

// ------------------------------------------------------------------------------------------------
// AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization", Algorithm 2), as in
// PyTorch's torch.optim.AdamW:
//   m = beta1*m + (1-beta1)*g;  v = beta2*v + (1-beta2)*g*g
//   m_hat = m / (1 - beta1^step);  v_hat = v / (1 - beta2^step)
//   param -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * param)
// step counts from 1. params, grads, m, v: (n). Parallel over elements.
// grad_scale: every g is read as grads[i] * grad_scale (one float multiply), the factor of global-norm
// clipping, so clipping needs no pass that rescales the gradients in memory; with the default 1 the
// bits are those of no scaling (x * 1.0f is exact). grads is not modified.
// Bit-identical to ref::adamw_update<float> on every target (same operations in the same order).
// params16 (n), if not null: also receives the new params' bf16 bits (convert_f32_to_bf16's), so
// the bf16 GEMMs' copy of the weights needs no pass of its own.
struct AdamWParams {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;
  int64_t step;  // 1-based
};
void adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                  const AdamWParams& hp, float grad_scale = 1.0f, uint16_t* params16 = nullptr);

// Σ_i x[i]² over x (n), in double (each square exact): the squared L2 norm gradient clipping needs.
// The summation order is fixed (ref::sum_of_squares states it: blocks of 65536 floats, 16 partial
// sums per block, blocks added in order), so the result is bit-identical on every Highway target
// and for any thread count. Parallel over blocks with OpenMP when n > 65536. Relative error below
// n·2^-52 (a sum of non-negative doubles).
double sum_of_squares(const float* x, size_t n);
// Floats per block of sum_of_squares' fixed order.
constexpr size_t kSumOfSquaresBlock = size_t{1} << 16;
// The block sums of sum_of_squares: partials[b] = Σ x[i]² over [b·65536, min(n, (b+1)·65536)),
// each in sum_of_squares' order within the block, ceil(n / 65536) values (nothing for n = 0).
// Added in block order from 0.0 they are sum_of_squares(x, n), bit for bit, so blocks computed on
// different ranks (each starting at a multiple of 65536) combine to one process's result.
// Parallel over blocks with OpenMP; bit-identical for any thread count and target.
void sum_of_squares_partials(const float* x, size_t n, double* partials);

// ================================================================================================
// Transformer block kernels (GPT-2's block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))).
// Source of the math: GPT-2's model.py (Radford et al. 2019): norm(), gelu(), mask_attn_weights(),
// softmax(). Argument order as every layer here: outputs (and saved values) first, then inputs, then
// weights, then sizes. Backward kernels say whether they write (=) or accumulate (+=) each output.
// ================================================================================================

// LayerNorm forward, GPT-2's norm(): biased variance, epsilon inside the square root.
//   mean[n] = (1/C) Σ_c inp[n,c];  rstd[n] = 1 / sqrt((1/C) Σ_c (inp[n,c] - mean[n])² + eps)
//   out[n,c] = (inp[n,c] - mean[n]) * rstd[n] * g[c] + b[c]
// out (N,C) written; mean, rstd (N) written (saved for backward); inp (N,C); g, b (C).
// out may not alias inp. Parallel over rows.
// out16 (N,C), optional (bf16 GEMMs): also receives out rounded to bf16 (the bits
// convert_f32_to_bf16 would give), row by row while each row is in cache. With out16, out may be
// null: only the bf16 copy is written (what the bf16 GEMMs read). Likewise for the
// optional bf16 outputs of gelu_forward, gelu_backward and the attention softmax below.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* g,
                       const float* b, size_t N, size_t C, float eps, uint16_t* out16 = nullptr);

// LayerNorm backward. With xhat = (inp - mean) * rstd and dxhat = dout * g:
//   dinp[n,c] += rstd[n] * (dxhat[n,c] - mean_c(dxhat[n]) - xhat[n,c] * mean_c(dxhat[n] * xhat[n]))
//   dg[c] += Σ_n dout[n,c] * xhat[n,c];   db[c] += Σ_n dout[n,c]
// All three accumulate (+=): dinp is the residual stream's gradient. The sums over n are taken in
// fixed row blocks combined in block order, so the bits do not depend on the thread count.
// dinp (N,C); dg, db (C); dout, inp (N,C); g (C); mean, rstd (N) from the forward. No output may
// alias an input. dinp16 (N,C), optional: the bf16 copy of the updated dinp (the next GEMM's
// input under bf16 GEMMs), written row by row while each row is in cache.
void layernorm_backward(float* dinp, float* dg, float* db, const float* dout, const float* inp,
                        const float* g, const float* mean, const float* rstd, size_t N, size_t C,
                        uint16_t* dinp16 = nullptr);

// GELU, GPT-2's tanh form: gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x³))).
// out, inp (n); out may alias inp. Parallel over elements. out may be null when out16 is not:
// only the bf16 copy is written (the bf16 GEMMs read nothing else).
void gelu_forward(float* out, const float* inp, size_t n, uint16_t* out16 = nullptr);

// GELU backward: dinp = dout * gelu'(inp) (written, not accumulated; may alias dout).
// gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh²(u)) sqrt(2/pi) (1 + 3·0.044715 x²),
// u = sqrt(2/pi) (x + 0.044715 x³).
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n,
                   uint16_t* dinp16 = nullptr);

// Causal softmax of attention scores, per row t of each of Z = B·NH (T,T) matrices:
//   att[z,t,j] = exp(scale·preatt[z,t,j] - mx) / Σ_{k<=t} exp(scale·preatt[z,t,k] - mx),  j <= t
//   att[z,t,j] = 0                                                                         j >  t
// with mx = max_{k<=t} scale·preatt[z,t,k]. Entries j > t of preatt are never used (they may hold
// anything, NaN included; a vector load may touch them, its lanes are discarded). preatt, att
// (Z,T,T), rows contiguous; att may alias preatt. scale is 1/sqrt(head size). Parallel over rows.
// A row's bits depend only on its own live entries, not on T (causality: appending tokens changes
// no earlier row).
void attention_softmax_forward(float* att, const float* preatt, size_t Z, size_t T, float scale,
                               uint16_t* att16 = nullptr);

// Its backward: for j <= t
//   dpreatt[z,t,j] = scale · att[z,t,j] · (datt[z,t,j] - Σ_{k<=t} att[z,t,k] · datt[z,t,k])
// and dpreatt[z,t,j] = 0 for j > t (written). datt and att entries j > t are never used.
// dpreatt, datt, att (Z,T,T); dpreatt may alias datt.
void attention_softmax_backward(float* dpreatt, const float* datt, const float* att, size_t Z,
                                size_t T, float scale, uint16_t* dpreatt16 = nullptr);

// float32 -> bfloat16, round to nearest, ties to even (model.matmul_precision = bf16: the GEMMs'
// inputs). dst[i] = the bf16 bits (the top 16 bits of the float32 it stands for) nearest src[i]:
// ±Inf and ±0 kept, subnormals rounded (never flushed), finite values beyond bf16's largest
// rounded to ±Inf, NaN stays NaN (sign and top payload kept, quiet bit set). dst (n), src (n);
// they may not overlap. Parallel over blocks with OpenMP; every target gives the reference's bits.
// (simd/bf16.cc)
void convert_f32_to_bf16(uint16_t* dst, const float* src, size_t n);

// Residual add: out = a + b, elementwise (n). out may alias a or b.
void residual_forward(float* out, const float* a, const float* b, size_t n);

// Rows per block of a parameter gradient's sum over the N = B·T rows (bias_backward, and
// layernorm_backward's dg and db): each block of rows is summed in increasing row order, then the
// blocks' sums in block order. max(16, ceil(N / 64)): at most 64 blocks, so a column's sum rounds
// like one of about N/64 + 64 terms instead of N (an error bound of (N/64 + 64)·u·Σ|terms|, u =
// 2^-24: blocked summation, Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
// section 4.2), which keeps these gradients as close to float64 as a BLAS's blocked sums.
inline size_t gradient_rows_per_block(size_t N) {
  const size_t per_block = (N + 63) / 64;
  return per_block > 16 ? per_block : 16;
}

// Bias gradient of a linear layer dout = inp · w + bias: dbias[j] += Σ_n dout[n,j] (accumulates).
// Each column is summed over n in blocks of gradient_rows_per_block(N) rows (increasing n in a
// block, blocks in order; threads split the columns, never the rows), so the bits equal
// ref::bias_backward<float>'s for any thread count. dbias (OC); dout (N, OC).
void bias_backward(float* dbias, const float* dout, size_t N, size_t OC);

// ------------------------------------------------------------------------------------------------
// The CPU's float32 FMA limit (wte profile's "FMA limit"): kFmaChains independent vectors of
// accumulators, each lane running acc = fma(acc, mul, add) `iterations` times from
// start + (chain·lanes + lane)/1024, on registers only (no memory in the loop). Returns the float
// sum of every lane of every chain (chains in order, lanes in order) and the target's lane count
// in *lanes: kFmaChains × lanes × iterations FMAs of 2 FLOPs each. Targets without FMA (SSE4,
// SCALAR) multiply and add (same sum within rounding). Scalar reference: ref::fma_chains.
inline constexpr size_t kFmaChains = 12;
float fma_chains(float start, float mul, float add, size_t iterations, size_t* lanes);

// ------------------------------------------------------------------------------------------------
// The Highway target (an HWY_* bit such as HWY_AVX3; int64_t, never 32 bits) that dynamic dispatch
// currently picks for these kernels. For tests that force each target and for logs; name it with
// hwy::TargetName from hwy/targets.h.
int64_t simd_dispatch_target();

// ------------------------------------------------------------------------------------------------
// Scalar references: same math, plain loops, no OpenMP, templated on the float type.
// Defined in src/reference/kernels.h (header-only so double instantiations need no extra code).
}  // namespace wte
