// A plain-loop reference of the whole model in include/wte/model.h: the same math, no SIMD, no oneDNN, no
// threads, templated on the float type F (float or double). The double instantiation is the ground
// truth for gradient checks and for judging the float32 production wte::Model.
//
//   hidden_states = wte[x] + wpe[t]             (N,C)   N = B·T
//   h'            = ln_f(hidden_states)         (N,C)   optional; identity when ln_f is off
//   logits        = h' · wteᵀ                   (N,V)   tied lm_head (or h' · lm_headᵀ, untied)
//   loss          = mean_n cross_entropy(logits[n], targets[n])
//
// Source: GPT-2's model.py (Radford et al. 2019): model() (`h = tf.gather(wte, X) +
// tf.gather(wpe, positions_for(X, past))`, `h = norm(h, 'ln_f')`, `logits = tf.matmul(h_flat, wte,
// transpose_b=True)`) and norm():
//   u = mean(x);  s = mean((x - u)²)  (biased variance);  y = (x - u) / sqrt(s + eps) · g + b
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
// cross-entropy ops of simd/reference.h), so tests can check them one by one.
//
// Any shapes (V, C, n_ctx, B, T >= 1, T <= n_ctx) are accepted, so a user-facing gradcheck can be
// built on top of this. Cost is O(N·V·C) with plain loops: meant for small shapes.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "simd/reference.h"
#include "wte/data.h"
#include "wte/error.h"

namespace wte::ref {

/// The parameters, each tensor its own contiguous row-major vector. ln_f_g and ln_f_b have C entries
/// even when ln_f is off (then they are not read), matching the production arena's layout.
template <typename F>
struct ModelParams {
  size_t V = 0;       // vocab_size
  size_t C = 0;       // d_model
  size_t n_ctx = 0;   // position rows
  bool ln_f = true;   // final norm before the tied unembedding
  F ln_eps = F(1e-5); // GPT-2 norm()'s epsilon
  std::vector<F> wte;     // (V, C)
  std::vector<F> wpe;     // (n_ctx, C)
  std::vector<F> ln_f_g;  // (C)
  std::vector<F> ln_f_b;  // (C)
  std::vector<F> lm_head; // (V, C) untied unembedding; EMPTY for GPT-2's tied model (logits use wte)

  bool tied() const { return lm_head.empty(); }

  /// Zero-filled tensors of the right sizes, ln_f g = 1 (so a fresh ModelParams is a valid model).
  ModelParams() = default;
  ModelParams(size_t V_, size_t C_, size_t n_ctx_, bool ln_f_, F ln_eps_)
      : V(V_), C(C_), n_ctx(n_ctx_), ln_f(ln_f_), ln_eps(ln_eps_), wte(V_ * C_), wpe(n_ctx_ * C_),
        ln_f_g(C_, F(1)), ln_f_b(C_) {}
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
};

/// One named tensor of a ModelParams or ModelGrads, in the production arena's order and with its
/// names ("wte", "wpe", "ln_f/g", "ln_f/b", then "lm_head" when untied), so generic code (gradient
/// checks, HDF5 export) can loop over them.
template <typename Vec>
struct NamedTensor {
  const char* name;
  Vec* data;
};
template <typename F>
std::vector<NamedTensor<std::vector<F>>> named_tensors(ModelParams<F>& p) {
  std::vector<NamedTensor<std::vector<F>>> t = {
      {"wte", &p.wte}, {"wpe", &p.wpe}, {"ln_f/g", &p.ln_f_g}, {"ln_f/b", &p.ln_f_b}};
  if (!p.lm_head.empty()) t.push_back({"lm_head", &p.lm_head});
  return t;
}
template <typename F>
std::vector<NamedTensor<std::vector<F>>> named_tensors(ModelGrads<F>& g) {
  std::vector<NamedTensor<std::vector<F>>> t = {
      {"wte", &g.wte}, {"wpe", &g.wpe}, {"ln_f/g", &g.ln_f_g}, {"ln_f/b", &g.ln_f_b}};
  if (!g.lm_head.empty()) t.push_back({"lm_head", &g.lm_head});
  return t;
}

// ------------------------------------------------------------------------------------------------
// The ops of the model other than the embedding and cross-entropy (those are in simd/reference.h).

/// ln_f forward, GPT-2's norm() over each of N rows of width C:
///   u = mean(x);  s = mean((x - u)²) (biased);  rstd = 1/sqrt(s + eps);  xhat = (x - u)·rstd
///   out = xhat·g + b
/// out, xhat (N,C) and mean, rstd (N) written; x (N,C); g, b (C).
template <typename F>
void layernorm_forward(F* out, F* mean, F* rstd, F* xhat, const F* x, const F* g, const F* b,
                       size_t N, size_t C, F eps) {
  for (size_t n = 0; n < N; ++n) {
    const F* xn = x + n * C;
    F u = 0;
    for (size_t c = 0; c < C; ++c) u += xn[c];
    u /= static_cast<F>(C);
    F s = 0;
    for (size_t c = 0; c < C; ++c) s += (xn[c] - u) * (xn[c] - u);
    s /= static_cast<F>(C);
    const F r = F(1) / std::sqrt(s + eps);
    mean[n] = u;
    rstd[n] = r;
    for (size_t c = 0; c < C; ++c) {
      const F xh = (xn[c] - u) * r;
      xhat[n * C + c] = xh;
      out[n * C + c] = xh * g[c] + b[c];
    }
  }
}

/// ln_f backward (the standard derivation, e.g. llm.c's layernorm_backward):
///   dg += Σ_n dout·xhat;  db += Σ_n dout;  dxhat = dout·g
///   dx = rstd · (dxhat - mean_c(dxhat) - xhat · mean_c(dxhat·xhat))
/// dx (N,C) WRITTEN; dg, db (C) accumulated; dout, xhat (N,C); rstd (N); g (C).
template <typename F>
void layernorm_backward(F* dx, F* dg, F* db, const F* dout, const F* xhat, const F* rstd,
                        const F* g, size_t N, size_t C) {
  std::vector<F> dxhat(C);
  for (size_t n = 0; n < N; ++n) {
    const F* xh = xhat + n * C;
    const F* dn = dout + n * C;
    F mean_dxhat = 0, mean_dxhat_xhat = 0;
    for (size_t c = 0; c < C; ++c) {
      dg[c] += dn[c] * xh[c];
      db[c] += dn[c];
      dxhat[c] = dn[c] * g[c];
      mean_dxhat += dxhat[c];
      mean_dxhat_xhat += dxhat[c] * xh[c];
    }
    mean_dxhat /= static_cast<F>(C);
    mean_dxhat_xhat /= static_cast<F>(C);
    for (size_t c = 0; c < C; ++c)
      dx[n * C + c] = rstd[n] * (dxhat[c] - mean_dxhat - xh[c] * mean_dxhat_xhat);
  }
}

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

/// Everything the forward computes, kept for backward and for tests. N = B·T.
template <typename F>
struct ModelActivations {
  size_t B = 0, T = 0;
  std::vector<F> hidden_states;  // (N, C)  wte[x] + wpe[t]
  std::vector<F> ln_mean;        // (N)     u            (ln_f only)
  std::vector<F> ln_rstd;        // (N)     1/sqrt(s+eps) (ln_f only)
  std::vector<F> ln_xhat;        // (N, C)  (x-u)·rstd   (ln_f only)
  std::vector<F> h;              // (N, C)  h' = ln_f(hidden_states), or hidden_states if ln_f off
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

  // h' = ln_f(hidden_states): GPT-2 norm(), biased variance, eps inside the sqrt.
  if (p.ln_f) {
    act->ln_mean.assign(N, F(0));
    act->ln_rstd.assign(N, F(0));
    act->ln_xhat.assign(N * C, F(0));
    act->h.assign(N * C, F(0));
    layernorm_forward(act->h.data(), act->ln_mean.data(), act->ln_rstd.data(),
                      act->ln_xhat.data(), act->hidden_states.data(), p.ln_f_g.data(),
                      p.ln_f_b.data(), N, C, p.ln_eps);
  } else {
    act->ln_mean.clear();
    act->ln_rstd.clear();
    act->ln_xhat.clear();
    act->h = act->hidden_states;
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
  grads->wte.assign(V * C, F(0));
  grads->wpe.assign(p.n_ctx * C, F(0));
  grads->ln_f_g.assign(C, F(0));
  grads->ln_f_b.assign(C, F(0));
  if (p.tied())
    grads->lm_head.clear();
  else
    grads->lm_head.assign(V * C, F(0));

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

  // h' = xhat · g + b,  xhat = (x - u) · rstd
  std::vector<F> dhidden;
  if (p.ln_f) {
    dhidden.assign(N * C, F(0));
    layernorm_backward(dhidden.data(), grads->ln_f_g.data(), grads->ln_f_b.data(), dh.data(),
                       act->ln_xhat.data(), act->ln_rstd.data(), p.ln_f_g.data(), N, C);
  } else {
    dhidden = std::move(dh);
  }

  // hidden_states = wte[x] + wpe[t]
  // dwte[x[n]] += dhidden[n] (lookup path, adds to the unembedding path);  dwpe[t] += Σ_b dhidden
  embedding_backward_wte(grads->wte.data(), dhidden.data(), inputs, N, C, V);
  embedding_backward_wpe(grads->wpe.data(), dhidden.data(), B, T, C);
  return act->loss;
}

}  // namespace wte::ref
