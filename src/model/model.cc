// wte::Model: the parameter arena, the activation arena and GPT-2's forward and backward, reading
// like the architecture diagram (include/wte/model.h). The layers live in their own files:
// src/model/matmul.* (linear layers and every GEMM), attention.*, block.* (one transformer block);
// the elementwise kernels (embedding, LayerNorm for ln_1, ln_2 and ln_f alike, GELU, cross-entropy)
// are in include/wte/kernels.h.
#include "wte/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <utility>

#include "src/model/block.h"
#include "src/model/matmul.h"
#include "src/model/memory.h"
#include "src/model/attention_tiled.h"
#include "src/model/gemm_plan.h"
#include "src/model/memory_plan.h"
#include "src/model/unembedding.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/kernels.h"
#include "wte/rng.h"

namespace wte {

void Model::Deleter::operator()(float* p) const { free_aligned(p); }

namespace {

// n zeroed floats (src/model/memory.h: 64-byte aligned, huge pages from 4 MiB).
Model::Buffer allocate_zeroed(size_t n, bool touch) {
  return Model::Buffer(static_cast<float*>(allocate_aligned(n * sizeof(float), touch)));
}

}  // namespace

Model::Buffer allocate_floats(size_t n) { return allocate_zeroed(n, /*touch=*/true); }

namespace {

// GPT-2's initializer_range for every block weight (model.py / Hugging Face's GPT2Config).
constexpr double kBlockInitStd = 0.02;

}  // namespace

// Activations and oneDNN objects. The activation views (ActivationViews) and their sizes come from
// the memory plan (src/model/memory_plan.h): lay_out_activations is the layout.
struct Model::Impl : ActivationViews {
  Gemm gemm;
  dnnl::stream& stream = gemm.stream();
  size_t cap_rows = 0, cap_btt = 0;  // the arena holds N <= cap_rows and B·T·T <= cap_btt
  // model.attention = auto's threshold on this CPU, fixed when the model is made: the arena's
  // size and every forward and backward agree on the path even if the SIMD target changes later.
  size_t tiled_min_t = tiled_attention_min_t();
  size_t micro_batches = 1;          // backward passes per zero_grad the buffers are sized for
  Buffer arena;                      // every activation view, one allocation
  size_t arena_floats = 0;
  Buffer logits_extra;               // fused loss: forward_logits's (N,V) buffer, made on demand
  size_t logits_extra_rows = 0;
  bool fused_grads = false;          // the last training forward was fused: the unembedding's
                                     // gradients are added already
  std::vector<int32_t> inputs;       // (N) ids of the last forward, for the lookup backward
  size_t B = 0, T = 0;
  bool has_dlogits = false;
  ScatterWorkspace scatter;
  std::vector<double> wte_sumsq;     // tied: dwte's norm block sums from the scatter (grad_norm_head)
  size_t wte_sumsq_count = 0;        // valid sums (0 after forward and zero_grad)
  // Untied wte: the row-sparse gradient since zero_grad. One backward's rows are formed in the
  // arena's wte_rows with their ids in wte_touched; from the second backward on, they are merged
  // into wte_acc / wte_acc_ids (sized for micro_batches passes by the plan; grown if more run).
  std::vector<int32_t> wte_touched;  // (N) ids of one backward's rows
  size_t wte_touched_count = 0;
  enum class RowsAt { kNone, kArena, kAccumulated } rows_at = RowsAt::kNone;
  Buffer wte_acc;                    // (wte_acc_cap, C)
  size_t wte_acc_cap = 0;
  std::vector<int32_t> wte_acc_ids;  // (count) increasing

  // bf16 GEMMs only: bf16 copies of the GEMM inputs. The parameter mirror (same offsets as the
  // parameter arena) is refreshed by a forward when it is stale (Model::params_bf16); the
  // activation copies live in arena16.
  bool bf16 = false;
  Bf16Buffer params16;
  std::vector<BlockWeights16> w16;   // (n_layer) views into params16
  const uint16_t* lm_head16 = nullptr;
  Bf16Buffer arena16;
  size_t arena16_elems = 0;


  // Sizes the arenas for N = B·T rows and `k` backward passes per zero_grad, as plan_memory does.
  void reserve(size_t B_, size_t T_, size_t k, const ModelConfig& c) {
    // the dense attention's probabilities: none when this T runs the tiled attention
    const size_t N = B_ * T_, BTT = use_tiled_attention(c, T_, tiled_min_t) ? 0 : B_ * T_ * T_;
    if (N > cap_rows || BTT > cap_btt) {
      cap_rows = std::max(cap_rows, N);
      cap_btt = std::max(cap_btt, BTT);
      arena.reset();
      arena_floats = lay_out_activations(nullptr, cap_rows, cap_btt, c, this);
      arena = allocate_floats(arena_floats);
      lay_out_activations(arena.get(), cap_rows, cap_btt, c, this);
      if (bf16) {
        arena16.reset();
        arena16_elems = lay_out_activations16(nullptr, cap_rows, cap_btt, c, this);
        arena16 = allocate_bf16(arena16_elems);
        lay_out_activations16(arena16.get(), cap_rows, cap_btt, c, this);
      }
      // The lookup backward's ids and sort buffers, reserved once at their largest (the plan's
      // "lookup sort buffers"): no step allocates.
      const size_t V = c.vocab_size, touched = std::min(cap_rows, V);
      exact_capacity(&inputs, cap_rows, true);
      exact_capacity(&wte_touched, cap_rows, true);
      exact_capacity(&scatter.row_start, V + 1, false);
      exact_capacity(&scatter.order, cap_rows, false);
      exact_capacity(&scatter.touched, touched, false);
      exact_capacity(&scatter.hot, std::min(cap_rows / kScatterHotCount, V), false);
      exact_capacity(&scatter.multi, std::min(cap_rows / 2, V), false);
    }
    micro_batches = std::max(micro_batches, k);
    const size_t acc = accumulated_wte_rows(c, cap_rows, micro_batches);
    if (acc > wte_acc_cap) grow_wte_acc(acc, c.d_model);
  }

  // v's capacity exactly n (sized to n when `fill`), unless it is that large already.
  template <typename X>
  static void exact_capacity(std::vector<X>* v, size_t n, bool fill) {
    if (v->capacity() >= n) {
      if (fill && v->size() < n) v->resize(n);
      return;
    }
    std::vector<X> fresh;
    fresh.reserve(n);
    fresh.assign(v->begin(), v->end());
    if (fill) fresh.resize(n);
    v->swap(fresh);
  }

  // The untied wte's merged rows for `rows` rows, keeping what they hold.
  void grow_wte_acc(size_t rows, size_t C) {
    Buffer grown = allocate_floats(rows * C);
    if (wte_acc) std::memcpy(grown.get(), wte_acc.get(), wte_acc_ids.size() * C * sizeof(float));
    wte_acc = std::move(grown);
    wte_acc_cap = rows;
    exact_capacity(&wte_acc_ids, rows, false);
  }

  // Untied wte: the gradient since zero_grad. The first backward's rows stay in the arena
  // (wte_rows, wte_touched); before a later backward overwrites them they move to wte_acc
  // (keep_wte_rows), and that backward's rows are merged in (merge_wte_rows): a row in both
  // becomes old + new, in that order, so micro-batches add up in their order (one float add per
  // element: bit-identical for any thread count).
  void keep_wte_rows(size_t C) {
    if (rows_at != RowsAt::kArena) return;
    const size_t count = wte_touched_count;
    if (count > wte_acc_cap) grow_wte_acc(count, C);
    std::memcpy(wte_acc.get(), wte_rows, count * C * sizeof(float));
    wte_acc_ids.assign(wte_touched.begin(), wte_touched.begin() + static_cast<ptrdiff_t>(count));
    rows_at = RowsAt::kAccumulated;
  }
  void merge_wte_rows(size_t C) {
    if (rows_at == RowsAt::kNone) {
      rows_at = RowsAt::kArena;
      return;
    }
    const int32_t* nid = wte_touched.data();
    const size_t a = wte_acc_ids.size(), b = wte_touched_count;
    size_t u = a + b;  // rows of the union: ids in both count once
    for (size_t i = 0, j = 0; i < a && j < b;) {
      if (wte_acc_ids[i] == nid[j]) --u, ++i, ++j;
      else if (wte_acc_ids[i] < nid[j]) ++i;
      else ++j;
    }
    if (u > wte_acc_cap) grow_wte_acc(u, C);
    wte_acc_ids.resize(u);
    // From the back, so the union overwrites only rows already read (k >= i throughout).
    float* acc = wte_acc.get();
    int32_t* ids = wte_acc_ids.data();
    ptrdiff_t i = static_cast<ptrdiff_t>(a) - 1, j = static_cast<ptrdiff_t>(b) - 1,
              k = static_cast<ptrdiff_t>(u) - 1;
    for (; j >= 0; --k) {
      float* dst = acc + k * static_cast<ptrdiff_t>(C);
      const float* cur = wte_rows + j * static_cast<ptrdiff_t>(C);
      if (i >= 0 && ids[i] > nid[j]) {
        std::memmove(dst, acc + i * static_cast<ptrdiff_t>(C), C * sizeof(float));
        ids[k] = ids[i--];
      } else if (i >= 0 && ids[i] == nid[j]) {
        const float* old = acc + i * static_cast<ptrdiff_t>(C);
        for (size_t c = 0; c < C; ++c) dst[c] = old[c] + cur[c];
        ids[k] = nid[j--];
        --i;
      } else {
        std::memcpy(dst, cur, C * sizeof(float));
        ids[k] = nid[j--];
      }
    }
  }

  // Where forward_logits writes (N,V): the arena's logits (unfused), else a buffer made on demand.
  float* logits_buffer(size_t N, size_t V) {
    if (logits != nullptr) return logits;
    if (logits_extra_rows < N) {
      logits_extra.reset();
      logits_extra = allocate_floats(N * V);
      logits_extra_rows = N;
    }
    return logits_extra.get();
  }
};

Model::Model(const ModelConfig& config) : config_(config), impl_(std::make_unique<Impl>()) {
  const size_t V = config.vocab_size, C = config.d_model, P = config.n_ctx;
  if (V == 0 || C == 0 || P == 0)
    throw Error("model shapes must be positive: vocab_size=" + std::to_string(V) +
                ", d_model=" + std::to_string(C) + ", n_ctx=" + std::to_string(P));
  if (config.n_layer > 0 && (config.n_head == 0 || C % config.n_head != 0))
    throw Error("model.n_head = " + std::to_string(config.n_head) +
                " does not divide model.d_model = " + std::to_string(C) + " (model.n_layer = " +
                std::to_string(config.n_layer) + "); every head has d_model / n_head channels");
  // The tensors in arena order, from the one table (src/model/parameters.h).
  tensors_ = parameter_tensors(config);
  num_parameters_ = tensors_.back().offset + tensors_.back().size;
  const size_t first_block_tensor = 2;  // after wte and wpe
  const size_t ln_f_tensor = first_block_tensor + 12 * config.n_layer;
  // Not touched here: init_weights or a checkpoint fills the parameters, the first backward the
  // gradients; a model that is only loaded and saved (wte import) never faults in its gradients.
  params_memory_ = allocate_zeroed(num_parameters_, /*touch=*/false);
  grads_memory_ = allocate_zeroed(num_parameters_, /*touch=*/false);
  auto views = [&](float* base) {
    ParameterTensors v{base + tensors_[0].offset, base + tensors_[1].offset,
                       base + tensors_[ln_f_tensor].offset, base + tensors_[ln_f_tensor + 1].offset,
                       config.tie_embeddings ? nullptr : base + tensors_[ln_f_tensor + 2].offset,
                       {}};
    for (size_t l = 0; l < config.n_layer; ++l) {
      const size_t t = first_block_tensor + 12 * l;
      auto at = [&](size_t i) { return base + tensors_[t + i].offset; };
      v.h.push_back(BlockTensors{at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(8),
                                 at(9), at(10), at(11)});
    }
    return v;
  };
  params_ = views(params_memory_.get());
  grads_ = views(grads_memory_.get());
  impl_->gemm.set_choice(config.gemm);  // model.gemm, or WTE_GEMM where it says auto
  if (config.matmul_precision == MatmulPrecision::bf16 && bf16_gemm_support().native) {
    gemm_precision_ = MatmulPrecision::bf16;
    Impl& m = *impl_;
    m.bf16 = true;
    m.params16 = allocate_bf16(num_parameters_);
    auto at16 = [&](const float* p) { return m.params16.get() + (p - params_memory_.get()); };
    for (const BlockTensors& b : params_.h)
      m.w16.push_back(BlockWeights16{at16(b.c_attn_w), at16(b.attn_c_proj_w), at16(b.c_fc_w),
                                     at16(b.mlp_c_proj_w)});
    m.lm_head16 = at16(lm_head());
  }
  // Tied: the scatter's norm block sums of dwte (wte is the arena's first tensor, at offset 0).
  if (config.tie_embeddings) impl_->wte_sumsq.assign(V * C / kSumOfSquaresBlock, 0.0);
  for (size_t c = 0; c < C; ++c) params_.ln_f_g[c] = 1.0f;
  for (BlockTensors& b : params_.h)
    for (size_t c = 0; c < C; ++c) b.ln_1_g[c] = b.ln_2_g[c] = 1.0f;
}

Model::~Model() = default;

uint16_t* Model::params_bf16() { return impl_->bf16 ? impl_->params16.get() : nullptr; }

void Model::init_weights(uint64_t seed) {
  params16_current_ = false;  // written below through params_
  Rng rng(seed);
  const size_t C = config_.d_model;
  auto normal = [&](float* x, size_t n, double std) {
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(rng.normal() * std);
  };
  normal(params_.wte, config_.vocab_size * C, config_.wte_init_std);
  normal(params_.wpe, config_.n_ctx * C, config_.wpe_init_std);
  for (size_t c = 0; c < C; ++c) {
    params_.ln_f_g[c] = 1.0f;
    params_.ln_f_b[c] = 0.0f;
  }
  if (params_.lm_head != nullptr) normal(params_.lm_head, config_.vocab_size * C, config_.wte_init_std);
  // Blocks, in arena order. GPT-2: the two projections into the residual stream are scaled by
  // 1/√(2·n_layer) (two residual additions per block).
  const double proj_std = kBlockInitStd / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  for (BlockTensors& b : params_.h) {
    std::fill(b.ln_1_g, b.ln_1_g + C, 1.0f);
    std::fill(b.ln_1_b, b.ln_1_b + C, 0.0f);
    normal(b.c_attn_w, C * 3 * C, kBlockInitStd);
    std::fill(b.c_attn_b, b.c_attn_b + 3 * C, 0.0f);
    normal(b.attn_c_proj_w, C * C, proj_std);
    std::fill(b.attn_c_proj_b, b.attn_c_proj_b + C, 0.0f);
    std::fill(b.ln_2_g, b.ln_2_g + C, 1.0f);
    std::fill(b.ln_2_b, b.ln_2_b + C, 0.0f);
    normal(b.c_fc_w, C * 4 * C, kBlockInitStd);
    std::fill(b.c_fc_b, b.c_fc_b + 4 * C, 0.0f);
    normal(b.mlp_c_proj_w, 4 * C * C, proj_std);
    std::fill(b.mlp_c_proj_b, b.mlp_c_proj_b + C, 0.0f);
  }
}

GradNormHead Model::grad_norm_head() const {
  return GradNormHead{impl_->wte_sumsq.data(), impl_->wte_sumsq_count};
}

SparseRowGrad Model::wte_grad_rows() {
  const Impl& m = *impl_;
  if (config_.tie_embeddings || m.rows_at == Impl::RowsAt::kNone) return {};
  if (m.rows_at == Impl::RowsAt::kArena)
    return SparseRowGrad{m.wte_rows, m.wte_touched.data(), m.wte_touched_count, config_.d_model};
  return SparseRowGrad{m.wte_acc.get(), m.wte_acc_ids.data(), m.wte_acc_ids.size(),
                       config_.d_model};
}

void Model::zero_grad() {
  // The dense gradient; an untied wte's slot is never written (its gradient is row-sparse), so it
  // is skipped and its pages stay untouched.
  const TensorSpec& first = tensors_.front();
  const size_t begin = first.sparse_grad ? first.offset + first.size : 0;
  float* g = grads_memory_.get();
  const long n = static_cast<long>(num_parameters_ - begin);
  constexpr long kChunk = 1 << 16;
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n; c += kChunk)
    std::memset(g + begin + c, 0, static_cast<size_t>(std::min(kChunk, n - c)) * sizeof(float));
  Impl& m = *impl_;
  m.rows_at = Impl::RowsAt::kNone;
  m.wte_acc_ids.clear();
  m.wte_touched_count = 0;
  m.wte_sumsq_count = 0;
}

float* Model::param(const std::string& name) {
  params16_current_ = false;
  for (const TensorSpec& t : tensors_)
    if (t.name == name) return params_memory_.get() + t.offset;
  return nullptr;
}
const float* Model::param(const std::string& name) const {
  for (const TensorSpec& t : tensors_)
    if (t.name == name) return params_memory_.get() + t.offset;
  return nullptr;
}

void Model::check_batch(const int32_t* inputs, const int32_t* targets, size_t B, size_t T) const {
  if (B == 0 || T == 0)
    throw Error("empty batch: B=" + std::to_string(B) + ", T=" + std::to_string(T));
  if (T > config_.n_ctx)
    throw Error("sequence length T=" + std::to_string(T) + " exceeds n_ctx=" +
                std::to_string(config_.n_ctx) + " (wpe has only n_ctx position rows)");
  if (inputs == nullptr) return;
  check_token_ids(inputs, B * T, config_.vocab_size, "the batch's inputs");
  if (targets != nullptr) check_token_ids(targets, B * T, config_.vocab_size, "the batch's targets");
}

void Model::reserve(size_t B, size_t T, size_t micro_batches) {
  check_batch(nullptr, nullptr, B, T);
  impl_->reserve(B, T, micro_batches, config_);
}

size_t Model::allocated_bytes() const {
  const Impl& m = *impl_;
  size_t bytes = 2 * aligned_allocation_bytes(num_parameters_ * sizeof(float));
  if (m.bf16) bytes += aligned_allocation_bytes(num_parameters_ * sizeof(uint16_t));
  if (m.arena) bytes += aligned_allocation_bytes(m.arena_floats * sizeof(float));
  if (m.arena16) bytes += aligned_allocation_bytes(m.arena16_elems * sizeof(uint16_t));
  if (m.wte_acc) bytes += aligned_allocation_bytes(m.wte_acc_cap * config_.d_model * sizeof(float));
  auto vec = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  bytes += vec(m.wte_sumsq) + vec(m.inputs) + vec(m.wte_touched) + vec(m.wte_acc_ids) +
           vec(m.scatter.row_start) + vec(m.scatter.order) + vec(m.scatter.touched) +
           vec(m.scatter.hot) + vec(m.scatter.multi) + vec(m.scatter.scratch);
  return bytes;
}

size_t Model::activation_bytes() const {
  const Impl& m = *impl_;
  return m.arena_floats * sizeof(float) +
         (m.arena16_elems + (m.bf16 ? num_parameters_ : 0)) * sizeof(uint16_t);
}

std::string Model::gemm_precision_note() const {
  const Bf16Support& s = bf16_gemm_support();
  if (gemm_precision_ == MatmulPrecision::bf16)
    return "bf16 inputs, float32 accumulation and outputs (oneDNN " + s.bf16_impl + ")";
  std::string note = "float32 (oneDNN " + s.f32_impl + ")";
  if (config_.matmul_precision == MatmulPrecision::bf16)
    note += "; model.matmul_precision = bf16 falls back to float32 on this CPU: oneDNN's bf16 "
            "matmul here is " + s.bf16_impl + ", not a native AVX512_BF16 or AMX kernel";
  note += "; model.gemm = " + std::string(to_string(impl_->gemm.choice()));
  if (impl_->gemm.choice() == GemmChoice::automatic) {
    note += " (per GEMM shape the fastest of";
    for (GemmLibrary lib : {GemmLibrary::onednn, GemmLibrary::openblas, GemmLibrary::blis})
      if (gemm_library_available(lib)) note += std::string(" ") + to_string(lib);
    note += "; plans in " + (gemm_plan_cache_path().empty() ? std::string("memory only")
                                                             : gemm_plan_cache_path()) + ")";
  }
  return note;
}

std::vector<GemmKernel> Model::gemm_kernels() const { return impl_->gemm.kernels(); }

size_t Model::loss_workspace_bytes() const {
  const Impl& m = *impl_;
  if (m.arena_floats == 0) return 0;
  return m.loss_floats * sizeof(float) + (m.bf16 ? m.loss16_elems * sizeof(uint16_t) : 0);
}

size_t Model::loss_rows() const { return impl_->loss_tiles.rows; }

const float* Model::run_forward(const int32_t* inputs, size_t B, size_t T) {
  const size_t N = B * T, C = config_.d_model, L = config_.n_layer;
  Impl& m = *impl_;
  m.reserve(B, T, 1, config_);
  std::memcpy(m.inputs.data(), inputs, N * sizeof(int32_t));
  m.B = B;
  m.T = T;
  // Step parts (set_part_timer): each section opens its own (Gemm::part).
  m.gemm.set_timer(timer_);
  // bf16 GEMMs: the weights' bf16 copies (the whole arena: one pass), unless they are current
  // (AdamW wrote them with the weights, or an earlier forward converted the same weights)
  if (m.bf16 && !params16_current_) {
    m.gemm.part("bf16_convert");
    convert_f32_to_bf16(m.params16.get(), params_memory_.get(), num_parameters_);
    params16_current_ = true;
  }

  // residual(0) = hidden_states[0] = wte[x] + wpe[t]
  m.gemm.part("lookup");
  embedding_forward(m.residual[0], inputs, params_.wte, params_.wpe, B, T, C);
  // residual(l+1) = block_l(residual(l)):  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
  for (size_t l = 0; l < L; ++l)
    block_forward(m.residual[l + 1], m.blocks[l], m.scratch, m.residual[l], params_.h[l],
                  m.bf16 ? &m.w16[l] : nullptr, B, T, C, config_.n_head, config_.ln_eps,
                  use_tiled_attention(config_, T, m.tiled_min_t), m.gemm);
  // h' = ln_f(residual(n_layer)); bf16 GEMMs: the unembedding's GEMMs (fused or not) read h'
  // through its bf16 copy, which ln_f writes in the same pass
  const float* h = m.residual[L];
  if (config_.ln_f) {
    m.gemm.part("ln_f_fwd");
    m.stream.wait();  // residual(n_layer) complete (the kernel runs outside oneDNN's stream)
    layernorm_forward(m.ln_out, m.ln_mean, m.ln_rstd, m.residual[L], params_.ln_f_g,
                      params_.ln_f_b, N, C, config_.ln_eps, m.bf16 ? m.h16 : nullptr);
    h = m.ln_out;
  } else if (m.bf16) {
    m.gemm.part("bf16_convert");
    m.stream.wait();
    convert_f32_to_bf16(m.h16, h, N * C);
  }
  return h;
}

void Model::logits_gemm(float* logits, const float* h, size_t N) {
  // logits = h' · lm_headᵀ   (N,C) x (C,V): lm_head (V,C) = wte when tied, read with strides {1, C}
  const auto n = static_cast<int64_t>(N), c = static_cast<int64_t>(config_.d_model),
             v = static_cast<int64_t>(config_.vocab_size);
  // bf16 GEMMs: h' and lm_head through their bf16 copies (run_forward made h16)
  Impl& m = *impl_;
  m.gemm.part("logits_gemm");
  m.gemm.run(logits, plain(n, v), GemmInput(h, m.h16).operand(plain(n, c)),
             GemmInput(lm_head(), m.lm_head16).operand(transposed(v, c)));
  m.stream.wait();
}

float Model::forward(const int32_t* inputs, const int32_t* targets, size_t B, size_t T,
                     size_t loss_tokens) {
  check_batch(inputs, targets, B, T);
  const float* h = run_forward(inputs, B, T);
  const size_t N = B * T, V = config_.vocab_size, C = config_.d_model;
  Impl& m = *impl_;
  const float grad_scale = 1.0f / static_cast<float>(loss_tokens == 0 ? N : loss_tokens);
  if (m.loss_tiles.fused()) {
    // loss, dh' and dlm_head (tied: dwte) in one pass, no (N,V) buffer; dlm_head is added to
    // (the gradient accumulates, backward()); under bf16 GEMMs the tiles' GEMMs read h16,
    // lm_head16 and a bf16 copy of each dlogits tile
    m.gemm.part("fused_loss");
    unembedding_loss_forward_backward(
        m.losses, config_.ln_f ? m.dln_out : m.dresidual,
        config_.tie_embeddings ? grads_.wte : grads_.lm_head, GemmInput(h, m.h16),
        GemmInput(lm_head(), m.lm_head16), targets, N, V, C, grad_scale, m.loss_tiles, m.loss_ws,
        m.loss_ws16, m.gemm, /*accumulate_dW=*/true);
    m.fused_grads = true;
  } else {
    logits_gemm(m.logits, h, N);
    // loss = mean_n CE(logits[n], targets[n]); dlogits = (softmax - onehot) · grad_scale, in place
    // bf16 GEMMs: the backward's GEMMs read dlogits' bf16 copy, made here row by row
    m.gemm.part("cross_entropy");
    softmax_cross_entropy(m.logits, m.losses, targets, N, V, grad_scale,
                          m.bf16 ? m.dlogits16 : nullptr);
    m.fused_grads = false;
  }
  m.gemm.part(nullptr);
  m.has_dlogits = true;
  m.wte_sumsq_count = 0;  // the gradient is about to change (the fused loss has written some)
  double total = 0.0;  // fixed order: the same bits for any thread count
  for (size_t n = 0; n < N; ++n) total += m.losses[n];
  return static_cast<float>(total / static_cast<double>(N));
}

void Model::forward_losses(const int32_t* inputs, const int32_t* targets, size_t B, size_t T,
                           float* losses) {
  if (targets == nullptr || losses == nullptr)
    throw Error("Model::forward_losses: targets and losses must be given");
  check_batch(inputs, targets, B, T);
  const float* h = run_forward(inputs, B, T);
  const size_t N = B * T, V = config_.vocab_size;
  Impl& m = *impl_;
  m.has_dlogits = false;
  if (m.loss_tiles.fused()) {
    unembedding_loss_forward(losses, GemmInput(h, m.h16), GemmInput(lm_head(), m.lm_head16),
                             targets, N, V, config_.d_model, m.loss_tiles, m.loss_ws, m.gemm);
  } else {
    logits_gemm(m.logits, h, N);
    cross_entropy_loss(losses, m.logits, targets, N, V);
  }
  m.gemm.part(nullptr);
}

const float* Model::forward_logits(const int32_t* inputs, size_t B, size_t T,
                                   const int32_t* targets, float* losses) {
  check_batch(inputs, targets, B, T);
  const float* h = run_forward(inputs, B, T);
  const size_t N = B * T, V = config_.vocab_size;
  impl_->has_dlogits = false;
  float* logits = impl_->logits_buffer(N, V);
  logits_gemm(logits, h, N);
  impl_->gemm.part(nullptr);
  if (targets != nullptr && losses != nullptr)
    cross_entropy_loss(losses, logits, targets, N, V);
  return logits;
}

const float* Model::hidden_states() const { return impl_->residual.empty() ? nullptr : impl_->residual[0]; }

const float* Model::residual(size_t l) const {
  if (l > config_.n_layer)
    throw Error("residual(" + std::to_string(l) + "): the model has n_layer = " +
                std::to_string(config_.n_layer) + " blocks, so l must be in [0, " +
                std::to_string(config_.n_layer) + "]");
  return impl_->residual.empty() ? nullptr : impl_->residual[l];
}

const float* Model::final_hidden() const {
  if (impl_->residual.empty()) return nullptr;
  return config_.ln_f ? impl_->ln_out : impl_->residual[config_.n_layer];
}

void Model::backward() {
  Impl& m = *impl_;
  if (!m.has_dlogits) throw Error("Model::backward() called without a training forward()");
  const size_t B = m.B, T = m.T, N = B * T, C = config_.d_model, V = config_.vocab_size,
               L = config_.n_layer;
  const auto n = static_cast<int64_t>(N), c = static_cast<int64_t>(C), v = static_cast<int64_t>(V);
  const GemmInput h(config_.ln_f ? m.ln_out : m.residual[L], m.bf16 ? m.h16 : nullptr);
  float* dres = m.dresidual;
  m.gemm.set_timer(timer_);
  const GemmInput dlogits(m.logits, m.bf16 ? m.dlogits16 : nullptr);
  const GemmInput head(lm_head(), m.bf16 ? m.lm_head16 : nullptr);

  if (!m.fused_grads) {
    // logits = h' · lm_headᵀ  =>  dh' = dlogits · lm_head  (N,V)x(V,C), written
    //                         =>  dlm_head += dlogitsᵀ · h'  (V,N)x(N,C), added (oneDNN's sum
    // post-op). Tied: lm_head is wte. (The fused loss formed dlm_head and dh' in forward(), tile
    // by tile, the same way.)
    // dlm_head second: the two are independent (same bits in either order), and the last GEMM's
    // output is what stays in the cache for the scatter, the gradient norm and AdamW; dh' is only
    // N×C, dlm_head V×C (at V 8192, C 256 this took AdamW from 0.85-0.90 to 0.59-0.62 ms at 2
    // threads: wte profile step).
    m.gemm.part("dh_gemm");
    m.gemm.run(config_.ln_f ? m.dln_out : dres, plain(n, c), dlogits.operand(plain(n, v)),
               head.operand(plain(v, c)));
    m.gemm.part("dlm_head_gemm");
    m.gemm.run(config_.tie_embeddings ? grads_.wte : grads_.lm_head, plain(v, c),
               dlogits.operand(transposed(n, v)), h.operand(plain(n, c)), nullptr,
               /*accumulate=*/true);
  }
  // h' = ln_f(residual(n_layer))  =>  dres, dg, db. The kernel adds (+=) into all three: dg and
  // db into the gradient (zeroed once per step by zero_grad), dres after zeroing it (it holds
  // nothing yet: dh' went to dln_out). It reads dh', which the GEMMs above may still be writing.
  // bf16 GEMMs: the last block's first GEMMs read dres through its bf16 copy, which ln_f's
  // backward writes in the same pass (without ln_f, a conversion of the GEMM's output).
  m.gemm.part("ln_f_bwd");
  m.stream.wait();
  const Activation dx(dres, m.bf16 && L > 0 ? m.dresidual16 : nullptr);
  if (config_.ln_f) {
    std::memset(dres, 0, N * C * sizeof(float));
    layernorm_backward(dres, grads_.ln_f_g, grads_.ln_f_b, m.dln_out, m.residual[L],
                       params_.ln_f_g, m.ln_mean, m.ln_rstd, N, C, dx.bf16);
  } else if (dx.bf16 != nullptr) {
    m.gemm.part("bf16_convert");
    to_bf16(dx, N * C);
  }
  // residual(l+1) = block_l(residual(l)), last block first: dres becomes d residual(l)
  for (size_t l = L; l-- > 0;)
    block_backward(dx, grads_.h[l], m.scratch, m.blocks[l], m.residual[l], params_.h[l],
                   m.bf16 ? &m.w16[l] : nullptr, B, T, C, config_.n_head,
                   use_tiled_attention(config_, T, m.tiled_min_t), m.gemm);
  // residual(0) = wte[x] + wpe[t]  =>  dwte[x] += dres (scatter), dwpe[t] += sum_b dres
  m.gemm.part("scatter");
  if (config_.tie_embeddings) {
    // The scatter is the last writer of dwte in this backward, so its block sums are those of
    // the whole gradient since zero_grad (wte is the arena's first tensor: its blocks are the
    // norm's first).
    m.wte_sumsq_count = embedding_backward_wte(grads_.wte, dres, m.inputs.data(), N, C, V,
                                               &m.scatter, m.wte_sumsq.data());
  } else {
    // Untied: only the touched rows' sums, for the optimizer's lazy row update, merged with the
    // rows of the earlier backward passes since zero_grad.
    m.keep_wte_rows(C);
    embedding_backward_rows(m.wte_rows, m.wte_touched.data(), &m.wte_touched_count, dres,
                            m.inputs.data(), N, C, V, &m.scatter);
    m.merge_wte_rows(C);
  }
  m.gemm.part("dwpe");
  embedding_backward_wpe(grads_.wpe, dres, B, T, C);
  m.gemm.part(nullptr);
  m.has_dlogits = false;
}

}  // namespace wte
