#include "src/model/layernorm.h"

#include "src/model/matmul.h"

namespace wte {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

OnednnLayerNorm::OnednnLayerNorm(size_t N, size_t C, float eps) {
  const auto n = static_cast<memory::dim>(N), c = static_cast<memory::dim>(C);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  memory::desc data_md({n, c}, dt::f32, tag::ab);
  // forward_training, so mean and variance are kept for backward.
  dnnl::layer_normalization_forward::desc fwd_desc(dnnl::prop_kind::forward_training, data_md,
                                                   eps, flags);
  dnnl::layer_normalization_forward::primitive_desc fwd_pd(fwd_desc, cpu_engine());
  dnnl::layer_normalization_backward::desc bwd_desc(dnnl::prop_kind::backward, data_md, data_md,
                                                    eps, flags);
  dnnl::layer_normalization_backward::primitive_desc bwd_pd(bwd_desc, cpu_engine(), fwd_pd);
  fwd_ = dnnl::layer_normalization_forward(fwd_pd);
  bwd_ = dnnl::layer_normalization_backward(bwd_pd);
  auto make = [](const memory::desc& md) { return memory(md, cpu_engine(), DNNL_MEMORY_NONE); };
  src_ = make(data_md);
  dst_ = make(data_md);
  diff_src_ = make(data_md);
  diff_dst_ = make(data_md);
  mean_ = make(fwd_pd.mean_desc());
  variance_ = make(fwd_pd.variance_desc());
  memory::desc c_md({c}, dt::f32, tag::a);
  scale_ = make(c_md);
  shift_ = make(c_md);
  diff_scale_ = make(c_md);
  diff_shift_ = make(c_md);
}

void OnednnLayerNorm::forward(float* out, float* mean, float* var, const float* inp,
                              const float* g, const float* b, dnnl::stream& stream) {
  src_.set_data_handle(const_cast<float*>(inp));
  dst_.set_data_handle(out);
  mean_.set_data_handle(mean);
  variance_.set_data_handle(var);
  scale_.set_data_handle(const_cast<float*>(g));
  shift_.set_data_handle(const_cast<float*>(b));
  fwd_.execute(stream, {{DNNL_ARG_SRC, src_},
                        {DNNL_ARG_DST, dst_},
                        {DNNL_ARG_MEAN, mean_},
                        {DNNL_ARG_VARIANCE, variance_},
                        {DNNL_ARG_SCALE, scale_},
                        {DNNL_ARG_SHIFT, shift_}});
}

void OnednnLayerNorm::backward(float* dinp, float* dg, float* db, const float* dout,
                               const float* inp, const float* g, const float* b, const float* mean,
                               const float* var, dnnl::stream& stream) {
  src_.set_data_handle(const_cast<float*>(inp));
  mean_.set_data_handle(const_cast<float*>(mean));
  variance_.set_data_handle(const_cast<float*>(var));
  scale_.set_data_handle(const_cast<float*>(g));
  shift_.set_data_handle(const_cast<float*>(b));
  diff_dst_.set_data_handle(const_cast<float*>(dout));
  diff_src_.set_data_handle(dinp);
  diff_scale_.set_data_handle(dg);
  diff_shift_.set_data_handle(db);
  bwd_.execute(stream, {{DNNL_ARG_SRC, src_},
                        {DNNL_ARG_MEAN, mean_},
                        {DNNL_ARG_VARIANCE, variance_},
                        {DNNL_ARG_SCALE, scale_},
                        {DNNL_ARG_SHIFT, shift_},
                        {DNNL_ARG_DIFF_DST, diff_dst_},
                        {DNNL_ARG_DIFF_SRC, diff_src_},
                        {DNNL_ARG_DIFF_SCALE, diff_scale_},
                        {DNNL_ARG_DIFF_SHIFT, diff_shift_}});
}

}  // namespace wte
