#include "src/model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "wte/error.h"
#include "wte/kernels.h"

namespace wte {
namespace {

std::string shape_string(const std::vector<size_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {  // appends: GCC 12 -Wrestrict false positive on +
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  s += ')';
  return s;
}

// The parameter `name` of `model`, checked to have `shape`.
const float* find_param(const Model& model, const std::string& name, std::vector<size_t> shape) {
  for (const TensorSpec& t : model.tensors()) {
    if (t.name != name) continue;
    if (t.shape != shape)
      throw Error("Decoder: tensor " + name + " has shape " + shape_string(t.shape) +
                  ", expected " + shape_string(shape));
    return model.param_data() + t.offset;
  }
  throw Error("Decoder: the model has no tensor named " + name + " (n_layer = " +
              std::to_string(model.config().n_layer) + ")");
}

// y = x · w + b for one row: x (K), w (K, N) row-major (GPT-2's conv1d layout), b (N), y (N).
// Each y[j] is summed over k in increasing order by one thread (bits independent of threads).
void linear_row(float* y, const float* x, const float* w, const float* b, size_t K, size_t N) {
  constexpr size_t kChunk = 256;  // columns per task: a contiguous run of each row of w
  const size_t chunks = (N + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (K * N >= (size_t{1} << 18))
  for (size_t ch = 0; ch < chunks; ++ch) {
    const size_t j0 = ch * kChunk, j1 = std::min(N, j0 + kChunk);
    float* yc = y + j0;
    std::memcpy(yc, b + j0, (j1 - j0) * sizeof(float));
    for (size_t k = 0; k < K; ++k) {
      const float xk = x[k];
      const float* wk = w + k * N + j0;
      for (size_t j = 0; j < j1 - j0; ++j) yc[j] += xk * wk[j];
    }
  }
}

}  // namespace

// One block's parameters (names and shapes: include/wte/model.h).
struct Decoder::Block {
  const float *ln_1_g, *ln_1_b;      // (C)
  const float *c_attn_w, *c_attn_b;  // (C, 3C), (3C)
  const float *attn_proj_w, *attn_proj_b;  // (C, C), (C)
  const float *ln_2_g, *ln_2_b;      // (C)
  const float *c_fc_w, *c_fc_b;      // (C, 4C), (4C)
  const float *mlp_proj_w, *mlp_proj_b;    // (4C, C), (C)
};

Decoder::Decoder(const Model& model) : model_(model) {
  const ModelConfig& cfg = model.config();
  V_ = cfg.vocab_size, C_ = cfg.d_model, n_ctx_ = cfg.n_ctx;
  n_layer_ = cfg.n_layer;
  n_head_ = cfg.n_head;
  if (n_layer_ > 0 && (n_head_ == 0 || C_ % n_head_ != 0))
    throw Error("Decoder: n_head = " + std::to_string(n_head_) + " does not divide d_model = " +
                std::to_string(C_));
  const size_t C = C_;
  wte_ = find_param(model, "wte", {V_, C});
  wpe_ = find_param(model, "wpe", {n_ctx_, C});
  ln_f_g_ = find_param(model, "ln_f/g", {C});
  ln_f_b_ = find_param(model, "ln_f/b", {C});
  lm_head_ = cfg.tie_embeddings ? wte_ : find_param(model, "lm_head", {V_, C});
  for (size_t l = 0; l < n_layer_; ++l) {
    std::string h = "h";  // appends: GCC 12 -Wrestrict false positive on operator+
    h += std::to_string(l);
    h += '/';
    Block b;
    b.ln_1_g = find_param(model, h + "ln_1/g", {C});
    b.ln_1_b = find_param(model, h + "ln_1/b", {C});
    b.c_attn_w = find_param(model, h + "attn/c_attn/w", {C, 3 * C});
    b.c_attn_b = find_param(model, h + "attn/c_attn/b", {3 * C});
    b.attn_proj_w = find_param(model, h + "attn/c_proj/w", {C, C});
    b.attn_proj_b = find_param(model, h + "attn/c_proj/b", {C});
    b.ln_2_g = find_param(model, h + "ln_2/g", {C});
    b.ln_2_b = find_param(model, h + "ln_2/b", {C});
    b.c_fc_w = find_param(model, h + "mlp/c_fc/w", {C, 4 * C});
    b.c_fc_b = find_param(model, h + "mlp/c_fc/b", {4 * C});
    b.mlp_proj_w = find_param(model, h + "mlp/c_proj/w", {4 * C, C});
    b.mlp_proj_b = find_param(model, h + "mlp/c_proj/b", {C});
    blocks_.push_back(b);
  }
  k_cache_.assign(n_layer_ * n_ctx_ * C, 0.0f);
  v_cache_.assign(n_layer_ * n_ctx_ * C, 0.0f);
  residual_.assign((n_layer_ + 1) * C, 0.0f);
  final_.assign(C, 0.0f);
  logits_.assign(V_, 0.0f);
  a_.assign(C, 0.0f);
  qkv_.assign(3 * C, 0.0f);
  y_.assign(C, 0.0f);
  proj_.assign(C, 0.0f);
  fc_.assign(4 * C, 0.0f);
  att_.assign(n_ctx_, 0.0f);
}

Decoder::~Decoder() = default;

void Decoder::reset() { pos_ = 0; }

const float* Decoder::residual(size_t l) const {
  if (l > n_layer_)
    throw Error("Decoder::residual(" + std::to_string(l) + "): layers are 0.." +
                std::to_string(n_layer_));
  return residual_.data() + l * C_;
}

const float* Decoder::final_hidden() const { return final_.data(); }

// One block on the row h (C), in place; writes this position's k and v into layer l's cache.
void Decoder::block_forward(size_t l, float* h) {
  const Block& b = blocks_[l];
  const size_t C = C_, NH = n_head_, hs = C / NH, t = pos_;
  const float eps = model_.config().ln_eps;
  float mean, rstd;
  // a = ln_1(h); qkv = a · c_attn/w + c_attn/b
  layernorm_forward(a_.data(), &mean, &rstd, h, b.ln_1_g, b.ln_1_b, 1, C, eps);
  linear_row(qkv_.data(), a_.data(), b.c_attn_w, b.c_attn_b, C, 3 * C);
  float* k_layer = k_cache_.data() + l * n_ctx_ * C;
  float* v_layer = v_cache_.data() + l * n_ctx_ * C;
  std::memcpy(k_layer + t * C, qkv_.data() + C, C * sizeof(float));
  std::memcpy(v_layer + t * C, qkv_.data() + 2 * C, C * sizeof(float));
  // per head: att = causal softmax(q·kᵀ / sqrt(hs)) over positions 0..t; y = att · v
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (size_t hd = 0; hd < NH; ++hd) {
    const float* q = qkv_.data() + hd * hs;
    float mx = -INFINITY;
    for (size_t j = 0; j <= t; ++j) {
      const float* k = k_layer + j * C + hd * hs;
      float dot = 0.0f;
      for (size_t i = 0; i < hs; ++i) dot += q[i] * k[i];
      att_[j] = scale * dot;
      mx = std::max(mx, att_[j]);
    }
    float sum = 0.0f;
    for (size_t j = 0; j <= t; ++j) {
      att_[j] = std::exp(att_[j] - mx);
      sum += att_[j];
    }
    const float inv = 1.0f / sum;
    float* y = y_.data() + hd * hs;
    std::fill(y, y + hs, 0.0f);
    for (size_t j = 0; j <= t; ++j) {
      const float w = att_[j] * inv;
      const float* v = v_layer + j * C + hd * hs;
      for (size_t i = 0; i < hs; ++i) y[i] += w * v[i];
    }
  }
  // h = h + y · attn/c_proj/w + attn/c_proj/b
  linear_row(proj_.data(), y_.data(), b.attn_proj_w, b.attn_proj_b, C, C);
  residual_forward(h, h, proj_.data(), C);
  // h = h + gelu(ln_2(h) · mlp/c_fc/w + mlp/c_fc/b) · mlp/c_proj/w + mlp/c_proj/b
  layernorm_forward(a_.data(), &mean, &rstd, h, b.ln_2_g, b.ln_2_b, 1, C, eps);
  linear_row(fc_.data(), a_.data(), b.c_fc_w, b.c_fc_b, C, 4 * C);
  gelu_forward(fc_.data(), fc_.data(), 4 * C);
  linear_row(proj_.data(), fc_.data(), b.mlp_proj_w, b.mlp_proj_b, 4 * C, C);
  residual_forward(h, h, proj_.data(), C);
}

void Decoder::run_position(int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= V_)
    throw Error("token id " + std::to_string(id) + " at position " + std::to_string(pos_) +
                " is outside [0, vocab_size=" + std::to_string(V_) + ")");
  if (pos_ >= n_ctx_)
    throw Error("position " + std::to_string(pos_) + " is past the model's n_ctx = " +
                std::to_string(n_ctx_) + " (wpe has only n_ctx position rows)");
  const size_t C = C_;
  // h = wte[x_t] + wpe[t]  (the same float add as embedding_forward: bit-identical rows)
  float* h = residual_.data();
  const float* e = wte_ + size_t(id) * C;
  const float* p = wpe_ + pos_ * C;
  for (size_t c = 0; c < C; ++c) h[c] = e[c] + p[c];
  for (size_t l = 0; l < n_layer_; ++l) {
    float* next = residual_.data() + (l + 1) * C;
    std::memcpy(next, residual_.data() + l * C, C * sizeof(float));
    block_forward(l, next);
  }
  // h' = ln_f(h)
  const float* last = residual_.data() + n_layer_ * C;
  if (model_.config().ln_f) {
    float mean, rstd;
    layernorm_forward(final_.data(), &mean, &rstd, last, ln_f_g_, ln_f_b_, 1, C,
                      model_.config().ln_eps);
  } else {
    std::memcpy(final_.data(), last, C * sizeof(float));
  }
  ++pos_;
}

void Decoder::step_hidden(int32_t id) { run_position(id); }

const float* Decoder::step(int32_t id) {
  run_position(id);
  // logits = h' · lm_headᵀ: one dot product per row of lm_head (V, C)
  const size_t C = C_;
  const float* hf = final_.data();
  const size_t V = V_;
#pragma omp parallel for schedule(static) if (V * C >= (size_t{1} << 18))
  for (size_t v = 0; v < V; ++v) {
    const float* w = lm_head_ + v * C;
    float dot = 0.0f;
    for (size_t c = 0; c < C; ++c) dot += hf[c] * w[c];
    logits_[v] = dot;
  }
  return logits_.data();
}

int32_t sample_token(const float* logits, size_t V, const SamplingParams& params, Rng& rng) {
  if (V == 0) throw Error("sample_token: no logits (V = 0)");
  if (!(params.temperature >= 0.0) || !std::isfinite(params.temperature))
    throw Error("temperature " + std::to_string(params.temperature) +
                " is not allowed; allowed: a finite number >= 0 (0: greedy)");
  for (size_t v = 0; v < V; ++v)
    if (!std::isfinite(logits[v]))
      throw Error("logit " + std::to_string(v) + " is not finite (" + std::to_string(logits[v]) +
                  "): the model's parameters are broken");
  // Candidates by decreasing logit, ties by lower id; only the first k matter.
  const size_t k = params.top_k == 0 ? V : std::min(params.top_k, V);
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  auto higher = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(k), order.end(), higher);
  if (params.temperature == 0.0) return order[0];
  // p_i ∝ exp((logit_i - max) / temperature) over the k candidates
  std::vector<double> p(k);
  const double mx = logits[order[0]];
  double sum = 0.0;
  for (size_t i = 0; i < k; ++i) {
    p[i] = std::exp((double(logits[order[i]]) - mx) / params.temperature);
    sum += p[i];
  }
  const double u = rng.uniform() * sum;
  double acc = 0.0;
  for (size_t i = 0; i < k; ++i) {
    acc += p[i];
    if (u < acc) return order[i];
  }
  return order[k - 1];  // u within rounding of sum
}

}  // namespace wte
