#include "wte/model.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>

#include "wte/kernels.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/rng.h"

namespace wte {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

void Model::Deleter::operator()(float* p) const { std::free(p); }

Model::Buffer allocate_floats(size_t n) {
  const size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
  void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  if (p == nullptr) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, bytes == 0 ? 64 : bytes);
  return Model::Buffer(static_cast<float*>(p));
}

namespace {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A matmul dst = src · wei for plain row-major buffers; strides express transposes, so no copy
// is ever made. Created once per shape; buffers are bound per call.
struct Matmul {
  dnnl::matmul prim;
  memory src, wei, dst;

  // src (M,K) with strides src_strides, wei (K,N) with strides wei_strides, dst (M,N) row-major.
  Matmul(memory::dim M, memory::dim K, memory::dim N, memory::dims src_strides,
         memory::dims wei_strides) {
    memory::desc src_md({M, K}, dt::f32, src_strides);
    memory::desc wei_md({K, N}, dt::f32, wei_strides);
    memory::desc dst_md({M, N}, dt::f32, tag::ab);
    dnnl::matmul::desc desc(src_md, wei_md, dst_md);
    dnnl::matmul::primitive_desc pd(desc, cpu_engine());
    prim = dnnl::matmul(pd);
    src = memory(src_md, cpu_engine(), DNNL_MEMORY_NONE);
    wei = memory(wei_md, cpu_engine(), DNNL_MEMORY_NONE);
    dst = memory(dst_md, cpu_engine(), DNNL_MEMORY_NONE);
  }

  void run(dnnl::stream& s, const float* src_ptr, const float* wei_ptr, float* dst_ptr) {
    src.set_data_handle(const_cast<float*>(src_ptr));
    wei.set_data_handle(const_cast<float*>(wei_ptr));
    dst.set_data_handle(dst_ptr);
    prim.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
  }
};

// ln_f through oneDNN's layer normalization (same formula as GPT-2's norm(): biased variance,
// epsilon inside the square root), forward_training so mean and variance are kept for backward.
struct LayerNorm {
  dnnl::layer_normalization_forward fwd;
  dnnl::layer_normalization_backward bwd;
  memory src, dst, mean, variance, scale, shift, diff_src, diff_dst, diff_scale, diff_shift;

  LayerNorm(memory::dim N, memory::dim C, float eps) {
    const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    memory::desc data_md({N, C}, dt::f32, tag::ab);
    dnnl::layer_normalization_forward::desc fwd_desc(dnnl::prop_kind::forward_training, data_md,
                                                     eps, flags);
    dnnl::layer_normalization_forward::primitive_desc fwd_pd(fwd_desc, cpu_engine());
    dnnl::layer_normalization_backward::desc bwd_desc(dnnl::prop_kind::backward, data_md, data_md,
                                                      eps, flags);
    dnnl::layer_normalization_backward::primitive_desc bwd_pd(bwd_desc, cpu_engine(), fwd_pd);
    fwd = dnnl::layer_normalization_forward(fwd_pd);
    bwd = dnnl::layer_normalization_backward(bwd_pd);
    auto make = [](const memory::desc& md) { return memory(md, cpu_engine(), DNNL_MEMORY_NONE); };
    src = make(data_md);
    dst = make(data_md);
    diff_src = make(data_md);
    diff_dst = make(data_md);
    mean = make(fwd_pd.mean_desc());
    variance = make(fwd_pd.variance_desc());
    memory::desc c_md({C}, dt::f32, tag::a);
    scale = make(c_md);
    shift = make(c_md);
    diff_scale = make(c_md);
    diff_shift = make(c_md);
  }
};

}  // namespace

struct Model::Impl {
  dnnl::stream stream{cpu_engine()};
  size_t capacity_rows = 0;  // N the activation buffers hold
  Buffer hidden;             // (N, C) hidden_states[0]
  Buffer ln_out;             // (N, C) ln_f output (unused when ln_f is off)
  Buffer ln_mean, ln_var;    // (N)    ln_f statistics: mean and (biased) variance
  Buffer dln_out;            // (N, C) gradient w.r.t. h'
  Buffer dhidden;            // (N, C) gradient w.r.t. hidden_states[0]
  Buffer logits;             // (N, V) logits, or dlogits after a training forward
  Buffer losses;             // (N)
  std::vector<int32_t> inputs;  // (N) ids of the last forward, for the lookup backward
  size_t B = 0, T = 0;
  bool has_dlogits = false;
  ScatterWorkspace scatter;
  Buffer wte_rows;                    // (N, C) untied: wte's gradient rows (only the first count used)
  std::vector<int32_t> wte_touched;   // (N)    untied: their ids
  size_t wte_touched_count = 0;

  // Per-part timing (Model::set_step_times): each mark waits for the stream, then charges the time
  // since the previous mark to one field.
  std::chrono::steady_clock::time_point last_mark;
  void start(StepTimes* t) {
    if (t != nullptr) last_mark = std::chrono::steady_clock::now();
  }
  void mark(StepTimes* t, double StepTimes::*field) {
    if (t == nullptr) return;
    stream.wait();
    const auto now = std::chrono::steady_clock::now();
    t->*field = std::chrono::duration<double>(now - last_mark).count();
    last_mark = now;
  }

  // Primitives for one N, created on first use.
  struct Prims {
    std::unique_ptr<Matmul> logits;   // (N,C) x (C,V) [wteᵀ by strides] -> (N,V)
    std::unique_ptr<Matmul> dh;       // (N,V) x (V,C) -> (N,C)
    std::unique_ptr<Matmul> dwte;     // (V,N) [dlogitsᵀ by strides] x (N,C) -> (V,C)
    std::unique_ptr<LayerNorm> ln;
  };
  std::map<size_t, Prims> prims;

  void reserve(size_t N, size_t C, size_t V) {
    if (N <= capacity_rows) return;
    hidden = allocate_floats(N * C);
    ln_out = allocate_floats(N * C);
    ln_mean = allocate_floats(N);
    ln_var = allocate_floats(N);
    dln_out = allocate_floats(N * C);
    dhidden = allocate_floats(N * C);
    logits = allocate_floats(N * V);
    losses = allocate_floats(N);
    inputs.resize(N);
    wte_rows = allocate_floats(N * C);
    wte_touched.resize(N);
    capacity_rows = N;
  }

  Prims& get(size_t N, size_t C, size_t V, bool ln_f, float eps) {
    auto it = prims.find(N);
    if (it != prims.end()) return it->second;
    const auto n = static_cast<memory::dim>(N), c = static_cast<memory::dim>(C),
               v = static_cast<memory::dim>(V);
    Prims p;
    p.logits = std::make_unique<Matmul>(n, c, v, memory::dims{c, 1}, memory::dims{1, c});
    p.dh = std::make_unique<Matmul>(n, v, c, memory::dims{v, 1}, memory::dims{c, 1});
    p.dwte = std::make_unique<Matmul>(v, n, c, memory::dims{1, v}, memory::dims{c, 1});
    if (ln_f) p.ln = std::make_unique<LayerNorm>(n, c, eps);
    return prims.emplace(N, std::move(p)).first->second;
  }
};

Model::Model(const ModelConfig& config) : config_(config), impl_(std::make_unique<Impl>()) {
  const size_t V = config.vocab_size, C = config.d_model, P = config.n_ctx;
  if (V == 0 || C == 0 || P == 0)
    throw Error("model shapes must be positive: vocab_size=" + std::to_string(V) +
                ", d_model=" + std::to_string(C) + ", n_ctx=" + std::to_string(P));
  auto add = [&](const char* name, std::vector<size_t> shape, bool decay) {
    size_t size = 1;
    for (size_t d : shape) size *= d;
    tensors_.push_back({name, std::move(shape), num_parameters_, size, decay});
    num_parameters_ += size;
  };
  add("wte", {V, C}, true);
  add("wpe", {P, C}, true);
  add("ln_f/g", {C}, false);
  add("ln_f/b", {C}, false);
  if (!config.tie_embeddings) {
    tensors_[0].sparse_grad = true;  // wte: lazy row-sparse gradient (wte_grad_rows)
    add("lm_head", {V, C}, true);
  }
  params_memory_ = allocate_floats(num_parameters_);
  grads_memory_ = allocate_floats(num_parameters_);
  auto views = [&](float* base) {
    return ParameterTensors{base + tensors_[0].offset, base + tensors_[1].offset,
                            base + tensors_[2].offset, base + tensors_[3].offset,
                            tensors_.size() > 4 ? base + tensors_[4].offset : nullptr};
  };
  params_ = views(params_memory_.get());
  grads_ = views(grads_memory_.get());
  for (size_t c = 0; c < C; ++c) params_.ln_f_g[c] = 1.0f;
}

Model::~Model() = default;

void Model::init_weights(uint64_t seed) {
  Rng rng(seed);
  const size_t C = config_.d_model;
  for (size_t i = 0; i < config_.vocab_size * C; ++i)
    params_.wte[i] = static_cast<float>(rng.normal() * config_.wte_init_std);
  for (size_t i = 0; i < config_.n_ctx * C; ++i)
    params_.wpe[i] = static_cast<float>(rng.normal() * config_.wpe_init_std);
  for (size_t c = 0; c < C; ++c) {
    params_.ln_f_g[c] = 1.0f;
    params_.ln_f_b[c] = 0.0f;
  }
  if (params_.lm_head != nullptr)
    for (size_t i = 0; i < config_.vocab_size * C; ++i)
      params_.lm_head[i] = static_cast<float>(rng.normal() * config_.wte_init_std);
}

SparseRowGrad Model::wte_grad_rows() {
  if (config_.tie_embeddings) return {};
  return SparseRowGrad{impl_->wte_rows.get(), impl_->wte_touched.data(), impl_->wte_touched_count,
                       config_.d_model};
}

void Model::check_batch(const int32_t* inputs, const int32_t* targets, size_t B, size_t T) const {
  if (B == 0 || T == 0)
    throw Error("empty batch: B=" + std::to_string(B) + ", T=" + std::to_string(T));
  if (T > config_.n_ctx)
    throw Error("sequence length T=" + std::to_string(T) + " exceeds n_ctx=" +
                std::to_string(config_.n_ctx) + " (wpe has only n_ctx position rows)");
  check_token_ids(inputs, B * T, config_.vocab_size, "the batch's inputs");
  if (targets != nullptr) check_token_ids(targets, B * T, config_.vocab_size, "the batch's targets");
}

void Model::run_forward(const int32_t* inputs, size_t B, size_t T) {
  const size_t N = B * T, C = config_.d_model, V = config_.vocab_size;
  Impl& m = *impl_;
  m.reserve(N, C, V);
  Impl::Prims& p = m.get(N, C, V, config_.ln_f, config_.ln_eps);
  std::memcpy(m.inputs.data(), inputs, N * sizeof(int32_t));
  m.B = B;
  m.T = T;
  m.start(times_);

  // hidden_states[0] = wte[x] + wpe[t]
  embedding_forward(m.hidden.get(), inputs, params_.wte, params_.wpe, B, T, C);
  m.mark(times_, &StepTimes::lookup);
  // h' = ln_f(hidden_states[0])
  const float* h = m.hidden.get();
  if (config_.ln_f) {
    LayerNorm& ln = *p.ln;
    ln.src.set_data_handle(m.hidden.get());
    ln.dst.set_data_handle(m.ln_out.get());
    ln.mean.set_data_handle(m.ln_mean.get());
    ln.variance.set_data_handle(m.ln_var.get());
    ln.scale.set_data_handle(params_.ln_f_g);
    ln.shift.set_data_handle(params_.ln_f_b);
    ln.fwd.execute(m.stream, {{DNNL_ARG_SRC, ln.src},
                              {DNNL_ARG_DST, ln.dst},
                              {DNNL_ARG_MEAN, ln.mean},
                              {DNNL_ARG_VARIANCE, ln.variance},
                              {DNNL_ARG_SCALE, ln.scale},
                              {DNNL_ARG_SHIFT, ln.shift}});
    h = m.ln_out.get();
    m.mark(times_, &StepTimes::ln_f_fwd);
  }
  // logits = h' · lm_headᵀ   (N,C) x (C,V): lm_head (V,C) = wte when tied, read with strides {1, C}
  p.logits->run(m.stream, h, lm_head(), m.logits.get());
  m.stream.wait();
  m.mark(times_, &StepTimes::logits_gemm);
}

float Model::forward(const int32_t* inputs, const int32_t* targets, size_t B, size_t T) {
  check_batch(inputs, targets, B, T);
  run_forward(inputs, B, T);
  const size_t N = B * T, V = config_.vocab_size;
  Impl& m = *impl_;
  // loss = mean_n CE(logits[n], targets[n]); dlogits = (softmax - onehot) / N, in place
  softmax_cross_entropy(m.logits.get(), m.losses.get(), targets, N, V, 1.0f / static_cast<float>(N));
  m.has_dlogits = true;
  m.mark(times_, &StepTimes::cross_entropy);
  double total = 0.0;  // fixed order: the same bits for any thread count
  for (size_t n = 0; n < N; ++n) total += m.losses[n];
  return static_cast<float>(total / static_cast<double>(N));
}

const float* Model::forward_logits(const int32_t* inputs, size_t B, size_t T,
                                   const int32_t* targets, float* losses) {
  check_batch(inputs, targets, B, T);
  run_forward(inputs, B, T);
  impl_->has_dlogits = false;
  if (targets != nullptr && losses != nullptr)
    cross_entropy_loss(losses, impl_->logits.get(), targets, B * T, config_.vocab_size);
  return impl_->logits.get();
}

const float* Model::hidden_states() const { return impl_->hidden.get(); }

void Model::backward() {
  Impl& m = *impl_;
  if (!m.has_dlogits) throw Error("Model::backward() called without a training forward()");
  const size_t B = m.B, T = m.T, N = B * T, C = config_.d_model, V = config_.vocab_size;
  Impl::Prims& p = m.get(N, C, V, config_.ln_f, config_.ln_eps);
  const float* h = config_.ln_f ? m.ln_out.get() : m.hidden.get();
  const float* dlogits = m.logits.get();
  m.start(times_);

  // logits = h' · lm_headᵀ  =>  dlm_head = dlogitsᵀ · h'  (V,N)x(N,C), written (beta 0). Tied:
  // lm_head is wte and this is the first writer of grads.wte, so no V×C zero-fill is needed.
  p.dwte->run(m.stream, dlogits, h, config_.tie_embeddings ? grads_.wte : grads_.lm_head);
  m.mark(times_, &StepTimes::dlm_head_gemm);
  //                         =>  dh' = dlogits · lm_head  (N,V)x(V,C)
  float* dh = config_.ln_f ? m.dln_out.get() : m.dhidden.get();
  p.dh->run(m.stream, dlogits, lm_head(), dh);
  m.mark(times_, &StepTimes::dh_gemm);
  // h' = ln_f(hidden)  =>  dhidden, dg, db (oneDNN writes, does not accumulate)
  if (config_.ln_f) {
    LayerNorm& ln = *p.ln;
    ln.src.set_data_handle(m.hidden.get());
    ln.mean.set_data_handle(m.ln_mean.get());
    ln.variance.set_data_handle(m.ln_var.get());
    ln.scale.set_data_handle(params_.ln_f_g);
    ln.shift.set_data_handle(params_.ln_f_b);  // oneDNN 2.6's backward asks for it (unused by the math)
    ln.diff_dst.set_data_handle(m.dln_out.get());
    ln.diff_src.set_data_handle(m.dhidden.get());
    ln.diff_scale.set_data_handle(grads_.ln_f_g);
    ln.diff_shift.set_data_handle(grads_.ln_f_b);
    ln.bwd.execute(m.stream, {{DNNL_ARG_SRC, ln.src},
                              {DNNL_ARG_MEAN, ln.mean},
                              {DNNL_ARG_VARIANCE, ln.variance},
                              {DNNL_ARG_SCALE, ln.scale},
                              {DNNL_ARG_SHIFT, ln.shift},
                              {DNNL_ARG_DIFF_DST, ln.diff_dst},
                              {DNNL_ARG_DIFF_SRC, ln.diff_src},
                              {DNNL_ARG_DIFF_SCALE, ln.diff_scale},
                              {DNNL_ARG_DIFF_SHIFT, ln.diff_shift}});
  } else {
    std::memset(grads_.ln_f_g, 0, config_.d_model * sizeof(float));
    std::memset(grads_.ln_f_b, 0, config_.d_model * sizeof(float));
  }
  m.stream.wait();
  m.mark(times_, &StepTimes::ln_f_bwd);
  // hidden_states[0] = wte[x] + wpe[t]  =>  dwte[x] += dhidden (scatter), dwpe[t] = sum_b dhidden
  if (config_.tie_embeddings) {
    embedding_backward_wte(grads_.wte, m.dhidden.get(), m.inputs.data(), N, C, V, &m.scatter);
  } else {
    // Untied: only the touched rows' sums, for the optimizer's lazy row update.
    embedding_backward_rows(m.wte_rows.get(), m.wte_touched.data(), &m.wte_touched_count,
                            m.dhidden.get(), m.inputs.data(), N, C, V, &m.scatter);
  }
  m.mark(times_, &StepTimes::scatter);
  std::memset(grads_.wpe, 0, config_.n_ctx * C * sizeof(float));
  embedding_backward_wpe(grads_.wpe, m.dhidden.get(), B, T, C);
  m.mark(times_, &StepTimes::dwpe);
  m.has_dlogits = false;
}

}  // namespace wte
