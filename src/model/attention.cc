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

void attention_forward(float* out, float* att, const float* qkv, uint16_t* qkv16, uint16_t* att16,
                       size_t B, size_t T, size_t C, size_t NH, Gemm& gemm) {
  const HeadViews v = views(B, T, C, NH);
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const size_t N = B * T, Z = B * NH;
  // q, k, v of every head: strided views into qkv, or into its bf16 copy.
  if (qkv16 != nullptr) {
    convert_f32_to_bf16(qkv16, qkv, N * 3 * C);
    gemm.mark(&StepTimes::bf16_convert);
  }
  const GemmInput q(qkv, qkv16), k(qkv + C, qkv16 ? qkv16 + C : nullptr),
      val(qkv + 2 * C, qkv16 ? qkv16 + 2 * C : nullptr);
  // preatt = q · kᵀ   (Z,T,hs) x (Z,hs,T) -> (Z,T,T), into att
  gemm.run(att, v.att(), q.operand(v.qkv_part()), k.operand(v.qkv_part_t()));
  gemm.wait();
  gemm.mark(&StepTimes::attn_qk_fwd);
  // att = causal_softmax(preatt / √hs), in place (and its bf16 copy for bf16 GEMMs)
  attention_softmax_forward(att, att, Z, T, scale, att16);
  gemm.mark(&StepTimes::softmax_fwd);
  // out_h = att · v_h   (Z,T,T) x (Z,T,hs) -> head h's columns of out
  gemm.run(out, v.merged(), GemmInput(att, att16).operand(v.att()), val.operand(v.qkv_part()));
  gemm.wait();
  gemm.mark(&StepTimes::attn_v_fwd);
}

void attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                        const float* att, const uint16_t* qkv16, const uint16_t* att16,
                        uint16_t* dout16, uint16_t* datt16, size_t B, size_t T, size_t C,
                        size_t NH, Gemm& gemm) {
  const HeadViews v = views(B, T, C, NH);
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const size_t N = B * T, Z = B * NH;
  const GemmInput q(qkv, qkv16), k(qkv + C, qkv16 ? qkv16 + C : nullptr),
      val(qkv + 2 * C, qkv16 ? qkv16 + 2 * C : nullptr), a(att, att16);
  if (dout16 != nullptr) {
    convert_f32_to_bf16(dout16, dout, N * C);
    gemm.mark(&StepTimes::bf16_convert);
  }
  const GemmInput d(dout, dout16);
  // out_h = att · v_h  =>  datt = dout_h · v_hᵀ   (Z,T,hs) x (Z,hs,T)
  gemm.run(datt, v.att(), d.operand(v.merged()), val.operand(v.qkv_part_t()));
  //                    =>  dv_h = attᵀ · dout_h   (Z,T,T) x (Z,T,hs), into dqkv's v columns
  gemm.run(dqkv + 2 * C, v.qkv_part(), a.operand(v.att_t()), d.operand(v.merged()));
  gemm.wait();
  gemm.mark(&StepTimes::attn_v_bwd);
  // att = causal_softmax(preatt / √hs)  =>  dpreatt (in place; 0 above the diagonal; and its
  // bf16 copy for bf16 GEMMs)
  attention_softmax_backward(datt, datt, att, Z, T, scale, datt16);
  gemm.mark(&StepTimes::softmax_bwd);
  const GemmInput dp(datt, datt16);
  // preatt = q_h · k_hᵀ  =>  dq_h = dpreatt · k_h    (Z,T,T) x (Z,T,hs)
  gemm.run(dqkv, v.qkv_part(), dp.operand(v.att()), k.operand(v.qkv_part()));
  //                      =>  dk_h = dpreattᵀ · q_h   (Z,T,T) x (Z,T,hs)
  gemm.run(dqkv + C, v.qkv_part(), dp.operand(v.att_t()), q.operand(v.qkv_part()));
  gemm.wait();
  gemm.mark(&StepTimes::attn_qk_bwd);
}

}  // namespace wte
