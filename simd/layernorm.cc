// LayerNorm forward and backward (GPT-2's norm()), Highway with dynamic dispatch. Contracts and
// shapes: include/wte/kernels.h; scalar references: ref::layernorm_forward/backward in
// src/reference/kernels.h.
//
// Forward, one row at a time (a row of C floats stays in L1 across its three short passes):
//   mean = (Σ_c x) / C                  lane-wise sum (SumOver, simd/loops-inl.h)
//   var  = (Σ_c (x - mean)²) / C        a second pass, as the reference: E[x²] - mean² would cancel
//                                       catastrophically when |mean| >> std
//   out  = ((x - mean) · rstd) · g + b  the reference's operations in its order
// Backward, one row at a time: the two row means of the reference (one pass, two lane-wise sums),
// then one pass that adds into dinp and into its row block's partial dg and db.
//
// Not bit-identical to the references (the row sums are lane-wise, the dg/db sums grouped by row
// block); tests/simd/test_layernorm.cc derives and checks the error bounds.
//
// dg and db sum over all N rows. Rows are cut into fixed blocks whose size depends only on N
// (RowsPerBlock); each block sums its rows in increasing n into its own partial, and the partials
// are added to dg/db in block order. The bits therefore do not depend on the thread count.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "wte/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/layernorm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "simd/bf16-inl.h"   // StoreBf16, StoreBf16x2, ConvertRowToBf16 (optional bf16 copies)
#include "simd/loops-inl.h"  // ForEachVector, SumOver, kParallelMinFloats
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void LayerNormForward(float* HWY_RESTRICT out, float* HWY_RESTRICT mean, float* HWY_RESTRICT rstd,
                      const float* HWY_RESTRICT inp, const float* HWY_RESTRICT g,
                      const float* HWY_RESTRICT b, size_t N, size_t C, float eps,
                      uint16_t* HWY_RESTRICT out16) {
  if (C == 0) return;
  const float c_float = static_cast<float>(C);
#pragma omp parallel for schedule(static) if (N * C >= kParallelMinFloats)
  for (size_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    float* y = out != nullptr ? out + n * C : nullptr;
    const float m = SumOver(C, [&](auto d, size_t c) { return hn::LoadU(d, x + c); }) / c_float;
    const float var = SumOver(C, [&](auto d, size_t c) {
                        const auto xm = hn::Sub(hn::LoadU(d, x + c), hn::Set(d, m));
                        return hn::Mul(xm, xm);
                      }) /
                      c_float;
    const float s = 1.0f / std::sqrt(var + eps);
    const auto normalized = [&](auto d, size_t c) {
      const auto xhat = hn::Mul(hn::Sub(hn::LoadU(d, x + c), hn::Set(d, m)), hn::Set(d, s));
      return hn::Add(hn::Mul(xhat, hn::LoadU(d, g + c)), hn::LoadU(d, b + c));
    };
    if (out != nullptr) {
      ForEachVector(C, [&](auto d, size_t c) { hn::StoreU(normalized(d, c), d, y + c); });
      if (out16 != nullptr) ConvertRowToBf16(out16 + n * C, y, C);  // while in cache
    } else {  // the bf16 copy only, two vectors at a time
      uint16_t* y16 = out16 + n * C;
      const hn::ScalableTag<float> d;
      const size_t L = hn::Lanes(d);
      size_t c = 0;
      for (; c + 2 * L <= C; c += 2 * L)
        StoreBf16x2(d, normalized(d, c), normalized(d, c + L), y16 + c);
      ForEachVector(C - c, [&](auto dv, size_t i) {
        StoreBf16(dv, normalized(dv, c + i), y16 + c + i);
      });
    }
    mean[n] = m;
    rstd[n] = s;
  }
}

// Rows per dg/db block: a function of N only (never of the thread count). At least 16 rows, so a
// block's partial (2C floats) costs little next to its rows' 3C-float traffic, and at most 64
// blocks, so the partials of a large batch fit in L2 and the final combine is short.
inline size_t RowsPerBlock(size_t N) { return gradient_rows_per_block(N); }

// The scratch for the per-block partials, kept between calls (no per-step allocation); grown when
// too small, never shrunk. One per calling thread, so concurrent callers do not share it.
inline float* PartialScratch(size_t floats) {
  static thread_local std::vector<float> scratch;
  if (scratch.size() < floats) scratch.resize(floats);
  return scratch.data();
}

void LayerNormBackward(float* HWY_RESTRICT dinp, float* HWY_RESTRICT dg, float* HWY_RESTRICT db,
                       const float* HWY_RESTRICT dout, const float* HWY_RESTRICT inp,
                       const float* HWY_RESTRICT g, const float* HWY_RESTRICT mean,
                       const float* HWY_RESTRICT rstd, size_t N, size_t C,
                       uint16_t* HWY_RESTRICT dinp16) {
  if (N == 0 || C == 0) return;
  const float c_float = static_cast<float>(C);
  const size_t rows_per_block = RowsPerBlock(N);
  const size_t num_blocks = (N + rows_per_block - 1) / rows_per_block;
  float* partial = PartialScratch(num_blocks * 2 * C);  // (num_blocks, [dg (C) | db (C)])

#pragma omp parallel for schedule(static) if (N * C >= kParallelMinFloats)
  for (size_t blk = 0; blk < num_blocks; ++blk) {
    float* pdg = partial + blk * 2 * C;
    float* pdb = pdg + C;
    std::fill(pdg, pdg + 2 * C, 0.0f);
    const size_t n_end = std::min(N, (blk + 1) * rows_per_block);
    for (size_t n = blk * rows_per_block; n < n_end; ++n) {
      const float* x = inp + n * C;
      const float* dy = dout + n * C;
      float* dx = dinp + n * C;
      const float m = mean[n], s = rstd[n];

      // mean_c(dxhat) and mean_c(dxhat · xhat), xhat = (x - mean) · rstd, dxhat = dout · g.
      const hn::ScalableTag<float> d;
      const size_t L = hn::Lanes(d);
      auto acc_dxhat = hn::Zero(d), acc_dxhat_xhat = hn::Zero(d);
      size_t k = 0;
      for (; k + L <= C; k += L) {
        const auto xhat = hn::Mul(hn::Sub(hn::LoadU(d, x + k), hn::Set(d, m)), hn::Set(d, s));
        const auto dxhat = hn::Mul(hn::LoadU(d, dy + k), hn::LoadU(d, g + k));
        acc_dxhat = hn::Add(acc_dxhat, dxhat);
        acc_dxhat_xhat = hn::Add(acc_dxhat_xhat, hn::Mul(dxhat, xhat));
      }
      float sum_dxhat = hn::GetLane(hn::SumOfLanes(d, acc_dxhat));
      float sum_dxhat_xhat = hn::GetLane(hn::SumOfLanes(d, acc_dxhat_xhat));
      for (; k < C; ++k) {
        const float xhat = (x[k] - m) * s;
        const float dxhat = dy[k] * g[k];
        sum_dxhat += dxhat;
        sum_dxhat_xhat += dxhat * xhat;
      }
      const float mean_dxhat = sum_dxhat / c_float;
      const float mean_dxhat_xhat = sum_dxhat_xhat / c_float;

      // dinp += rstd · (dxhat - mean(dxhat) - xhat · mean(dxhat·xhat)); dg += dout · xhat; db += dout
      ForEachVector(C, [&](auto d, size_t c) {
        const auto xhat = hn::Mul(hn::Sub(hn::LoadU(d, x + c), hn::Set(d, m)), hn::Set(d, s));
        const auto dyv = hn::LoadU(d, dy + c);
        const auto dxhat = hn::Mul(dyv, hn::LoadU(d, g + c));
        hn::StoreU(hn::Add(hn::LoadU(d, pdg + c), hn::Mul(dyv, xhat)), d, pdg + c);
        hn::StoreU(hn::Add(hn::LoadU(d, pdb + c), dyv), d, pdb + c);
        const auto term = hn::Sub(hn::Sub(dxhat, hn::Set(d, mean_dxhat)),
                                  hn::Mul(xhat, hn::Set(d, mean_dxhat_xhat)));
        hn::StoreU(hn::Add(hn::LoadU(d, dx + c), hn::Mul(hn::Set(d, s), term)), d, dx + c);
      });
      if (dinp16 != nullptr) ConvertRowToBf16(dinp16 + n * C, dx, C);  // while in cache
    }
  }

  // dg += Σ_blk partial dg, db likewise: blocks in increasing order, each column on its own.
  ForEachVector(C, [&](auto d, size_t c) {
    auto sum_g = hn::LoadU(d, partial + c);
    auto sum_b = hn::LoadU(d, partial + C + c);
    for (size_t blk = 1; blk < num_blocks; ++blk) {
      sum_g = hn::Add(sum_g, hn::LoadU(d, partial + blk * 2 * C + c));
      sum_b = hn::Add(sum_b, hn::LoadU(d, partial + blk * 2 * C + C + c));
    }
    hn::StoreU(hn::Add(hn::LoadU(d, dg + c), sum_g), d, dg + c);
    hn::StoreU(hn::Add(hn::LoadU(d, db + c), sum_b), d, db + c);
  });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(LayerNormForward);
HWY_EXPORT(LayerNormBackward);

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* g,
                       const float* b, size_t N, size_t C, float eps, uint16_t* out16) {
  HWY_DYNAMIC_DISPATCH(LayerNormForward)(out, mean, rstd, inp, g, b, N, C, eps, out16);
}

void layernorm_backward(float* dinp, float* dg, float* db, const float* dout, const float* inp,
                        const float* g, const float* mean, const float* rstd, size_t N, size_t C,
                        uint16_t* dinp16) {
  HWY_DYNAMIC_DISPATCH(LayerNormBackward)(dinp, dg, db, dout, inp, g, mean, rstd, N, C, dinp16);
}

}  // namespace wte
#endif  // HWY_ONCE
