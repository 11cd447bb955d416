#include "wte/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "wte/data.h"
#include "wte/error.h"
#include "src/reference/kernels.h"  // ref::f32_to_bf16, ref::bf16_to_f32
#include "wte/kernels.h"

namespace wte {
namespace {

std::string shape_string(const std::vector<size_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
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

// `x` as a bf16 GEMM reads it: rounded to bfloat16 (convert_f32_to_bf16's bits) and widened back
// (exact). The identity when `bf16` is false.
inline float gemm_input(float x, bool bf16) { return bf16 ? ref::bf16_to_f32(ref::f32_to_bf16(x)) : x; }

// y = x · w + b for n rows: x (n, K), w (K, N) row-major (GPT-2's conv1d layout), b (N), y (n, N).
// Each y[t][j] starts at b[j] and adds x[t][k]·w[k][j] for k in increasing order, by one thread:
// the bits of a row depend neither on the thread count nor on the other rows (n = 1 is the
// one-row product step() has always computed). Each weight row segment is loaded once per call
// and used for all n rows, so a prefill of n tokens reads the weights once, not n times.
// bf16 (the model's GEMMs take bf16 inputs): x and w are rounded to bf16 as the model's GEMM
// inputs are, products and sums stay float32, as oneDNN's bf16 matmul accumulates.
template <bool bf16>
void linear_rows(float* y, const float* x, const float* w, const float* b, size_t K, size_t N,
                 size_t n) {
  constexpr size_t kChunk = 256;  // columns per task: a contiguous run of each row of w
  const size_t chunks = (N + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (K * N >= (size_t{1} << 18))
  for (size_t ch = 0; ch < chunks; ++ch) {
    const size_t j0 = ch * kChunk, len = std::min(N, j0 + kChunk) - j0;
    for (size_t t = 0; t < n; ++t) std::memcpy(y + t * N + j0, b + j0, len * sizeof(float));
    for (size_t k = 0; k < K; ++k) {
      const float* wk = w + k * N + j0;
      for (size_t t = 0; t < n; ++t) {
        const float xk = gemm_input(x[t * K + k], bf16);
        float* yc = y + t * N + j0;
        for (size_t j = 0; j < len; ++j) yc[j] += xk * gemm_input(wk[j], bf16);
      }
    }
  }
}

void linear_rows(float* y, const float* x, const float* w, const float* b, size_t K, size_t N,
                 size_t n, bool bf16) {
  if (bf16)
    linear_rows<true>(y, x, w, b, K, N, n);
  else
    linear_rows<false>(y, x, w, b, K, N, n);
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
  bf16_ = model.gemm_precision() == MatmulPrecision::bf16;
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
    const std::string h = "h" + std::to_string(l) + "/";
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
  reserve_rows(1);
  rows_ = 1;
  logits_.assign(V_, 0.0f);
  att_.assign(n_ctx_, 0.0f);
}

Decoder::~Decoder() = default;

void Decoder::reset() { pos_ = 0; }

const float* Decoder::residual(size_t l) const {
  if (l > n_layer_)
    throw Error("Decoder::residual(" + std::to_string(l) + "): layers are 0.." +
                std::to_string(n_layer_));
  return residual_.data() + (l * rows_ + (rows_ > 0 ? rows_ - 1 : 0)) * C_;
}

const float* Decoder::final_hidden() const {
  return final_.data() + (rows_ > 0 ? rows_ - 1 : 0) * C_;
}

// One block on the n rows h (n, C) at positions pos_ .. pos_ + n - 1, in place; writes their keys
// and values into layer l's cache. Row t's values do not depend on n (every loop below computes a
// row's elements in the same order for any n), so a prefill gives step()'s bits.
void Decoder::block_forward(size_t l, float* h, size_t n) {
  const Block& b = blocks_[l];
  const size_t C = C_, NH = n_head_, hs = C / NH;
  const float eps = model_.config().ln_eps;
  float mean, rstd;
  // a = ln_1(h); qkv = a · c_attn/w + c_attn/b
  for (size_t t = 0; t < n; ++t)
    layernorm_forward(a_.data() + t * C, &mean, &rstd, h + t * C, b.ln_1_g, b.ln_1_b, 1, C, eps);
  linear_rows(qkv_.data(), a_.data(), b.c_attn_w, b.c_attn_b, C, 3 * C, n, bf16_);
  float* k_layer = k_cache_.data() + l * n_ctx_ * C;
  float* v_layer = v_cache_.data() + l * n_ctx_ * C;
  for (size_t t = 0; t < n; ++t) {
    std::memcpy(k_layer + (pos_ + t) * C, qkv_.data() + t * 3 * C + C, C * sizeof(float));
    std::memcpy(v_layer + (pos_ + t) * C, qkv_.data() + t * 3 * C + 2 * C, C * sizeof(float));
  }
  // per row and head: att = causal softmax(q·kᵀ / sqrt(hs)) over positions 0..p; y = att · v
  // (bf16 GEMMs: q, k, att and v rounded to bf16 as the model's attention GEMMs read them, att
  // as the model's softmax writes it: each entry divided by the row's sum)
  const bool bf16 = bf16_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (size_t t = 0; t < n; ++t) {
    const size_t p = pos_ + t;
    for (size_t hd = 0; hd < NH; ++hd) {
      const float* q = qkv_.data() + t * 3 * C + hd * hs;
      float mx = -INFINITY;
      for (size_t j = 0; j <= p; ++j) {
        const float* k = k_layer + j * C + hd * hs;
        float dot = 0.0f;
        for (size_t i = 0; i < hs; ++i) dot += gemm_input(q[i], bf16) * gemm_input(k[i], bf16);
        att_[j] = scale * dot;
        mx = std::max(mx, att_[j]);
      }
      float sum = 0.0f;
      for (size_t j = 0; j <= p; ++j) {
        att_[j] = std::exp(att_[j] - mx);
        sum += att_[j];
      }
      const float inv = 1.0f / sum;
      float* y = y_.data() + t * C + hd * hs;
      std::fill(y, y + hs, 0.0f);
      for (size_t j = 0; j <= p; ++j) {
        const float w = bf16 ? gemm_input(att_[j] / sum, true) : att_[j] * inv;
        const float* v = v_layer + j * C + hd * hs;
        for (size_t i = 0; i < hs; ++i) y[i] += w * gemm_input(v[i], bf16);
      }
    }
  }
  // h = h + y · attn/c_proj/w + attn/c_proj/b
  linear_rows(proj_.data(), y_.data(), b.attn_proj_w, b.attn_proj_b, C, C, n, bf16_);
  for (size_t t = 0; t < n; ++t) residual_forward(h + t * C, h + t * C, proj_.data() + t * C, C);
  // h = h + gelu(ln_2(h) · mlp/c_fc/w + mlp/c_fc/b) · mlp/c_proj/w + mlp/c_proj/b
  for (size_t t = 0; t < n; ++t)
    layernorm_forward(a_.data() + t * C, &mean, &rstd, h + t * C, b.ln_2_g, b.ln_2_b, 1, C, eps);
  linear_rows(fc_.data(), a_.data(), b.c_fc_w, b.c_fc_b, C, 4 * C, n, bf16_);
  for (size_t t = 0; t < n; ++t)
    gelu_forward(fc_.data() + t * 4 * C, fc_.data() + t * 4 * C, 4 * C);
  linear_rows(proj_.data(), fc_.data(), b.mlp_proj_w, b.mlp_proj_b, 4 * C, C, n, bf16_);
  for (size_t t = 0; t < n; ++t) residual_forward(h + t * C, h + t * C, proj_.data() + t * C, C);
}

void Decoder::reserve_rows(size_t n) {
  const size_t C = C_;
  rows_ = n;
  if (residual_.size() >= (n_layer_ + 1) * n * C && a_.size() >= n * C) return;
  residual_.assign((n_layer_ + 1) * n * C, 0.0f);
  final_.assign(n * C, 0.0f);
  a_.assign(n * C, 0.0f);
  qkv_.assign(n * 3 * C, 0.0f);
  y_.assign(n * C, 0.0f);
  proj_.assign(n * C, 0.0f);
  fc_.assign(n * 4 * C, 0.0f);
}

void Decoder::run_positions(const int32_t* ids, size_t n) {
  for (size_t t = 0; t < n; ++t) {
    if (ids[t] < 0 || static_cast<size_t>(ids[t]) >= V_)
      throw Error("token id " + std::to_string(ids[t]) + " at position " + std::to_string(pos_ + t) +
                  " is outside [0, vocab_size=" + std::to_string(V_) + ")");
    if (pos_ + t >= n_ctx_)
      throw Error("position " + std::to_string(pos_ + t) + " is past the model's n_ctx = " +
                  std::to_string(n_ctx_) + " (wpe has only n_ctx position rows)");
  }
  reserve_rows(n);
  const size_t C = C_;
  // h = wte[x_t] + wpe[t]  (the same float add as embedding_forward: bit-identical rows)
  for (size_t t = 0; t < n; ++t) {
    float* h = residual_.data() + t * C;
    const float* e = wte_ + size_t(ids[t]) * C;
    const float* p = wpe_ + (pos_ + t) * C;
    for (size_t c = 0; c < C; ++c) h[c] = e[c] + p[c];
  }
  for (size_t l = 0; l < n_layer_; ++l) {
    float* next = residual_.data() + (l + 1) * n * C;
    std::memcpy(next, residual_.data() + l * n * C, n * C * sizeof(float));
    block_forward(l, next, n);
  }
  // h' = ln_f(h)
  const float* last = residual_.data() + n_layer_ * n * C;
  for (size_t t = 0; t < n; ++t) {
    if (model_.config().ln_f) {
      float mean, rstd;
      layernorm_forward(final_.data() + t * C, &mean, &rstd, last + t * C, ln_f_g_, ln_f_b_, 1, C,
                        model_.config().ln_eps);
    } else {
      std::memcpy(final_.data() + t * C, last + t * C, C * sizeof(float));
    }
  }
  pos_ += n;
}

// logits = h' · lm_headᵀ for the n rows of final_: one dot product per (row, vocabulary entry),
// summed over c in increasing order from 0 (step()'s order for every n). The n rows' sums for one
// vocabulary entry run side by side (independent chains, one lm_head row read once). bf16 GEMMs:
// h' and lm_head rounded to bf16, as the model's unembedding reads them.
void Decoder::unembed(size_t n) {
  const size_t C = C_, V = V_;
  const bool bf16 = bf16_;
  logits_.resize(n * V);
  std::vector<float> hT(C * n);  // final_ transposed: (C, n)
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < C; ++c) hT[c * n + t] = gemm_input(final_[t * C + c], bf16);
#pragma omp parallel if (V * C >= (size_t{1} << 18))
  {
    std::vector<float> acc(n);
#pragma omp for schedule(static)
    for (size_t v = 0; v < V; ++v) {
      const float* w = lm_head_ + v * C;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (size_t c = 0; c < C; ++c) {
        const float wc = gemm_input(w[c], bf16);
        const float* hc = hT.data() + c * n;
        for (size_t t = 0; t < n; ++t) acc[t] += hc[t] * wc;
      }
      for (size_t t = 0; t < n; ++t) logits_[t * V + v] = acc[t];
    }
  }
}

void Decoder::step_hidden(int32_t id) {
  run_position(id);
  logits_rows_ = 0;
}

void Decoder::run_position(int32_t id) { run_positions(&id, 1); }

const float* Decoder::step(int32_t id) {
  run_position(id);
  unembed(1);
  logits_rows_ = 1;
  return logits_.data();
}

void Decoder::prefill(const int32_t* ids, size_t n, bool logits) {
  if (n == 0) {
    rows_ = 0;
    return;
  }
  run_positions(ids, n);
  if (logits) unembed(n);
  logits_rows_ = logits ? n : 0;
}

const float* Decoder::residual_rows(size_t l) const {
  if (l > n_layer_)
    throw Error("Decoder::residual_rows(" + std::to_string(l) + "): layers are 0.." +
                std::to_string(n_layer_));
  return residual_.data() + l * rows_ * C_;
}

const float* Decoder::logits_rows() const {
  if (logits_rows_ != rows_ || rows_ == 0)
    throw Error("Decoder::logits_rows: the last prefill computed no logits (pass logits = true)");
  return logits_.data();
}

SlidingDecoder::SlidingDecoder(const Model& model, size_t drop) : dec_(model), drop_(drop) {
  if (drop_ < 1 || drop_ > dec_.n_ctx())
    throw Error("SlidingDecoder: drop = " + std::to_string(drop_) + " is not allowed; allowed: " +
                "a whole number in [1, n_ctx = " + std::to_string(dec_.n_ctx()) + "]");
  window_.reserve(dec_.n_ctx() + 1);
}

const float* SlidingDecoder::refill() {
  // The window in one pass (each weight read once, not once per token), then its last token alone
  // for the logits: the same bits as stepping through it (Decoder::prefill).
  dec_.reset();
  if (window_.size() > 1) dec_.prefill(window_.data(), window_.size() - 1, /*logits=*/false);
  return dec_.step(window_.back());
}

const float* SlidingDecoder::start(const int32_t* ids, size_t n) {
  if (n == 0) throw Error("SlidingDecoder::start: no tokens to start from (n = 0)");
  check_token_ids(ids, n, dec_.vocab_size(), "the start of the sequence");
  cropped_ = n > dec_.n_ctx() ? n - dec_.n_ctx() : 0;
  window_.assign(ids + cropped_, ids + n);
  slides_ = 0;
  started_ = true;
  return refill();
}

const float* SlidingDecoder::push(int32_t id) {
  if (!started_) throw Error("SlidingDecoder::push: call start() first");
  check_token_ids(&id, 1, dec_.vocab_size(), "the next token");
  if (window_.size() < dec_.n_ctx()) {
    window_.push_back(id);
    return dec_.step(id);
  }
  // Full: drop the oldest `drop` tokens; the rest move to new positions, so re-run them.
  window_.push_back(id);
  window_.erase(window_.begin(), window_.begin() + static_cast<ptrdiff_t>(drop_));
  ++slides_;
  return refill();
}

int32_t sample_token(const float* logits, size_t V, const SamplingParams& params, Rng& rng) {
  if (V == 0) throw Error("sample_token: no logits (V = 0)");
  if (!(params.temperature >= 0.0) || !std::isfinite(params.temperature))
    throw Error("temperature " + std::to_string(params.temperature) +
                " is not allowed; allowed: a finite number >= 0 (0: greedy)");
  if (!(params.top_p > 0.0 && params.top_p <= 1.0))
    throw Error("top_p " + std::to_string(params.top_p) +
                " is not allowed; allowed: a number in (0, 1] (1: no nucleus cut)");
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
  // Nucleus: keep candidate i while the mass before it, p_0 + ... + p_{i-1}, is below top_p · sum
  // (Hugging Face's TopPLogitsWarper: it drops the tokens whose ascending cumulative probability
  // is <= 1 - top_p). top_p = 1 keeps all k (no rounding can drop the last).
  size_t n = k;
  if (params.top_p < 1.0) {
    const double cut = params.top_p * sum;
    double before = 0.0;
    n = 0;
    while (n < k && (n == 0 || before < cut)) before += p[n++];
    sum = before;
  }
  const double u = rng.uniform() * sum;
  double acc = 0.0;
  for (size_t i = 0; i < n; ++i) {
    acc += p[i];
    if (u < acc) return order[i];
  }
  return order[n - 1];  // u within rounding of sum
}

}  // namespace wte
