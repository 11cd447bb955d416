#include "src/model/matmul.h"

#include <cstring>
#include <string>
#include <unordered_map>

#include "wte/error.h"
#include "wte/kernels.h"

namespace wte {

using dnnl::memory;
using dt = dnnl::memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

struct Gemm::Prim {
  dnnl::matmul prim;
  memory src, wei, dst, bias;
};

Gemm::Gemm() : stream_(cpu_engine()) {}
Gemm::~Gemm() = default;

void Gemm::run(float* dst, const MatView& dst_v, const float* src, const MatView& src_v,
               const float* wei, const MatView& wei_v, const float* bias, bool accumulate) {
  std::vector<int64_t> key;
  for (const MatView* v : {&dst_v, &src_v, &wei_v}) {
    key.push_back(static_cast<int64_t>(v->dims.size()));
    key.insert(key.end(), v->dims.begin(), v->dims.end());
    key.insert(key.end(), v->strides.begin(), v->strides.end());
  }
  key.push_back(bias != nullptr);
  key.push_back(accumulate);
  std::unique_ptr<Prim>& p = cache_[key];
  if (!p) {
    p = std::make_unique<Prim>();
    const memory::desc src_md(src_v.dims, dt::f32, src_v.strides);
    const memory::desc wei_md(wei_v.dims, dt::f32, wei_v.strides);
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
    p->src = memory(src_md, cpu_engine(), DNNL_MEMORY_NONE);
    p->wei = memory(wei_md, cpu_engine(), DNNL_MEMORY_NONE);
    p->dst = memory(dst_md, cpu_engine(), DNNL_MEMORY_NONE);
    if (bias != nullptr) p->bias = memory(bias_md, cpu_engine(), DNNL_MEMORY_NONE);
  }
  p->src.set_data_handle(const_cast<float*>(src));
  p->wei.set_data_handle(const_cast<float*>(wei));
  p->dst.set_data_handle(dst);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, p->src}, {DNNL_ARG_WEIGHTS, p->wei}, {DNNL_ARG_DST, p->dst}};
  if (bias != nullptr) {
    p->bias.set_data_handle(const_cast<float*>(bias));
    args.emplace(DNNL_ARG_BIAS, p->bias);
  }
  p->prim.execute(stream_, args);
}

void Gemm::start_timing(StepTimes* times) {
  times_ = times;
  if (times_ != nullptr) last_mark_ = std::chrono::steady_clock::now();
}

void Gemm::mark(double StepTimes::*field) {
  if (times_ == nullptr) return;
  stream_.wait();
  const auto now = std::chrono::steady_clock::now();
  times_->*field += std::chrono::duration<double>(now - last_mark_).count();
  last_mark_ = now;
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, size_t N,
                    size_t C, size_t OC, Gemm& gemm) {
  const auto n = static_cast<int64_t>(N), c = static_cast<int64_t>(C),
             oc = static_cast<int64_t>(OC);
  gemm.run(out, plain(n, oc), inp, plain(n, c), weight, plain(c, oc), bias);
  gemm.wait();
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, size_t N, size_t C, size_t OC,
                     Gemm& gemm, double StepTimes::*gemm_part) {
  const auto n = static_cast<int64_t>(N), c = static_cast<int64_t>(C),
             oc = static_cast<int64_t>(OC);
  // dinp = dout · weightᵀ   (N,OC) x (OC,C): weight (C,OC) read transposed by strides
  gemm.run(dinp, plain(n, c), dout, plain(n, oc), weight, transposed(c, oc));
  // dweight = inpᵀ · dout   (C,N) x (N,OC): inp (N,C) read transposed by strides
  gemm.run(dweight, plain(c, oc), inp, transposed(n, c), dout, plain(n, oc));
  gemm.wait();
  if (gemm_part != nullptr) gemm.mark(gemm_part);
  if (dbias != nullptr) {
    std::memset(dbias, 0, OC * sizeof(float));
    bias_backward(dbias, dout, N, OC);
    if (gemm_part != nullptr) gemm.mark(&StepTimes::bias_bwd);
  }
}

}  // namespace wte
