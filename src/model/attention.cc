#include "src/model/attention.h"

#include <cmath>

#include "wte/kernels.h"

namespace wte {
namespace {

// The strided (B,NH,T,hs) views of this layer. All four are rank 4 so one primitive batches over
// B·NH matrices.
struct HeadViews {
  int64_t B, NH, T, hs, C;
  // Head h of q, k or v inside qkv (B,T,3C): (B,NH,T,hs).
  MatView qkv_part() const { return {{B, NH, T, hs}, {T * 3 * C, hs, 3 * C, 1}}; }
  // Its transpose (B,NH,hs,T), for kᵀ and vᵀ.
  MatView qkv_part_t() const { return {{B, NH, hs, T}, {T * 3 * C, hs, 1, 3 * C}}; }
  // Head h inside a (B,T,C) tensor (out, dout): (B,NH,T,hs).
  MatView merged() const { return {{B, NH, T, hs}, {T * C, hs, C, 1}}; }
  // att (B,NH,T,T), plain, and its per-matrix transpose.
  MatView att() const { return {{B, NH, T, T}, {NH * T * T, T * T, T, 1}}; }
  MatView att_t() const { return {{B, NH, T, T}, {NH * T * T, T * T, 1, T}}; }
};

HeadViews views(size_t B, size_t T, size_t C, size_t NH) {
  return {static_cast<int64_t>(B), static_cast<int64_t>(NH), static_cast<int64_t>(T),
          static_cast<int64_t>(C / NH), static_cast<int64_t>(C)};
}

}  // namespace

void attention_forward(Activation out, Activation att, GemmInput qkv, size_t B, size_t T,
                       size_t C, size_t NH, Gemm& gemm) {
  const HeadViews v = views(B, T, C, NH);
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const size_t N = B * T, Z = B * NH;
  // q, k, v of every head: strided views into qkv, or into its bf16 copy.
  const GemmInput q = qkv, k = qkv.at(C), val = qkv.at(2 * C);
  // preatt = q · kᵀ   (Z,T,hs) x (Z,hs,T) -> (Z,T,T), into att
  gemm.part("attn_qk_fwd");
  gemm.run(att.f32, v.att(), q.operand(v.qkv_part()), k.operand(v.qkv_part_t()));
  gemm.wait();
  // att = causal_softmax(preatt / √hs), in place (and its bf16 copy for bf16 GEMMs)
  gemm.part("softmax_fwd");
  attention_softmax_forward(att.f32, att.f32, Z, T, scale, att.bf16);
  // out_h = att · v_h   (Z,T,T) x (Z,T,hs) -> head h's columns of out
  gemm.part("attn_v_fwd");
  gemm.run(out.f32, v.merged(), GemmInput(att).operand(v.att()), val.operand(v.qkv_part()));
  gemm.wait();
  if (out.bf16 != nullptr) {
    gemm.part("bf16_convert");
    to_bf16(out, N * C);  // c_proj's input
  }
}

void attention_backward(Activation dqkv, Activation datt, GemmInput dout, GemmInput qkv,
                        GemmInput att, size_t B, size_t T, size_t C, size_t NH, Gemm& gemm) {
  const HeadViews v = views(B, T, C, NH);
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const size_t N = B * T, Z = B * NH;
  const GemmInput q = qkv, k = qkv.at(C), val = qkv.at(2 * C);
  float* dq = dqkv.f32;
  // out_h = att · v_h  =>  datt = dout_h · v_hᵀ   (Z,T,hs) x (Z,hs,T)
  gemm.part("attn_v_bwd");
  gemm.run(datt.f32, v.att(), dout.operand(v.merged()), val.operand(v.qkv_part_t()));
  //                    =>  dv_h = attᵀ · dout_h   (Z,T,T) x (Z,T,hs), into dqkv's v columns
  gemm.run(dq + 2 * C, v.qkv_part(), att.operand(v.att_t()), dout.operand(v.merged()));
  gemm.wait();
  // att = causal_softmax(preatt / √hs)  =>  dpreatt (in place; 0 above the diagonal; and its
  // bf16 copy for bf16 GEMMs)
  gemm.part("softmax_bwd");
  attention_softmax_backward(datt.f32, datt.f32, att.f32, Z, T, scale, datt.bf16);
  const GemmInput dp(datt);
  // preatt = q_h · k_hᵀ  =>  dq_h = dpreatt · k_h    (Z,T,T) x (Z,T,hs)
  gemm.part("attn_qk_bwd");
  gemm.run(dq, v.qkv_part(), dp.operand(v.att()), k.operand(v.qkv_part()));
  //                      =>  dk_h = dpreattᵀ · q_h   (Z,T,T) x (Z,T,hs)
  gemm.run(dq + C, v.qkv_part(), dp.operand(v.att_t()), q.operand(v.qkv_part()));
  gemm.wait();
  if (dqkv.bf16 != nullptr) {
    gemm.part("bf16_convert");
    to_bf16(dqkv, N * 3 * C);  // c_attn's backward reads it
  }
}

}  // namespace wte
