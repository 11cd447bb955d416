// A plain-loop reference of the whole model in include/wte/model.h: the same math, no SIMD, no oneDNN, no
// threads, templated on the float type F (float or double). The double instantiation is the ground
// truth for gradient checks and for judging the float32 production wte::Model.
//
//   x_0           = wte[x] + wpe[t]             (N,C)   N = B·T; hidden_states = residual(0)
//   for l = 0..n_layer-1 (GPT-2's block(), see block_forward):
//     x_{l+1}     = block_l(x_l)                (N,C)   residual(l+1)
//   h'            = ln_f(x_{n_layer})           (N,C)   optional; identity when ln_f is off
//   logits        = h' · wteᵀ                   (N,V)   tied lm_head (or h' · lm_headᵀ, untied)
//   loss          = mean_n cross_entropy(logits[n], targets[n])
//
// Source: GPT-2's model.py (Radford et al. 2019): model() (`h = tf.gather(wte, X) +
// tf.gather(wpe, positions_for(X, past))`, the blocks, `h = norm(h, 'ln_f')`, `logits =
// tf.matmul(h_flat, wte, transpose_b=True)`), block(), attn(), mlp(), gelu() and norm():
//   u = mean(x);  s = mean((x - u)²)  (biased variance);  y = (x - u) / sqrt(s + eps) · g + b
//
// A block (n_layer = 0 is the embedding-only model, exactly as before blocks existed):
//   a   = ln_1(x)                                  (N,C)
//   qkv = a · c_attn/w + c_attn/b                  (N,3C)  columns [q | k | v], head h of q at
//                                                          columns h·hs..(h+1)·hs-1 (hs = C/NH)
//   att = causal_softmax(q·kᵀ / √hs) per head      (B,NH,T,T)
//   y   = att · v, heads concatenated back to C    (N,C)
//   x   = x + y · attn/c_proj/w + attn/c_proj/b    (N,C)
//   m   = ln_2(x)                                  (N,C)
//   f   = gelu(m · c_fc/w + c_fc/b)                (N,4C)  GPT-2's tanh GELU
//   x   = x + f · mlp/c_proj/w + mlp/c_proj/b      (N,C)
// Linear weights are stored (in, out) like GPT-2's conv1d, so y = x · w + b is a row-major matmul.
// LayerNorm, GELU, the causal softmax, the residual add and the bias gradient are the double
// instantiations of src/reference/kernels.h's scalar references; the matmuls are plain loops here.
//
// Backward gives the full analytic gradient of every parameter. wte gets BOTH paths, added into one
// tensor: the unembedding dlogitsᵀ · h' (dense, every row) and the lookup scatter of dhidden into
// the rows whose ids occur in the batch (duplicates accumulate).
//
// Untied variant: when ModelParams::lm_head is not empty, logits = h' · lm_headᵀ and wte gets only
// the lookup path. The tied model's dwte is exactly untied dwte + dlm_head at lm_head = wte (chain
// rule), which is how src/analysis/gradcheck.h checks each path of the tied sum on its own.
//
// Each op is also a free function (layernorm_*, unembedding_*, below, and the embedding and
// cross-entropy ops of src/reference/kernels.h), so tests can check them one by one.
//
// Any shapes (V, C, n_ctx, B, T >= 1, T <= n_ctx; n_head dividing C) are accepted, so a user-facing gradcheck can be
// built on top of this. Cost is O(N·V·C + n_layer·(N·C² + B·T²·C)) with plain loops: meant for small shapes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "src/model/parameters.h"
#include "src/reference/kernels.h"
#include "wte/data.h"
#include "wte/error.h"

namespace wte::ref {

/// One named tensor of a ModelParams or ModelGrads, in the production arena's order and with its
/// names ("wte", "wpe", then per block l "h{l}/ln_1/g" ... "h{l}/mlp/c_proj/b" in GPT-2's per-block
/// order, then "ln_f/g", "ln_f/b", then "lm_head" when untied), so generic code (gradient checks,
/// HDF5 export) can loop over them.
template <typename Vec>
struct NamedTensor {
  std::string name;
  Vec* data;
};
template <typename P>
auto named_tensors(P& p) {
  using Vec = std::remove_pointer_t<decltype(&p.wte)>;
  std::vector<NamedTensor<Vec>> t = {{"wte", &p.wte}, {"wpe", &p.wpe}};
  for (size_t l = 0; l < p.h.size(); ++l)
    for (auto& [suffix, data] : std::remove_reference_t<decltype(p.h[l])>::list(p.h[l])) {
      t.push_back({"h" + std::to_string(l) + "/" + suffix, data});
    }
  t.push_back({"ln_f/g", &p.ln_f_g});
  t.push_back({"ln_f/b", &p.ln_f_b});
  if (!p.lm_head.empty()) t.push_back({"lm_head", &p.lm_head});
  return t;
}

template <typename Vec>
const std::string& tensor_name(const NamedTensor<Vec>& t) { return t.name; }
template <typename Vec>
Vec* tensor_data(const NamedTensor<Vec>& t) { return t.data; }
template <typename Vec>
std::string tensor_name(const std::pair<const char*, Vec*>& t) { return t.first; }
template <typename Vec>
Vec* tensor_data(const std::pair<const char*, Vec*>& t) { return t.second; }

/// Sizes every tensor of `named` (pairs of a name and a std::vector*, in table order) from the
/// parameter table `table`: zeros, LayerNorm gains ("*/g") `gain`. Throws wte::Error if the names
/// or their order differ, so the reference cannot drift from the production model's list.
template <typename Named, typename F>
void size_from_table(const Named& named, const std::vector<TensorSpec>& table, F gain) {
  if (named.size() != table.size())
    throw Error("the double reference lists " + std::to_string(named.size()) +
                " tensors where the parameter table has " + std::to_string(table.size()));
  for (size_t i = 0; i < table.size(); ++i) {
    const std::string name = tensor_name(named[i]);
    if (name != table[i].name)
      throw Error("the double reference's tensor " + std::to_string(i) + " is '" + name +
                  "' where the parameter table has '" + table[i].name + "'");
    const bool is_gain = name.size() >= 2 && name.compare(name.size() - 2, 2, "/g") == 0;
    tensor_data(named[i])->assign(table[i].size, is_gain ? gain : F(0));
  }
}

/// One transformer block's tensors (parameters or their gradients), GPT-2's names under "h{l}/".
/// Linear weights are (in, out): y = x · w + b.
template <typename F>
struct BlockParams {
  std::vector<F> ln_1_g;         // (C)     h{l}/ln_1/g
  std::vector<F> ln_1_b;         // (C)     h{l}/ln_1/b
  std::vector<F> c_attn_w;       // (C,3C)  h{l}/attn/c_attn/w   output columns [q | k | v]
  std::vector<F> c_attn_b;       // (3C)    h{l}/attn/c_attn/b
  std::vector<F> attn_c_proj_w;  // (C,C)   h{l}/attn/c_proj/w
  std::vector<F> attn_c_proj_b;  // (C)     h{l}/attn/c_proj/b
  std::vector<F> ln_2_g;         // (C)     h{l}/ln_2/g
  std::vector<F> ln_2_b;         // (C)     h{l}/ln_2/b
  std::vector<F> c_fc_w;         // (C,4C)  h{l}/mlp/c_fc/w
  std::vector<F> c_fc_b;         // (4C)    h{l}/mlp/c_fc/b
  std::vector<F> mlp_c_proj_w;   // (4C,C)  h{l}/mlp/c_proj/w
  std::vector<F> mlp_c_proj_b;   // (C)     h{l}/mlp/c_proj/b

  /// Zero-filled tensors of width C, sized from the parameter table (src/model/parameters.h:
  /// block_parameter_tensors); LayerNorm gains `g` (1 for parameters, 0 for gradients).
  BlockParams() = default;
  BlockParams(size_t C, F g) { size_from_table(list(*this), block_parameter_tensors(C), g); }

  /// (name suffix after "h{l}/", tensor) in the checkpoint's order (docs/checkpoint.md).
  template <typename Self>
  static auto list(Self& b) {
    using Vec = std::conditional_t<std::is_const_v<Self>, const std::vector<F>, std::vector<F>>;
    return std::vector<std::pair<const char*, Vec*>>{
        {"ln_1/g", &b.ln_1_g},        {"ln_1/b", &b.ln_1_b},
        {"attn/c_attn/w", &b.c_attn_w}, {"attn/c_attn/b", &b.c_attn_b},
        {"attn/c_proj/w", &b.attn_c_proj_w}, {"attn/c_proj/b", &b.attn_c_proj_b},
        {"ln_2/g", &b.ln_2_g},        {"ln_2/b", &b.ln_2_b},
        {"mlp/c_fc/w", &b.c_fc_w},    {"mlp/c_fc/b", &b.c_fc_b},
        {"mlp/c_proj/w", &b.mlp_c_proj_w}, {"mlp/c_proj/b", &b.mlp_c_proj_b}};
  }
};

/// The parameters, each tensor its own contiguous row-major vector. ln_f_g and ln_f_b have C entries
/// even when ln_f is off (then they are not read), matching the production arena's layout.
template <typename F>
struct ModelParams {
  size_t V = 0;       // vocab_size
  size_t C = 0;       // d_model
  size_t n_ctx = 0;   // position rows
  bool ln_f = true;   // final norm before the tied unembedding
  F ln_eps = F(1e-5); // GPT-2 norm()'s epsilon (ln_f, ln_1, ln_2)
  size_t n_head = 1;  // NH, must divide C when there are blocks
  std::vector<F> wte;     // (V, C)
  std::vector<F> wpe;     // (n_ctx, C)
  std::vector<F> ln_f_g;  // (C)
  std::vector<F> ln_f_b;  // (C)
  std::vector<F> lm_head; // (V, C) untied unembedding; EMPTY for GPT-2's tied model (logits use wte)
  std::vector<BlockParams<F>> h;  // n_layer blocks (empty: the embedding-only model)

  bool tied() const { return lm_head.empty(); }
  size_t n_layer() const { return h.size(); }

  /// Zero-filled tensors of the right sizes, LayerNorm gains 1 (so a fresh ModelParams is a valid
  /// model).
  ModelParams() = default;
  /// Sized from the parameter table (src/model/parameters.h: parameter_tensors) of a tied model
  /// of these shapes; an untied model assigns lm_head (V*C) afterwards.
  ModelParams(size_t V_, size_t C_, size_t n_ctx_, bool ln_f_, F ln_eps_, size_t n_layer_ = 0,
              size_t n_head_ = 1)
      : V(V_), C(C_), n_ctx(n_ctx_), ln_f(ln_f_), ln_eps(ln_eps_), n_head(n_head_), h(n_layer_) {
    size_from_table(named_tensors(*this), parameter_tensors(shape_config()), F(1));
  }

  /// The shapes of this model as a ModelConfig (for the parameter table).
  ModelConfig shape_config() const {
    ModelConfig c;
    c.vocab_size = V;
    c.d_model = C;
    c.n_ctx = n_ctx;
    c.n_layer = h.size();
    c.n_head = n_head;
    c.ln_f = ln_f;
    c.tie_embeddings = tied();
    return c;
  }
};

/// Gradients of the mean loss, same shapes as ModelParams. ln_f_g and ln_f_b are zero when ln_f is
/// off; wpe rows >= T are zero; lm_head is empty for a tied model.
template <typename F>
struct ModelGrads {
  std::vector<F> wte;     // (V, C)
  std::vector<F> wpe;     // (n_ctx, C)
  std::vector<F> ln_f_g;  // (C)
  std::vector<F> ln_f_b;  // (C)
  std::vector<F> lm_head; // (V, C) untied only
  std::vector<BlockParams<F>> h;  // n_layer blocks
};


// ------------------------------------------------------------------------------------------------
// The ops of the model other than the embedding and cross-entropy (those are in src/reference/kernels.h).

// ln_f, like ln_1 and ln_2, is src/reference/kernels.h's layernorm_forward/backward (GPT-2's norm():
// biased variance, eps inside the square root), the reference of the one float32 LayerNorm kernel.

/// Unembedding forward: logits = h · wᵀ, w the (V,C) table (wte when tied, lm_head when untied).
/// logits (N,V) written; h (N,C); w (V,C).
template <typename F>
void unembedding_forward(F* logits, const F* h, const F* w, size_t N, size_t C, size_t V) {
  for (size_t n = 0; n < N; ++n) {
    const F* hn = h + n * C;
    for (size_t v = 0; v < V; ++v) {
      const F* wv = w + v * C;
      F acc = 0;
      for (size_t c = 0; c < C; ++c) acc += hn[c] * wv[c];
      logits[n * V + v] = acc;
    }
  }
}

/// Unembedding backward:  dw += dlogitsᵀ · h  (V,C);  dh += dlogits · w  (N,C).
/// dw, dh accumulated; dlogits (N,V); h (N,C); w (V,C).
template <typename F>
void unembedding_backward(F* dw, F* dh, const F* dlogits, const F* h, const F* w, size_t N,
                          size_t C, size_t V) {
  for (size_t n = 0; n < N; ++n) {
    const F* hn = h + n * C;
    F* dhn = dh + n * C;
    for (size_t v = 0; v < V; ++v) {
      const F d = dlogits[n * V + v];
      const F* wv = w + v * C;
      F* dwv = dw + v * C;
      for (size_t c = 0; c < C; ++c) {
        dwv[c] += d * hn[c];
        dhn[c] += d * wv[c];
      }
    }
  }
}

/// Linear forward (GPT-2's conv1d): out = inp · w + b.  out (N,OC) written; inp (N,IC); w (IC,OC)
/// stored (in, out); b (OC).
template <typename F>
void linear_forward(F* out, const F* inp, const F* w, const F* b, size_t N, size_t IC, size_t OC) {
  for (size_t n = 0; n < N; ++n) {
    F* o = out + n * OC;
    for (size_t j = 0; j < OC; ++j) o[j] = b[j];
    for (size_t i = 0; i < IC; ++i) {
      const F x = inp[n * IC + i];
      const F* wi = w + i * OC;
      for (size_t j = 0; j < OC; ++j) o[j] += x * wi[j];
    }
  }
}

/// Linear backward:  dinp += dout · wᵀ (N,IC);  dw += inpᵀ · dout (IC,OC);  db += Σ_n dout (OC).
/// All accumulated; dout (N,OC); inp (N,IC); w (IC,OC).
template <typename F>
void linear_backward(F* dinp, F* dw, F* db, const F* dout, const F* inp, const F* w, size_t N,
                     size_t IC, size_t OC) {
  for (size_t n = 0; n < N; ++n) {
    const F* d = dout + n * OC;
    for (size_t i = 0; i < IC; ++i) {
      const F x = inp[n * IC + i];
      const F* wi = w + i * OC;
      F* dwi = dw + i * OC;
      F acc = 0;
      for (size_t j = 0; j < OC; ++j) {
        acc += d[j] * wi[j];
        dwi[j] += x * d[j];
      }
      dinp[n * IC + i] += acc;
    }
  }
  bias_backward(db, dout, N, OC);
}

/// Causal multi-head attention forward (GPT-2's attn() after c_attn, before c_proj):
///   q, k, v = split(qkv) (columns [q | k | v]; head h at columns h·hs..(h+1)·hs-1 of each)
///   preatt[b,h,t,j] = q[b,t,h]·k[b,j,h] for j <= t (0 for j > t, never read)
///   att = causal softmax(preatt / √hs) over j <= t   (src/reference/kernels.h attention_softmax_forward)
///   y[b,t,h·hs + d] = Σ_j att[b,h,t,j] · v[b,j,h·hs + d]
/// y (B,T,C), preatt, att (B,NH,T,T) written; qkv (B,T,3C).
template <typename F>
void attention_forward(F* y, F* preatt, F* att, const F* qkv, size_t B, size_t T, size_t C,
                       size_t NH) {
  const size_t hs = C / NH, C3 = 3 * C;
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < NH; ++h)
      for (size_t t = 0; t < T; ++t) {
        const F* q = qkv + (b * T + t) * C3 + h * hs;
        F* p = preatt + ((b * NH + h) * T + t) * T;
        for (size_t j = 0; j < T; ++j) {
          p[j] = 0;
          if (j > t) continue;
          const F* k = qkv + (b * T + j) * C3 + C + h * hs;
          for (size_t d = 0; d < hs; ++d) p[j] += q[d] * k[d];
        }
      }
  attention_softmax_forward(att, preatt, B * NH, T, F(1) / std::sqrt(static_cast<F>(hs)));
  for (size_t b = 0; b < B; ++b)
    for (size_t t = 0; t < T; ++t)
      for (size_t h = 0; h < NH; ++h) {
        F* yo = y + (b * T + t) * C + h * hs;
        const F* a = att + ((b * NH + h) * T + t) * T;
        for (size_t d = 0; d < hs; ++d) yo[d] = 0;
        for (size_t j = 0; j <= t; ++j) {
          const F* v = qkv + (b * T + j) * C3 + 2 * C + h * hs;
          for (size_t d = 0; d < hs; ++d) yo[d] += a[j] * v[d];
        }
      }
}

/// Causal attention backward: dqkv (B,T,3C) accumulated; dy (B,T,C); qkv (B,T,3C); att (B,NH,T,T).
///   datt[t,j] = dy[t]·v[j];  dv[j] += att[t,j]·dy[t]
///   dpreatt = softmax backward (scaled by 1/√hs; src/reference/kernels.h attention_softmax_backward)
///   dq[t] += Σ_j dpreatt[t,j]·k[j];  dk[j] += dpreatt[t,j]·q[t]
template <typename F>
void attention_backward(F* dqkv, const F* dy, const F* qkv, const F* att, size_t B, size_t T,
                        size_t C, size_t NH) {
  const size_t hs = C / NH, C3 = 3 * C;
  std::vector<F> datt(B * NH * T * T, F(0)), dpreatt(B * NH * T * T, F(0));
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < NH; ++h)
      for (size_t t = 0; t < T; ++t) {
        const F* dyo = dy + (b * T + t) * C + h * hs;
        const F* a = att + ((b * NH + h) * T + t) * T;
        F* da = datt.data() + ((b * NH + h) * T + t) * T;
        for (size_t j = 0; j <= t; ++j) {
          const F* v = qkv + (b * T + j) * C3 + 2 * C + h * hs;
          F* dv = dqkv + (b * T + j) * C3 + 2 * C + h * hs;
          for (size_t d = 0; d < hs; ++d) {
            da[j] += dyo[d] * v[d];
            dv[d] += a[j] * dyo[d];
          }
        }
      }
  attention_softmax_backward(dpreatt.data(), datt.data(), att, B * NH, T,
                             F(1) / std::sqrt(static_cast<F>(hs)));
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < NH; ++h)
      for (size_t t = 0; t < T; ++t) {
        const F* q = qkv + (b * T + t) * C3 + h * hs;
        F* dq = dqkv + (b * T + t) * C3 + h * hs;
        const F* dp = dpreatt.data() + ((b * NH + h) * T + t) * T;
        for (size_t j = 0; j <= t; ++j) {
          const F* k = qkv + (b * T + j) * C3 + C + h * hs;
          F* dk = dqkv + (b * T + j) * C3 + C + h * hs;
          for (size_t d = 0; d < hs; ++d) {
            dq[d] += dp[j] * k[d];
            dk[d] += dp[j] * q[d];
          }
        }
      }
}

/// What one block's forward keeps for its backward. N = B·T.
template <typename F>
struct BlockActivations {
  std::vector<F> ln_1, ln_1_mean, ln_1_rstd;  // (N,C), (N), (N)   a = ln_1(x)
  std::vector<F> qkv;                         // (N,3C)
  std::vector<F> preatt, att;                 // (B,NH,T,T)
  std::vector<F> atty;                        // (N,C)   heads concatenated
  std::vector<F> x_mid;                       // (N,C)   x + attn(ln_1(x))
  std::vector<F> ln_2, ln_2_mean, ln_2_rstd;  // (N,C), (N), (N)   m = ln_2(x_mid)
  std::vector<F> fc;                          // (N,4C)  m · c_fc/w + b (GELU's input)
  std::vector<F> fc_gelu;                     // (N,4C)  gelu(fc)
};

/// One GPT-2 block(): out (N,C) = x + attn(ln_1(x)), then + mlp(ln_2(·)). out written; act filled.
template <typename F>
void block_forward(F* out, BlockActivations<F>* act, const F* x, const BlockParams<F>& w,
                   size_t B, size_t T, size_t C, size_t NH, F eps) {
  const size_t N = B * T;
  BlockActivations<F>& a = *act;
  a.ln_1.assign(N * C, F(0));
  a.ln_1_mean.assign(N, F(0));
  a.ln_1_rstd.assign(N, F(0));
  a.qkv.assign(N * 3 * C, F(0));
  a.preatt.assign(B * NH * T * T, F(0));
  a.att.assign(B * NH * T * T, F(0));
  a.atty.assign(N * C, F(0));
  a.x_mid.assign(N * C, F(0));
  a.ln_2.assign(N * C, F(0));
  a.ln_2_mean.assign(N, F(0));
  a.ln_2_rstd.assign(N, F(0));
  a.fc.assign(N * 4 * C, F(0));
  a.fc_gelu.assign(N * 4 * C, F(0));
  std::vector<F> proj(N * C);

  // a = ln_1(x)
  layernorm_forward(a.ln_1.data(), a.ln_1_mean.data(), a.ln_1_rstd.data(), x, w.ln_1_g.data(),
                    w.ln_1_b.data(), N, C, eps);
  // qkv = a · c_attn/w + c_attn/b
  linear_forward(a.qkv.data(), a.ln_1.data(), w.c_attn_w.data(), w.c_attn_b.data(), N, C, 3 * C);
  // y = causal_softmax(q·kᵀ/√hs) · v
  attention_forward(a.atty.data(), a.preatt.data(), a.att.data(), a.qkv.data(), B, T, C, NH);
  // x_mid = x + y · attn/c_proj/w + attn/c_proj/b
  linear_forward(proj.data(), a.atty.data(), w.attn_c_proj_w.data(), w.attn_c_proj_b.data(), N, C,
                 C);
  residual_forward(a.x_mid.data(), x, proj.data(), N * C);
  // m = ln_2(x_mid)
  layernorm_forward(a.ln_2.data(), a.ln_2_mean.data(), a.ln_2_rstd.data(), a.x_mid.data(),
                    w.ln_2_g.data(), w.ln_2_b.data(), N, C, eps);
  // f = gelu(m · c_fc/w + c_fc/b)
  linear_forward(a.fc.data(), a.ln_2.data(), w.c_fc_w.data(), w.c_fc_b.data(), N, C, 4 * C);
  gelu_forward(a.fc_gelu.data(), a.fc.data(), N * 4 * C);
  // out = x_mid + f · mlp/c_proj/w + mlp/c_proj/b
  linear_forward(proj.data(), a.fc_gelu.data(), w.mlp_c_proj_w.data(), w.mlp_c_proj_b.data(), N,
                 4 * C, C);
  residual_forward(out, a.x_mid.data(), proj.data(), N * C);
}

/// block_forward's backward, in reverse. dx (N,C) WRITTEN (the gradient at the block's input);
/// every tensor of *dw accumulated; dout (N,C) the gradient at the block's output; x (N,C) its input.
template <typename F>
void block_backward(F* dx, BlockParams<F>* dw, const F* dout, const BlockActivations<F>& a,
                    const F* x, const BlockParams<F>& w, size_t B, size_t T, size_t C, size_t NH) {
  const size_t N = B * T;
  // out = x_mid + f · mlp/c_proj/w + b  =>  dx_mid = dout (+ ln_2's path below); df, dw, db
  std::vector<F> dx_mid(dout, dout + N * C);
  std::vector<F> df(N * 4 * C, F(0)), dfc(N * 4 * C, F(0));
  linear_backward(df.data(), dw->mlp_c_proj_w.data(), dw->mlp_c_proj_b.data(), dout,
                  a.fc_gelu.data(), w.mlp_c_proj_w.data(), N, 4 * C, C);
  // f = gelu(fc)
  gelu_backward(dfc.data(), a.fc.data(), df.data(), N * 4 * C);
  // fc = m · c_fc/w + c_fc/b
  std::vector<F> dm(N * C, F(0));
  linear_backward(dm.data(), dw->c_fc_w.data(), dw->c_fc_b.data(), dfc.data(), a.ln_2.data(),
                  w.c_fc_w.data(), N, C, 4 * C);
  // m = ln_2(x_mid)  (accumulates into dx_mid)
  layernorm_backward(dx_mid.data(), dw->ln_2_g.data(), dw->ln_2_b.data(), dm.data(),
                     a.x_mid.data(), w.ln_2_g.data(), a.ln_2_mean.data(), a.ln_2_rstd.data(), N, C);
  // x_mid = x + y · attn/c_proj/w + b  =>  dx = dx_mid (+ ln_1's path below); dy
  std::copy(dx_mid.begin(), dx_mid.end(), dx);
  std::vector<F> dy(N * C, F(0));
  linear_backward(dy.data(), dw->attn_c_proj_w.data(), dw->attn_c_proj_b.data(), dx_mid.data(),
                  a.atty.data(), w.attn_c_proj_w.data(), N, C, C);
  // y = attention(qkv)
  std::vector<F> dqkv(N * 3 * C, F(0));
  attention_backward(dqkv.data(), dy.data(), a.qkv.data(), a.att.data(), B, T, C, NH);
  // qkv = a · c_attn/w + c_attn/b
  std::vector<F> da(N * C, F(0));
  linear_backward(da.data(), dw->c_attn_w.data(), dw->c_attn_b.data(), dqkv.data(), a.ln_1.data(),
                  w.c_attn_w.data(), N, C, 3 * C);
  // a = ln_1(x)  (accumulates into dx)
  layernorm_backward(dx, dw->ln_1_g.data(), dw->ln_1_b.data(), da.data(), x, w.ln_1_g.data(),
                     a.ln_1_mean.data(), a.ln_1_rstd.data(), N, C);
}

/// Everything the forward computes, kept for backward and for tests. N = B·T.
template <typename F>
struct ModelActivations {
  size_t B = 0, T = 0;
  std::vector<F> hidden_states;  // (N, C)  wte[x] + wpe[t] = residual(0)
  std::vector<BlockActivations<F>> blocks;  // n_layer
  std::vector<std::vector<F>> residual;     // n_layer + 1 of (N, C): [0] = hidden_states, [l] the
                                            // residual stream entering block l, [n_layer] ln_f's input
  std::vector<F> ln_mean;        // (N)     u            (ln_f only)
  std::vector<F> ln_rstd;        // (N)     1/sqrt(s+eps) (ln_f only)
  std::vector<F> h;              // (N, C)  h' = ln_f(residual[n_layer]), or residual[n_layer] if ln_f
                                 //         is off: what the unembedding reads (final_hidden)
  std::vector<F> logits;         // (N, V)
  std::vector<F> losses;         // (N)     per-token cross-entropy
  F loss = 0;                    // mean of losses
};

/// Throws wte::Error if the parameter vectors do not match the shapes, if B or T is 0, if
/// T > n_ctx, or if an input or target id is outside [0, V). Called by every entry point below.
template <typename F>
void check_model_inputs(const ModelParams<F>& p, const int32_t* inputs, const int32_t* targets,
                        size_t B, size_t T) {
  if (p.V == 0 || p.C == 0 || p.n_ctx == 0)
    throw Error("reference model: V=" + std::to_string(p.V) + ", C=" + std::to_string(p.C) +
                ", n_ctx=" + std::to_string(p.n_ctx) + " must all be >= 1");
  if (p.wte.size() != p.V * p.C || p.wpe.size() != p.n_ctx * p.C || p.ln_f_g.size() != p.C ||
      p.ln_f_b.size() != p.C || (!p.lm_head.empty() && p.lm_head.size() != p.V * p.C))
    throw Error("reference model: parameter sizes do not match V=" + std::to_string(p.V) +
                ", C=" + std::to_string(p.C) + ", n_ctx=" + std::to_string(p.n_ctx));
  if (!p.h.empty() && (p.n_head == 0 || p.C % p.n_head != 0))
    throw Error("reference model: n_head=" + std::to_string(p.n_head) +
                " must be >= 1 and divide d_model=" + std::to_string(p.C));
  const BlockParams<F> shape(p.C, F(1));
  for (size_t l = 0; l < p.h.size(); ++l) {
    const auto want = BlockParams<F>::list(shape);
    const auto got = BlockParams<F>::list(p.h[l]);
    for (size_t k = 0; k < want.size(); ++k)
      if (got[k].second->size() != want[k].second->size())
        throw Error("reference model: h" + std::to_string(l) + "/" + got[k].first + " has " +
                    std::to_string(got[k].second->size()) + " entries, expected " +
                    std::to_string(want[k].second->size()) + " (d_model=" + std::to_string(p.C) +
                    ")");
  }
  if (B == 0 || T == 0)
    throw Error("reference model: B=" + std::to_string(B) + " and T=" + std::to_string(T) +
                " must be >= 1");
  if (T > p.n_ctx)
    throw Error("reference model: T=" + std::to_string(T) + " is larger than n_ctx=" +
                std::to_string(p.n_ctx));
  check_token_ids(inputs, B * T, p.V, "inputs");
  if (targets != nullptr) check_token_ids(targets, B * T, p.V, "targets");
}

/// Forward pass into `act` (resized here). If targets is null, stops after the logits (losses and
/// loss are left empty/0).
template <typename F>
void model_forward(const ModelParams<F>& p, const int32_t* inputs, const int32_t* targets,
                   size_t B, size_t T, ModelActivations<F>* act) {
  check_model_inputs(p, inputs, targets, B, T);
  const size_t N = B * T, C = p.C, V = p.V;
  act->B = B;
  act->T = T;

  // hidden_states = wte[x] + wpe[t]
  act->hidden_states.assign(N * C, F(0));
  embedding_forward(act->hidden_states.data(), inputs, p.wte.data(), p.wpe.data(), B, T, C);

  // x_{l+1} = block_l(x_l): residual[0] = hidden_states, residual[n_layer] feeds ln_f.
  const size_t L = p.n_layer();
  act->residual.assign(L + 1, std::vector<F>());
  act->residual[0] = act->hidden_states;
  act->blocks.assign(L, BlockActivations<F>());
  for (size_t l = 0; l < L; ++l) {
    act->residual[l + 1].assign(N * C, F(0));
    block_forward(act->residual[l + 1].data(), &act->blocks[l], act->residual[l].data(), p.h[l], B,
                  T, C, p.n_head, p.ln_eps);
  }
  const std::vector<F>& x_last = act->residual[L];

  // h' = ln_f(x_last): GPT-2 norm(), biased variance, eps inside the sqrt.
  if (p.ln_f) {
    act->ln_mean.assign(N, F(0));
    act->ln_rstd.assign(N, F(0));
    act->h.assign(N * C, F(0));
    layernorm_forward(act->h.data(), act->ln_mean.data(), act->ln_rstd.data(), x_last.data(),
                      p.ln_f_g.data(), p.ln_f_b.data(), N, C, p.ln_eps);
  } else {
    act->ln_mean.clear();
    act->ln_rstd.clear();
    act->h = x_last;
  }

  // logits = h' · wteᵀ  (tied), or h' · lm_headᵀ (untied)
  act->logits.assign(N * V, F(0));
  unembedding_forward(act->logits.data(), act->h.data(), p.tied() ? p.wte.data() : p.lm_head.data(),
                      N, C, V);

  act->losses.clear();
  act->loss = 0;
  if (targets == nullptr) return;
  act->losses.assign(N, F(0));
  cross_entropy_loss(act->losses.data(), act->logits.data(), targets, N, V);
  F sum = 0;
  for (size_t n = 0; n < N; ++n) sum += act->losses[n];
  act->loss = sum / static_cast<F>(N);
}

/// Mean cross-entropy over the B·T targets. inputs, targets: (B,T) ids.
template <typename F>
F model_loss(const ModelParams<F>& p, const int32_t* inputs, const int32_t* targets, size_t B,
             size_t T) {
  ModelActivations<F> act;
  model_forward(p, inputs, targets, B, T, &act);
  return act.loss;
}

/// Forward and backward: returns the mean loss and OVERWRITES every tensor of *grads (resized here)
/// with its gradient, as wte::Model::backward does. If `act` is not null the forward's activations
/// are left there.
template <typename F>
F model_forward_backward(const ModelParams<F>& p, const int32_t* inputs, const int32_t* targets,
                         size_t B, size_t T, ModelGrads<F>* grads,
                         ModelActivations<F>* act = nullptr) {
  ModelActivations<F> local;
  if (act == nullptr) act = &local;
  model_forward(p, inputs, targets, B, T, act);
  const size_t N = B * T, C = p.C, V = p.V;
  grads->lm_head.assign(p.tied() ? 0 : 1, F(0));  // non-empty: named_tensors lists lm_head
  grads->h.assign(p.n_layer(), BlockParams<F>());
  size_from_table(named_tensors(*grads), parameter_tensors(p.shape_config()), F(0));

  // loss = mean_n (lse(logits[n]) - logits[n, targets[n]])
  // dlogits = (softmax(logits) - onehot(targets)) / N
  std::vector<F> dlogits = act->logits;
  std::vector<F> losses(N);
  softmax_cross_entropy(dlogits.data(), losses.data(), targets, N, V, F(1) / static_cast<F>(N));

  // logits = h' · wteᵀ  (tied: the unembedding path of dwte; untied: into dlm_head)
  // dwte (or dlm_head) += dlogitsᵀ · h';   dh' = dlogits · wte (or lm_head)
  std::vector<F> dh(N * C, F(0));
  if (p.tied())
    unembedding_backward(grads->wte.data(), dh.data(), dlogits.data(), act->h.data(),
                         p.wte.data(), N, C, V);
  else
    unembedding_backward(grads->lm_head.data(), dh.data(), dlogits.data(), act->h.data(),
                         p.lm_head.data(), N, C, V);

  // h' = xhat · g + b,  xhat = (x - u) · rstd,  x = residual[n_layer]
  std::vector<F> dhidden;
  if (p.ln_f) {
    dhidden.assign(N * C, F(0));  // the backward adds into dhidden, dg, db (all zero here)
    layernorm_backward(dhidden.data(), grads->ln_f_g.data(), grads->ln_f_b.data(), dh.data(),
                       act->residual[p.n_layer()].data(), p.ln_f_g.data(), act->ln_mean.data(),
                       act->ln_rstd.data(), N, C);
  } else {
    dhidden = std::move(dh);
  }

  // x_{l+1} = block_l(x_l), in reverse: dhidden becomes the gradient at residual[l].
  std::vector<F> dx(N * C);
  for (size_t l = p.n_layer(); l-- > 0;) {
    block_backward(dx.data(), &grads->h[l], dhidden.data(), act->blocks[l],
                   act->residual[l].data(), p.h[l], B, T, C, p.n_head);
    std::swap(dx, dhidden);
  }

  // hidden_states = wte[x] + wpe[t]
  // dwte[x[n]] += dhidden[n] (lookup path, adds to the unembedding path);  dwpe[t] += Σ_b dhidden
  embedding_backward_wte(grads->wte.data(), dhidden.data(), inputs, N, C, V);
  embedding_backward_wpe(grads->wpe.data(), dhidden.data(), B, T, C);
  return act->loss;
}

}  // namespace wte::ref
