#include "src/model/matmul.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>

#include "src/model/gemm_plan.h"
#include "src/model/onednn_isa.h"
#include "wte/error.h"
#include "wte/kernels.h"

namespace wte {

using dnnl::memory;
using dt = dnnl::memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

Bf16Buffer allocate_bf16(size_t n) {
  return Bf16Buffer(static_cast<uint16_t*>(allocate_aligned(n * sizeof(uint16_t), /*touch=*/true)));
}

namespace {

// A primitive's impl_info_str with the ISA it runs: brgemm kernels name theirs
// ("brg:avx512_core_bf16"); oneDNN's jit GEMM ("gemm:jit") runs at the most capable ISA oneDNN
// uses here, which is appended: "gemm:jit (avx512_core_bf16)".
std::string impl_with_isa(const std::string& impl) {
  for (const char* named : {"sse", "avx", "amx", "ref", "none"})
    if (impl.find(named) != std::string::npos) return impl;
  return impl + " (" + onednn_isa() + ")";
}

// impl_info_str of a plain (M,K)x(K,N) matmul with inputs of type `in` and an f32 output, or
// "none (<oneDNN's error>)" when oneDNN has no kernel for it.
std::string probe_impl(dt in, int64_t M, int64_t K, int64_t N) {
  try {
    const memory::desc src({M, K}, in, memory::dims{K, 1}), wei({K, N}, in, memory::dims{N, 1}),
        dst({M, N}, dt::f32, memory::dims{N, 1});
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), cpu_engine());
    return impl_with_isa(pd.impl_info_str());
  } catch (const dnnl::error& e) {
    return std::string("none (") + e.what() + ")";
  }
}

}  // namespace

const Bf16Support& bf16_gemm_support() {
  static const Bf16Support support = [] {
    Bf16Support s;
    s.bf16_impl = probe_impl(dt::bf16, 256, 256, 256);
    s.f32_impl = probe_impl(dt::f32, 256, 256, 256);
    s.native = s.bf16_impl.rfind("none", 0) != 0 &&
               (s.bf16_impl.find("bf16") != std::string::npos ||
                s.bf16_impl.find("amx") != std::string::npos);
    return s;
  }();
  return support;
}

struct Gemm::Prim {
  dnnl::matmul prim;
  memory src, wei, dst, bias;
  std::string impl;
  bool bf16 = false;
  std::string part;  // the part open when it was created
  GemmLibrary library = GemmLibrary::onednn;
  BlasGemm blas;     // the GEMM as a BLAS call (library != onednn)
  bool accumulate = false;
};

namespace {

// The library a choice forces (nullopt for auto).
std::optional<GemmLibrary> forced_library(GemmChoice c) {
  switch (c) {
    case GemmChoice::onednn: return GemmLibrary::onednn;
    case GemmChoice::openblas: return GemmLibrary::openblas;
    case GemmChoice::blis: return GemmLibrary::blis;
    case GemmChoice::automatic: break;
  }
  return std::nullopt;
}

// The GEMM dst = src · wei as a row-major BLAS call, when the views allow one: rank 2, dst's rows
// contiguous, src and wei each row-major or the transpose of a row-major matrix.
std::optional<BlasGemm> as_blas(const MatView& dst, const MatView& src, const MatView& wei) {
  if (dst.dims.size() != 2 || src.dims.size() != 2 || wei.dims.size() != 2) return std::nullopt;
  BlasGemm g;
  g.M = dst.dims[0];
  g.N = dst.dims[1];
  g.K = src.dims[1];
  if (dst.strides[1] != 1 || dst.strides[0] < std::max<int64_t>(g.N, 1)) return std::nullopt;
  g.ldc = dst.strides[0];
  // A (rows, cols) operand: row-major with ld = strides[0] >= cols, or transposed with
  // ld = strides[1] >= rows.
  const auto layout = [](const MatView& v, bool& trans, int64_t& ld) {
    const int64_t rows = v.dims[0], cols = v.dims[1];
    if (v.strides[1] == 1 && v.strides[0] >= std::max<int64_t>(cols, 1)) {
      trans = false;
      ld = v.strides[0];
      return true;
    }
    if (v.strides[0] == 1 && v.strides[1] >= std::max<int64_t>(rows, 1)) {
      trans = true;
      ld = v.strides[1];
      return true;
    }
    return false;
  };
  if (!layout(src, g.trans_a, g.lda) || !layout(wei, g.trans_b, g.ldb)) return std::nullopt;
  return g;
}

// The planner's key of a GEMM: the BLAS call, accumulate, bias and the threads it runs on.
std::string plan_key(const BlasGemm& g, bool accumulate, bool bias, int threads) {
  return "f32 M" + std::to_string(g.M) + " N" + std::to_string(g.N) + " K" + std::to_string(g.K) +
         (g.trans_a ? " At" : " An") + std::to_string(g.lda) + (g.trans_b ? " Bt" : " Bn") +
         std::to_string(g.ldb) + " C" + std::to_string(g.ldc) + (accumulate ? " acc" : "") +
         (bias ? " bias" : "") + " threads" + std::to_string(threads);
}

// dst (M rows of N, row stride ldc) += bias (N) in every row: the bias of a BLAS GEMM, added to
// its product as oneDNN adds it (one float add per element).
void add_bias_rows(float* dst, const float* bias, int64_t M, int64_t N, int64_t ldc) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    float* row = dst + i * ldc;
    for (int64_t j = 0; j < N; ++j) row[j] += bias[j];
  }
}

// The threads a GEMM started here runs on: one inside a parallel region (a worker), else OpenMP's.
int gemm_threads() { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

}  // namespace

GemmChoice resolve_gemm_choice(GemmChoice configured) {
  GemmChoice c = configured;
  if (c == GemmChoice::automatic) {
    const char* env = std::getenv("WTE_GEMM");
    if (env != nullptr && *env != '\0') {
      const std::string v = env;
      if (v == "auto") c = GemmChoice::automatic;
      else if (v == "onednn") c = GemmChoice::onednn;
      else if (v == "openblas") c = GemmChoice::openblas;
      else if (v == "blis") c = GemmChoice::blis;
      else
        throw UsageError("environment variable WTE_GEMM = '" + v +
                         "' is not a GEMM library: use auto, onednn, openblas or blis");
    }
  }
  const std::optional<GemmLibrary> lib = forced_library(c);
  if (lib && !gemm_library_available(*lib))
    throw Error(std::string("GEMM library ") + to_string(c) + " (model.gemm or WTE_GEMM) cannot run: " +
                gemm_library_version(*lib));
  return c;
}

Gemm::Gemm() : choice_(resolve_gemm_choice(GemmChoice::automatic)), stream_(cpu_engine()) {}
Gemm::~Gemm() = default;

void Gemm::set_choice(GemmChoice choice) {
  choice_ = resolve_gemm_choice(choice);
  for (const auto& w : workers_) w->set_choice(choice_);
}

// Under auto, the planner's choice (each candidate timed on this GEMM's own operands, into a
// scratch dst, the first time the machine meets it); a forced library where the GEMM is a BLAS
// call; oneDNN otherwise.
GemmLibrary Gemm::pick_library(Prim& p, const Operand& src, const Operand& wei, float* dst,
                               const float* bias, bool accumulate) {
  if (const std::optional<GemmLibrary> forced = forced_library(choice_)) return *forced;
  std::vector<GemmLibrary> candidates;
  for (GemmLibrary lib : {GemmLibrary::onednn, GemmLibrary::openblas, GemmLibrary::blis})
    if (gemm_library_available(lib)) candidates.push_back(lib);
  if (candidates.size() == 1) return GemmLibrary::onednn;
  const BlasGemm& g = p.blas;
  std::vector<float> scratch(static_cast<size_t>((g.M - 1) * g.ldc + g.N), 0.0f);
  const auto time_one = [&](GemmLibrary lib) {
    const auto t0 = std::chrono::steady_clock::now();
    p.library = lib;
    execute(p, scratch.data(), src.data, wei.data, bias);
    stream_.wait();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  return plan_gemm(plan_key(g, accumulate, bias != nullptr, gemm_threads()), candidates, time_one);
}

void Gemm::execute(Prim& p, float* dst, const void* src, const void* wei, const float* bias) {
  if (p.library != GemmLibrary::onednn) {
    stream_.wait();  // oneDNN's earlier GEMMs on this stream are done
    blas_sgemm(p.library, p.blas, static_cast<const float*>(src), static_cast<const float*>(wei),
               dst, p.accumulate, gemm_threads());
    if (bias != nullptr) add_bias_rows(dst, bias, p.blas.M, p.blas.N, p.blas.ldc);
    return;
  }
  p.src.set_data_handle(const_cast<void*>(src));
  p.wei.set_data_handle(const_cast<void*>(wei));
  p.dst.set_data_handle(dst);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, p.src}, {DNNL_ARG_WEIGHTS, p.wei}, {DNNL_ARG_DST, p.dst}};
  if (bias != nullptr) {
    p.bias.set_data_handle(const_cast<float*>(bias));
    args.emplace(DNNL_ARG_BIAS, p.bias);
  }
  p.prim.execute(stream_, args);
}

void Gemm::run(float* dst, const MatView& dst_v, const Operand& src, const Operand& wei,
               const float* bias, bool accumulate) {
  const MatView& src_v = src.view;
  const MatView& wei_v = wei.view;
  if (src.type != wei.type)
    throw Error("Gemm::run: src and weights of different types (both f32 or both bf16)");
  std::vector<int64_t> key;
  for (const MatView* v : {&dst_v, &src_v, &wei_v}) {
    key.push_back(static_cast<int64_t>(v->dims.size()));
    key.insert(key.end(), v->dims.begin(), v->dims.end());
    key.insert(key.end(), v->strides.begin(), v->strides.end());
  }
  key.push_back(bias != nullptr);
  key.push_back(accumulate);
  key.push_back(static_cast<int64_t>(src.type));
  std::unique_ptr<Prim>& p = cache_[key];
  if (!p) {
    p = std::make_unique<Prim>();
    const memory::desc src_md(src_v.dims, src.type, src_v.strides);
    const memory::desc wei_md(wei_v.dims, wei.type, wei_v.strides);
    const memory::desc dst_md(dst_v.dims, dt::f32, dst_v.strides);
    // Bias (1, N) (or (1,1,1,N) at rank 4): the only bias shape oneDNN 2.6 runs fast.
    const size_t rank = dst_v.dims.size();
    if (rank < 2 || src_v.dims.size() != rank || wei_v.dims.size() != rank)
      throw Error("Gemm::run: operands of rank " + std::to_string(src_v.dims.size()) + ", " +
                  std::to_string(wei_v.dims.size()) + ", " + std::to_string(rank) +
                  "; expected one rank >= 2");
    const int64_t n_cols = dst_v.dims[rank - 1];
    memory::dims bias_dims(rank, 1), bias_strides(rank, n_cols);
    bias_dims[rank - 1] = n_cols;
    bias_strides[rank - 1] = 1;
    const memory::desc bias_md(bias_dims, dt::f32, bias_strides);
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::desc desc = bias != nullptr
                                        ? dnnl::matmul::desc(src_md, wei_md, bias_md, dst_md)
                                        : dnnl::matmul::desc(src_md, wei_md, dst_md);
    const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
    p->prim = dnnl::matmul(pd);
    p->impl = impl_with_isa(pd.impl_info_str());
    p->bf16 = src.type == dt::bf16;
    if (part_ != nullptr) p->part = part_;
    p->src = memory(src_md, cpu_engine(), DNNL_MEMORY_NONE);
    p->wei = memory(wei_md, cpu_engine(), DNNL_MEMORY_NONE);
    p->dst = memory(dst_md, cpu_engine(), DNNL_MEMORY_NONE);
    if (bias != nullptr) p->bias = memory(bias_md, cpu_engine(), DNNL_MEMORY_NONE);
    p->accumulate = accumulate;
    // float32 GEMMs that are one BLAS call may run on OpenBLAS or BLIS (model.gemm)
    const std::optional<BlasGemm> blas =
        p->bf16 ? std::nullopt : as_blas(dst_v, src_v, wei_v);
    if (blas) {
      p->blas = *blas;
      p->library = pick_library(*p, src, wei, dst, bias, accumulate);
      if (p->library != GemmLibrary::onednn) p->impl = gemm_library_version(p->library);
    }
  }
  execute(*p, dst, src.data, wei.data, bias);
}

void Gemm::set_timer(PartTimer* timer) {
  timer_ = timer;
  part_ = nullptr;
}

void Gemm::part(const char* name) {
  if (timer_ != nullptr) {
    const auto now = std::chrono::steady_clock::now();
    if (part_ != nullptr) {
      stream_.wait();
      const auto end = std::chrono::steady_clock::now();
      timer_->add(part_, std::chrono::duration<double>(end - part_start_).count());
      part_start_ = end;
    } else {
      part_start_ = now;
    }
  }
  part_ = name;
}

Activation to_bf16(Activation a, size_t n) {
  if (a.bf16 != nullptr) convert_f32_to_bf16(a.bf16, a.f32, n);
  return a;
}

std::vector<GemmKernel> Gemm::kernels() const {
  std::vector<GemmKernel> out;
  for (const auto& [key, p] : cache_) out.push_back({p->part, p->impl, p->bf16, p->library});
  for (const auto& w : workers_) {
    const std::vector<GemmKernel> theirs = w->kernels();
    out.insert(out.end(), theirs.begin(), theirs.end());
  }
  return out;
}

Gemm& Gemm::worker(size_t t) {
  while (workers_.size() <= t) {
    workers_.push_back(std::make_unique<Gemm>());
    workers_.back()->choice_ = choice_;
  }
  workers_[t]->part_ = part_;
  return *workers_[t];
}

void matmul_forward(Activation out, GemmInput inp, GemmInput weight, const float* bias, size_t N,
                    size_t C, size_t OC, Gemm& gemm) {
  const auto n = static_cast<int64_t>(N), c = static_cast<int64_t>(C),
             oc = static_cast<int64_t>(OC);
  gemm.run(out.f32, plain(n, oc), inp.operand(plain(n, c)), weight.operand(plain(c, oc)), bias);
  gemm.wait();
  if (out.bf16 != nullptr) {
    gemm.part("bf16_convert");
    to_bf16(out, N * OC);
  }
}

void matmul_backward(Activation dinp, float* dweight, float* dbias, GemmInput dout, GemmInput inp,
                     GemmInput weight, size_t N, size_t C, size_t OC, Gemm& gemm) {
  const auto n = static_cast<int64_t>(N), c = static_cast<int64_t>(C),
             oc = static_cast<int64_t>(OC);
  // The bias sum first, while the float32 dout its producer just wrote is still in cache: the bf16
  // GEMMs read only dout's bf16 copy, so after them the float32 dout comes from memory.
  if (dbias != nullptr) {
    const char* gemm_part = gemm.current_part();
    gemm.part("bias_bwd");
    bias_backward(dbias, dout.f32, N, OC);  // dbias += Σ_n dout[n,:]
    gemm.part(gemm_part);
  }
  // dinp = dout · weightᵀ   (N,OC) x (OC,C): weight (C,OC) read transposed by strides
  gemm.run(dinp.f32, plain(n, c), dout.operand(plain(n, oc)), weight.operand(transposed(c, oc)));
  // dweight += inpᵀ · dout   (C,N) x (N,OC): inp (N,C) read transposed by strides; added to the
  // gradient (oneDNN's sum post-op)
  gemm.run(dweight, plain(c, oc), inp.operand(transposed(n, c)), dout.operand(plain(n, oc)),
           nullptr, /*accumulate=*/true);
  gemm.wait();
  if (dinp.bf16 != nullptr) {
    gemm.part("bf16_convert");
    to_bf16(dinp, N * C);
  }
  gemm.part(nullptr);
}

}  // namespace wte
