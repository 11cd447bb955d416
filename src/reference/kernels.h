// Scalar references for the kernels in include/wte/kernels.h: the same math as plain loops, no SIMD and no
// threads, templated on the float type F (float or double). Tests compare every Highway target with
// these; the double instantiations are the ground truth for gradient checks.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "wte/kernels.h"

namespace wte::ref {

/// hidden_states[b,t,:] = wte[ids[b,t],:] + wpe[t,:]. Shapes as wte::embedding_forward.
template <typename F>
void embedding_forward(F* hidden_states, const int32_t* ids, const F* wte, const F* wpe, size_t B,
                       size_t T, size_t C) {
  for (size_t b = 0; b < B; ++b) {
    for (size_t t = 0; t < T; ++t) {
      const size_t n = b * T + t;
      const F* wte_row = wte + static_cast<size_t>(ids[n]) * C;
      const F* wpe_row = wpe + t * C;
      F* out = hidden_states + n * C;
      for (size_t c = 0; c < C; ++c) out[c] = wte_row[c] + wpe_row[c];
    }
  }
}

/// out[n,:] = wte[ids[n],:]. Shapes as wte::embedding_gather.
template <typename F>
void embedding_gather(F* out, const int32_t* ids, const F* wte, size_t N, size_t C) {
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c) out[n * C + c] = wte[static_cast<size_t>(ids[n]) * C + c];
}

/// dwte[ids[n],:] += dhidden[n,:]. Each touched row first sums its upstream rows in increasing n,
/// then adds the sum to dwte once: the order the SIMD kernel uses, so the results are bit-identical.
template <typename F>
void embedding_backward_wte(F* dwte, const F* dhidden, const int32_t* ids, size_t N, size_t C,
                            size_t V) {
  std::vector<std::vector<size_t>> rows(V);
  for (size_t n = 0; n < N; ++n) rows[static_cast<size_t>(ids[n])].push_back(n);
  std::vector<F> acc(C);
  for (size_t v = 0; v < V; ++v) {
    if (rows[v].empty()) continue;
    for (size_t c = 0; c < C; ++c) acc[c] = dhidden[rows[v][0] * C + c];
    for (size_t k = 1; k < rows[v].size(); ++k)
      for (size_t c = 0; c < C; ++c) acc[c] += dhidden[rows[v][k] * C + c];
    for (size_t c = 0; c < C; ++c) dwte[v * C + c] += acc[c];
  }
}

/// dwpe[t,:] += sum_b dhidden[b,t,:], summed over b in increasing order, then added once.
template <typename F>
void embedding_backward_wpe(F* dwpe, const F* dhidden, size_t B, size_t T, size_t C) {
  std::vector<F> acc(C);
  for (size_t t = 0; t < T; ++t) {
    for (size_t c = 0; c < C; ++c) acc[c] = dhidden[t * C + c];
    for (size_t b = 1; b < B; ++b)
      for (size_t c = 0; c < C; ++c) acc[c] += dhidden[(b * T + t) * C + c];
    for (size_t c = 0; c < C; ++c) dwpe[t * C + c] += acc[c];
  }
}

/// Stable softmax cross-entropy, in place: logits become grad_scale * (softmax - onehot).
template <typename F>
void softmax_cross_entropy(F* logits, F* losses, const int32_t* targets, size_t N, size_t V,
                           F grad_scale) {
  for (size_t n = 0; n < N; ++n) {
    F* row = logits + n * V;
    F maxval = row[0];
    for (size_t v = 1; v < V; ++v) maxval = row[v] > maxval ? row[v] : maxval;
    F sum = 0;
    for (size_t v = 0; v < V; ++v) sum += std::exp(row[v] - maxval);
    const size_t target = static_cast<size_t>(targets[n]);
    losses[n] = maxval + std::log(sum) - row[target];
    for (size_t v = 0; v < V; ++v) {
      const F p = std::exp(row[v] - maxval) / sum;
      row[v] = grad_scale * (p - (v == target ? F(1) : F(0)));
    }
  }
}

/// losses[n] = logsumexp(logits[n]) - logits[n, targets[n]]; logits unchanged.
template <typename F>
void cross_entropy_loss(F* losses, const F* logits, const int32_t* targets, size_t N, size_t V) {
  for (size_t n = 0; n < N; ++n) {
    const F* row = logits + n * V;
    F maxval = row[0];
    for (size_t v = 1; v < V; ++v) maxval = row[v] > maxval ? row[v] : maxval;
    F sum = 0;
    for (size_t v = 0; v < V; ++v) sum += std::exp(row[v] - maxval);
    losses[n] = maxval + std::log(sum) - row[static_cast<size_t>(targets[n])];
  }
}

/// One vocabulary tile's online statistics (see wte::cross_entropy_tile_stats): tile (R, W) with
/// row stride ld holds the logits of ids [v0, v0 + W); row_max, row_sum, target_logit (R) in/out.
template <typename F>
void cross_entropy_tile_stats(const F* tile, size_t R, size_t W, size_t ld, size_t v0,
                              const int32_t* targets, F* row_max, F* row_sum, F* target_logit) {
  for (size_t r = 0; r < R; ++r) {
    const F* row = tile + r * ld;
    F m = row_max[r];
    for (size_t w = 0; w < W; ++w) m = row[w] > m ? row[w] : m;
    F s = row_sum[r];
    if (m != row_max[r] && s != F(0)) s *= std::exp(row_max[r] - m);
    for (size_t w = 0; w < W; ++w) s += std::exp(row[w] - m);
    row_max[r] = m;
    row_sum[r] = s;
    const size_t t = static_cast<size_t>(targets[r]);
    if (t >= v0 && t < v0 + W) target_logit[r] = row[t - v0];
  }
}

/// One tile's softmax gradient in place (see wte::cross_entropy_tile_grad):
/// tile[r,w] = grad_scale * (exp(tile[r,w] - row_max[r]) / row_sum[r] - [v0 + w == targets[r]]).
template <typename F>
void cross_entropy_tile_grad(F* tile, size_t R, size_t W, size_t ld, size_t v0,
                             const int32_t* targets, const F* row_max, const F* row_sum,
                             F grad_scale) {
  for (size_t r = 0; r < R; ++r) {
    F* row = tile + r * ld;
    const size_t t = static_cast<size_t>(targets[r]);
    for (size_t w = 0; w < W; ++w) {
      const F p = std::exp(row[w] - row_max[r]) / row_sum[r];
      row[w] = grad_scale * (p - (v0 + w == t ? F(1) : F(0)));
    }
  }
}

/// AdamW step, PyTorch's formula (see wte::adamw_update). step is 1-based. Each gradient is
/// multiplied by grad_scale (the clipping factor) as it is read.
template <typename F>
void adamw_update(F* params, const F* grads, F* m, F* v, size_t n, F lr, F beta1, F beta2, F eps,
                  F weight_decay, int64_t step, F grad_scale = F(1)) {
  const F bias1 = F(1) - std::pow(beta1, static_cast<F>(step));
  const F bias2 = F(1) - std::pow(beta2, static_cast<F>(step));
  for (size_t i = 0; i < n; ++i) {
    const F g = grads[i] * grad_scale;
    m[i] = beta1 * m[i] + (F(1) - beta1) * g;
    v[i] = beta2 * v[i] + (F(1) - beta2) * g * g;
    const F m_hat = m[i] / bias1;
    const F v_hat = v[i] / bias2;
    params[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * params[i]);
  }
}

/// Σ x[i]² in double in the order wte::sum_of_squares fixes: blocks of 65536
/// elements; in a block, 16 partial sums s[j] over the elements at offsets ≡ j (mod 16) of the
/// block's whole groups of 16, each in increasing offset; the block's sum is
/// (((s[0] + s[1]) + s[2]) + ... + s[15]) plus its last (length mod 16) elements in order; the
/// blocks' sums are added in block order to 0.0. Each square double(x)·double(x) is exact.
inline double sum_of_squares(const float* x, size_t n) {
  constexpr size_t kBlock = size_t{1} << 16;
  double total = 0.0;
  for (size_t b0 = 0; b0 < n; b0 += kBlock) {
    const size_t len = n - b0 < kBlock ? n - b0 : kBlock, whole = len / 16 * 16;
    double s[16] = {};
    for (size_t i = 0; i < whole; ++i) {
      const double xi = x[b0 + i];
      s[i % 16] += xi * xi;
    }
    double block = s[0];
    for (size_t j = 1; j < 16; ++j) block += s[j];
    for (size_t i = whole; i < len; ++i) {
      const double xi = x[b0 + i];
      block += xi * xi;
    }
    total += block;
  }
  return total;
}

// --- Transformer block kernels (contracts: include/wte/kernels.h) ---------------------------------

/// GPT-2's norm(). out (N,C), mean, rstd (N) written.
template <typename F>
void layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* g, const F* b, size_t N,
                       size_t C, F eps) {
  for (size_t n = 0; n < N; ++n) {
    const F* x = inp + n * C;
    F m = 0;
    for (size_t c = 0; c < C; ++c) m += x[c];
    m /= static_cast<F>(C);
    F var = 0;
    for (size_t c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    var /= static_cast<F>(C);
    const F s = F(1) / std::sqrt(var + eps);
    for (size_t c = 0; c < C; ++c) out[n * C + c] = (x[c] - m) * s * g[c] + b[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

/// dinp, dg, db accumulated (+=).
template <typename F>
void layernorm_backward(F* dinp, F* dg, F* db, const F* dout, const F* inp, const F* g,
                        const F* mean, const F* rstd, size_t N, size_t C) {
  for (size_t n = 0; n < N; ++n) {
    const F* x = inp + n * C;
    const F* dy = dout + n * C;
    F mean_dxhat = 0, mean_dxhat_xhat = 0;
    for (size_t c = 0; c < C; ++c) {
      const F xhat = (x[c] - mean[n]) * rstd[n];
      const F dxhat = dy[c] * g[c];
      mean_dxhat += dxhat;
      mean_dxhat_xhat += dxhat * xhat;
    }
    mean_dxhat /= static_cast<F>(C);
    mean_dxhat_xhat /= static_cast<F>(C);
    for (size_t c = 0; c < C; ++c) {
      const F xhat = (x[c] - mean[n]) * rstd[n];
      const F dxhat = dy[c] * g[c];
      dg[c] += dy[c] * xhat;
      db[c] += dy[c];
      dinp[n * C + c] += rstd[n] * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
}

/// GPT-2's tanh GELU.
template <typename F>
F gelu(F x) {
  const F k = static_cast<F>(0.79788456080286535588);  // sqrt(2/pi)
  return F(0.5) * x * (F(1) + std::tanh(k * (x + F(0.044715) * x * x * x)));
}
template <typename F>
F gelu_grad(F x) {
  const F k = static_cast<F>(0.79788456080286535588);
  const F t = std::tanh(k * (x + F(0.044715) * x * x * x));
  return F(0.5) * (F(1) + t) + F(0.5) * x * (F(1) - t * t) * k * (F(1) + F(3 * 0.044715) * x * x);
}
template <typename F>
void gelu_forward(F* out, const F* inp, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = gelu(inp[i]);
}
/// dinp written.
template <typename F>
void gelu_backward(F* dinp, const F* inp, const F* dout, size_t n) {
  for (size_t i = 0; i < n; ++i) dinp[i] = dout[i] * gelu_grad(inp[i]);
}

/// Causal softmax over j <= t of scale * preatt; zeros for j > t.
template <typename F>
void attention_softmax_forward(F* att, const F* preatt, size_t Z, size_t T, F scale) {
  for (size_t r = 0; r < Z * T; ++r) {
    const size_t t = r % T;
    const F* p = preatt + r * T;
    F* a = att + r * T;
    F mx = scale * p[0];
    for (size_t j = 1; j <= t; ++j) mx = scale * p[j] > mx ? scale * p[j] : mx;
    F sum = 0;
    for (size_t j = 0; j <= t; ++j) {
      a[j] = std::exp(scale * p[j] - mx);
      sum += a[j];
    }
    for (size_t j = 0; j <= t; ++j) a[j] /= sum;
    for (size_t j = t + 1; j < T; ++j) a[j] = 0;
  }
}

/// dpreatt written (zeros for j > t).
template <typename F>
void attention_softmax_backward(F* dpreatt, const F* datt, const F* att, size_t Z, size_t T,
                                F scale) {
  for (size_t r = 0; r < Z * T; ++r) {
    const size_t t = r % T;
    const F* da = datt + r * T;
    const F* a = att + r * T;
    F* dp = dpreatt + r * T;
    F dot = 0;
    for (size_t j = 0; j <= t; ++j) dot += a[j] * da[j];
    for (size_t j = 0; j <= t; ++j) dp[j] = scale * a[j] * (da[j] - dot);
    for (size_t j = t + 1; j < T; ++j) dp[j] = 0;
  }
}

template <typename F>
void residual_forward(F* out, const F* a, const F* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

/// dbias accumulated (+=); each column's rows summed in blocks of wte::gradient_rows_per_block(N)
/// (increasing n in a block, the blocks' sums in block order), as wte::bias_backward.
template <typename F>
void bias_backward(F* dbias, const F* dout, size_t N, size_t OC) {
  const size_t rows_per_block = wte::gradient_rows_per_block(N);
  for (size_t j = 0; j < OC; ++j) {
    F sum = 0;
    for (size_t n0 = 0; n0 < N; n0 += rows_per_block) {
      F part = 0;
      for (size_t n = n0; n < N && n < n0 + rows_per_block; ++n) part += dout[n * OC + j];
      sum += part;
    }
    dbias[j] += sum;
  }
}

/// float32 -> bfloat16 bits, round to nearest, ties to even; NaN stays NaN (quiet bit set).
/// The contract of wte::convert_f32_to_bf16, one value at a time.
inline uint16_t f32_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/// The float32 a bfloat16 stands for (exact: its bits followed by 16 zero bits).
inline float bf16_to_f32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

inline void convert_f32_to_bf16(uint16_t* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

/// The tile product of simd/tile_gemm_bf16.h (VDPBF16PS on pairs of k), one entry at a time:
/// c (M,N) = or += a (M,K) · b (K,N), a row-major bfloat16 bits, b packed ((K+1)/2, N, 2). Per
/// entry, pair by pair in increasing p: c += a_{2p+1}·b_{2p+1}, then c += a_{2p}·b_{2p} (float32
/// additions of exact products), denormal inputs read as zero and denormal sums flushed to zero.
inline void tile_gemm_bf16_pairs(float* c, size_t ldc, const uint16_t* a, size_t lda,
                                 const uint16_t* b, size_t ldb, size_t M, size_t N, size_t K,
                                 bool accumulate) {
  const auto daz = [](uint16_t x) {  // a denormal (or zero) bfloat16 reads as a zero of its sign
    return (x & 0x7F80u) == 0 ? static_cast<uint16_t>(x & 0x8000u) : x;
  };
  const auto ftz = [](float x) { return std::fabs(x) < 0x1p-126f ? std::copysign(0.0f, x) : x; };
  for (size_t m = 0; m < M; ++m)
    for (size_t n = 0; n < N; ++n) {
      float s = accumulate ? ftz(c[m * ldc + n]) : 0.0f;
      for (size_t p = 0; p < (K + 1) / 2; ++p) {
        const uint16_t* pair = b + p * ldb + 2 * n;
        const bool half = 2 * p + 1 == K;  // K odd: a's entry K is not read
        const float a1 = half ? 0.0f : bf16_to_f32(daz(a[m * lda + 2 * p + 1]));
        s = ftz(s + a1 * bf16_to_f32(daz(pair[1])));
        s = ftz(s + bf16_to_f32(daz(a[m * lda + 2 * p])) * bf16_to_f32(daz(pair[0])));
      }
      c[m * ldc + n] = s;
    }
}

/// wte::fma_chains's arithmetic for `lanes` lanes, in F: every chain and lane runs
/// acc = fma(acc, mul, add) from start + (chain·lanes + lane)/1024; the sum of all, in order.
template <typename F>
F fma_chains(F start, F mul, F add, size_t iterations, size_t lanes) {
  F sum = 0;
  for (size_t c = 0; c < wte::kFmaChains; ++c)
    for (size_t i = 0; i < lanes; ++i) {
      F acc = start + static_cast<F>(c * lanes + i) / 1024;
      for (size_t it = 0; it < iterations; ++it) acc = std::fma(acc, mul, add);
      sum += acc;
    }
  return sum;
}

}  // namespace wte::ref
