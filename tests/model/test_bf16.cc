// bf16 GEMMs with float32 master weights (model.matmul_precision = bf16):
//   - the float32 -> bfloat16 conversion kernel against its scalar reference on every Highway target,
//     at sizes around the vector widths, with NaN, ±Inf, ±0, subnormals, ties and overflow, and
//     against bit patterns worked out by hand;
//   - the bf16 model's loss and every gradient against the float32 model's, within a stated bound,
//     and different from it (the bf16 path really ran, on a native bf16 kernel, never ref:any);
//   - two bf16 runs bit-identical; the config key; the fallback on a CPU capped below AVX512_BF16.
// (Resume of a bf16 run: tests/train/test_resume.cc, ResumeExact/*bf16*.)
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "src/reference/kernels.h"
#include "src/model/matmul.h"
#include "tests/simd_test_util.h"
#include "tests/test_util.h"
#include "wte/config.h"
#include "wte/kernels.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "wte/rng.h"

namespace wte {
namespace {

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// ------------------------------------------------------------------------------------------------
// The conversion kernel

// A uint16_t array starting 2 bytes past a 64-byte boundary, with 40 guard elements (0xBEEF) on
// each side: a kernel that writes outside [data(), data() + size) changes a guard.
class Guarded16 {
 public:
  static constexpr size_t kPad = 40;
  static constexpr uint16_t kGuard = 0xBEEF;
  explicit Guarded16(size_t n) : n_(n), storage_(n + 2 * kPad + 64, kGuard) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(storage_.data() + kPad);
    begin_ = kPad + ((64 - base % 64) % 64) / 2 + 1;
  }
  uint16_t* data() { return storage_.data() + begin_; }
  bool guards_intact() const {
    for (size_t i = 0; i < storage_.size(); ++i)
      if ((i < begin_ || i >= begin_ + n_) && storage_[i] != kGuard) return false;
    return true;
  }

 private:
  size_t n_, begin_ = 0;
  std::vector<uint16_t> storage_;
};

// Values whose rounding is worth checking: specials, subnormals, ties, carries, overflow.
std::vector<float> special_values() {
  std::vector<uint32_t> bits = {
      0x00000000, 0x80000000,              // ±0
      0x7F800000, 0xFF800000,              // ±Inf
      0x7FC00000, 0xFFC00000,              // quiet NaNs
      0x7F800001, 0xFF800001,              // signalling NaNs with only low payload bits
      0x7FBFFFFF, 0x7FFFFFFF,              // NaNs whose rounding would carry
      0x00000001, 0x80000001,              // smallest subnormals (round to ±0)
      0x00008000, 0x00018000,              // subnormal ties: to even 0x0000, up to 0x0002
      0x00008001, 0x007FFFFF,              // just above a tie; largest subnormal (-> 0x0080)
      0x3F800000, 0x3F808000, 0x3F818000,  // 1; ties 1+2^-8 (to even: 1), 1+3·2^-8 (up)
      0x3F807FFF, 0x3F808001,              // just below / above a tie
      0x3FFFFFFF, 0xBFFFFFFF,              // carry into the exponent: ±4
      0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF,  // near FLT_MAX: stays, tie to even (Inf), Inf
      0xFF7FFFFF,                          // -FLT_MAX -> -Inf
  };
  std::vector<float> out;
  for (uint32_t b : bits) out.push_back(from_bits(b));
  return out;
}

// The reference against bit patterns worked out by hand (the kernel is then compared with it).
TEST(Bf16Reference, RoundsToNearestEvenByHand) {
  struct Case {
    uint32_t in;
    uint16_t want;
  };
  for (const Case& c : std::vector<Case>{
           {0x00000000, 0x0000}, {0x80000000, 0x8000}, {0x7F800000, 0x7F80}, {0xFF800000, 0xFF80},
           {0x7FC00000, 0x7FC0}, {0x7F800001, 0x7FC0}, {0xFF800001, 0xFFC0}, {0x7FFFFFFF, 0x7FFF},
           {0x00000001, 0x0000}, {0x00008000, 0x0000}, {0x00018000, 0x0002}, {0x00008001, 0x0001},
           {0x007FFFFF, 0x0080}, {0x3F800000, 0x3F80}, {0x3F808000, 0x3F80}, {0x3F818000, 0x3F82},
           {0x3F807FFF, 0x3F80}, {0x3F808001, 0x3F81}, {0x3FFFFFFF, 0x4000}, {0xBFFFFFFF, 0xC000},
           {0x7F7F7FFF, 0x7F7F}, {0x7F7F8000, 0x7F80}, {0x7F7FFFFF, 0x7F80}, {0xFF7FFFFF, 0xFF80},
           {0x40490FDB, 0x4049} /* pi: 3.140625 */}) {
    EXPECT_EQ(ref::f32_to_bf16(from_bits(c.in)), c.want) << std::hex << "input 0x" << c.in;
  }
  // Every bf16 value converts back exactly, and rounding a bf16 value again changes nothing.
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float x = ref::bf16_to_f32(static_cast<uint16_t>(b));
    if (std::isnan(x)) continue;
    ASSERT_EQ(ref::f32_to_bf16(x), b) << std::hex << "bf16 0x" << b;
  }
}

class Bf16KernelTest : public test::TargetTest {};

// Sizes around the lane counts (4, 8, 16 floats) and a multi-block size for the threads.
const std::vector<size_t> kSizes = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 129, 257};

TEST_P(Bf16KernelTest, MatchesReferenceBitForBitWithSpecialsAtAwkwardSizes) {
  std::mt19937 rng(5);
  const std::vector<float> specials = special_values();
  for (size_t n : kSizes) {
    for (int pass = 0; pass < 2; ++pass) {
      test::GuardedBuffer src(n);
      test::fill_general(src.data(), n, rng, pass == 0 ? 1.0f : 1e-38f);  // pass 1: subnormals
      // Specials at the start, the end (the one-lane tail) and spread through.
      for (size_t i = 0; i < n; i += 3) src[i] = specials[(i / 3 + n) % specials.size()];
      src[n - 1] = specials[n % specials.size()];
      Guarded16 dst(n);
      convert_f32_to_bf16(dst.data(), src.data(), n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(dst.data()[i], ref::f32_to_bf16(src[i]))
            << target() << " n=" << n << " i=" << i << std::hex << " input 0x"
            << std::bit_cast<uint32_t>(src[i]);
      }
      EXPECT_TRUE(dst.guards_intact() && src.guards_intact()) << target() << " n=" << n;
    }
  }
}

TEST_P(Bf16KernelTest, EveryFloatOfAStrideMatchesWithOneAndTwoThreads) {
  // 2^20 + 3 floats spread over the bit patterns by a multiplicative hash (every sign and
  // exponent, NaNs and subnormals included), enough for the parallel path.
  const size_t n = (size_t{1} << 20) + 3;
  std::vector<float> src(n);
  for (size_t i = 0; i < n; ++i) src[i] = from_bits(static_cast<uint32_t>(i) * 2654435761u);
  std::vector<uint16_t> want(n);
  ref::convert_f32_to_bf16(want.data(), src.data(), n);
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    std::vector<uint16_t> got(n, 0xBEEF);
    convert_f32_to_bf16(got.data(), src.data(), n);
    size_t i = 0;
    while (i < n && got[i] == want[i]) ++i;
    EXPECT_EQ(i, n) << target() << " threads=" << threads << " first difference at " << i;
  }
}

// softmax_cross_entropy's optional bf16 output: the bits of converting its float32 dlogits, the
// float32 results unchanged, at vocabulary sizes around the lane counts.
TEST_P(Bf16KernelTest, SoftmaxCrossEntropyBf16CopyIsTheConversionOfItsDlogits) {
  std::mt19937 rng(9);
  for (size_t V : {1, 3, 15, 16, 17, 33, 257}) {
    const size_t N = 5;
    std::vector<float> logits(N * V);
    test::fill_general(logits.data(), logits.size(), rng, 3.0f);
    std::vector<int32_t> targets(N);
    for (size_t n = 0; n < N; ++n) targets[n] = static_cast<int32_t>((n * 7) % V);
    std::vector<float> plain = logits, with16 = logits, loss_plain(N), loss16(N);
    softmax_cross_entropy(plain.data(), loss_plain.data(), targets.data(), N, V, 0.2f);
    Guarded16 d16(N * V);
    softmax_cross_entropy(with16.data(), loss16.data(), targets.data(), N, V, 0.2f, d16.data());
    EXPECT_EQ(0, std::memcmp(plain.data(), with16.data(), N * V * sizeof(float))) << target();
    EXPECT_EQ(0, std::memcmp(loss_plain.data(), loss16.data(), N * sizeof(float))) << target();
    for (size_t i = 0; i < N * V; ++i)
      ASSERT_EQ(d16.data()[i], ref::f32_to_bf16(plain[i])) << target() << " V=" << V << " i=" << i;
    EXPECT_TRUE(d16.guards_intact()) << target() << " V=" << V;
  }
}

// The other kernels' optional bf16 copies (LayerNorm forward, GELU forward and backward, causal
// softmax forward and backward): each the conversion of the kernel's float32 output, which the copy
// leaves unchanged, at widths around the lane counts; LayerNorm and GELU forward also with the
// copy alone.
TEST_P(Bf16KernelTest, BlockKernelsBf16CopiesAreTheConversionOfTheirOutputs) {
  std::mt19937 rng(13);
  auto check = [&](const char* what, size_t w, const std::vector<float>& plain,
                   const std::vector<float>& with16, Guarded16& d16) {
    EXPECT_EQ(0, std::memcmp(plain.data(), with16.data(), plain.size() * sizeof(float)))
        << target() << " " << what << " w=" << w << ": the float32 output changed";
    for (size_t i = 0; i < plain.size(); ++i)
      ASSERT_EQ(d16.data()[i], ref::f32_to_bf16(plain[i]))
          << target() << " " << what << " w=" << w << " i=" << i;
    EXPECT_TRUE(d16.guards_intact()) << target() << " " << what << " w=" << w;
  };
  // w 11003: GELU's n = 33009 spans several threads' blocks (ParallelForEachVectorPair)
  for (size_t w : {1, 3, 15, 16, 17, 31, 32, 33, 65, 11003}) {
    const size_t N = 3, n = N * w;
    std::vector<float> x(n), g(w), b(w), dy(n);
    test::fill_general(x.data(), n, rng, 2.0f);
    test::fill_general(g.data(), w, rng);
    test::fill_general(b.data(), w, rng);
    test::fill_general(dy.data(), n, rng);
    {  // LayerNorm forward, rows of w
      std::vector<float> y(n), y2(n), m(N), r(N);
      Guarded16 d16(n);
      layernorm_forward(y.data(), m.data(), r.data(), x.data(), g.data(), b.data(), N, w, 1e-5f);
      layernorm_forward(y2.data(), m.data(), r.data(), x.data(), g.data(), b.data(), N, w, 1e-5f,
                        d16.data());
      check("layernorm_forward", w, y, y2, d16);
      {  // the bf16 copy alone (no float32 output): the same bits
        Guarded16 only16(n);
        layernorm_forward(nullptr, m.data(), r.data(), x.data(), g.data(), b.data(), N, w, 1e-5f,
                          only16.data());
        check("layernorm_forward bf16 only", w, y, y2, only16);
      }
      // backward: dinp accumulates (+=) onto the same starting values; dinp16 is the copy of the
      // updated dinp
      std::vector<float> dx(n), dx2(n), dg(w, 0.0f), db(w, 0.0f), dg2(w, 0.0f), db2(w, 0.0f);
      test::fill_general(dx.data(), n, rng);
      dx2 = dx;
      Guarded16 dx16(n);
      layernorm_backward(dx.data(), dg.data(), db.data(), dy.data(), x.data(), g.data(), m.data(),
                         r.data(), N, w);
      layernorm_backward(dx2.data(), dg2.data(), db2.data(), dy.data(), x.data(), g.data(),
                         m.data(), r.data(), N, w, dx16.data());
      check("layernorm_backward", w, dx, dx2, dx16);
    }
    {  // GELU forward and backward over n elements
      std::vector<float> y(n), y2(n);
      Guarded16 f16(n), b16(n);
      gelu_forward(y.data(), x.data(), n);
      gelu_forward(y2.data(), x.data(), n, f16.data());
      check("gelu_forward", w, y, y2, f16);
      {  // the bf16 copy alone (no float32 output): the same bits
        Guarded16 only16(n);
        gelu_forward(nullptr, x.data(), n, only16.data());
        check("gelu_forward bf16 only", w, y, y2, only16);
      }
      gelu_backward(y.data(), x.data(), dy.data(), n);
      gelu_backward(y2.data(), x.data(), dy.data(), n, b16.data());
      check("gelu_backward", w, y, y2, b16);
    }
    {  // causal softmax forward and backward: Z = 2 matrices of (T, T), T = w
      const size_t Z = 2, T = w, e = Z * T * T;
      std::vector<float> pre(e), da(e);
      test::fill_general(pre.data(), e, rng, 3.0f);
      test::fill_general(da.data(), e, rng);
      std::vector<float> att(e), att2(e);
      Guarded16 a16(e), p16(e);
      attention_softmax_forward(att.data(), pre.data(), Z, T, 0.3f);
      attention_softmax_forward(att2.data(), pre.data(), Z, T, 0.3f, a16.data());
      check("attention_softmax_forward", w, att, att2, a16);
      std::vector<float> dp(e), dp2(e);
      attention_softmax_backward(dp.data(), da.data(), att.data(), Z, T, 0.3f);
      attention_softmax_backward(dp2.data(), da.data(), att.data(), Z, T, 0.3f, p16.data());
      check("attention_softmax_backward", w, dp, dp2, p16);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTargets, Bf16KernelTest,
                         ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                         test::TargetParamName);

// ------------------------------------------------------------------------------------------------
// The model

ModelConfig block_config(MatmulPrecision p) {
  return {.vocab_size = 300, .d_model = 64, .n_ctx = 32, .n_layer = 2, .n_head = 4,
          .matmul_precision = p};
}

constexpr size_t kB = 4, kT = 32;

void batch(std::vector<int32_t>* in, std::vector<int32_t>* tg, uint64_t seed, size_t V) {
  Rng rng(seed);
  in->resize(kB * kT);
  tg->resize(kB * kT);
  for (size_t i = 0; i < kB * kT; ++i) {
    (*in)[i] = static_cast<int32_t>(rng.below(V));
    (*tg)[i] = static_cast<int32_t>(((*in)[i] * 7 + 3) % static_cast<int32_t>(V));
  }
}

#define SKIP_WITHOUT_NATIVE_BF16()                                                        \
  do {                                                                                    \
    if (!bf16_gemm_support().native) {                                                    \
      GTEST_SKIP() << "oneDNN has no native bf16 matmul on this CPU (it picks "           \
                   << bf16_gemm_support().bf16_impl << "): the model runs float32 GEMMs"; \
    }                                                                                     \
  } while (0)

// Relative L2 distance ||a - b|| / ||b|| in double.
double rel_l2(const float* a, const float* b, size_t n) {
  double d = 0, nb = 0;
  for (size_t i = 0; i < n; ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    nb += static_cast<double>(b[i]) * b[i];
  }
  return nb == 0 ? std::sqrt(d) : std::sqrt(d / nb);
}

// One forward + backward of the f32 and the bf16 model from the same weights (trained 20 steps
// first, so the gradients are not those of the init's near-uniform softmax).
//
// Bound: every GEMM input is rounded to bf16 (8 significant bits, to nearest even), a relative
// error of at most u = 2^-8 each; a GEMM's output then errs by up to 2u relative to the sum of
// |products|, and ~12 GEMMs lie on the longest path of the backward (logits GEMMs, 2 blocks' 4
// linear layers and 2 attention GEMMs each). Added in the worst case that is ~24u (0.094) of sums
// of |products|, which bounds no tensor's relative error (its entries may cancel); the bound below
// rests instead on the roundings being independent with mean zero, so they add in quadrature: a
// rounding's RMS relative error is at most u/sqrt(3) (the error is uniform within half an ulp, ulp
// = 2u at a power of 2), a GEMM's two rounded inputs ~0.82u of its output, ~12 GEMMs
// sqrt(12)·0.82u = 2.8u (0.011). Per tensor, ||g_bf16 - g_f32|| / ||g_f32|| <= 0.05 (12.8u: 4.5x
// that, for cancellation and what the softmaxes and LayerNorms amplify; the worst measured here
// 0.0056, 1.4u, h0/ln_2/g); the loss within 0.2% (0.5u: the mean over the B·T = 128 tokens averages
// their errors; measured 1e-5 relative).
TEST(Bf16Model, LossAndEveryGradientWithinBoundOfFloat32) {
  SKIP_WITHOUT_NATIVE_BF16();
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(1);
  Model f32(block_config(MatmulPrecision::f32)), b16(block_config(MatmulPrecision::bf16));
  ASSERT_EQ(f32.gemm_precision(), MatmulPrecision::f32);
  ASSERT_EQ(b16.gemm_precision(), MatmulPrecision::bf16);
  f32.init_weights(11);
  AdamW opt(f32);
  OptimConfig hp;
  hp.lr = 3e-3f;
  std::vector<int32_t> in, tg;
  for (size_t s = 0; s < 20; ++s) {
    batch(&in, &tg, 100 + s, 300);
    f32.zero_grad();
    f32.forward(in.data(), tg.data(), kB, kT);
    f32.backward();
    opt.update(f32, hp.lr, hp);
  }
  std::memcpy(b16.param_data(), f32.param_data(), f32.num_parameters() * sizeof(float));
  batch(&in, &tg, 7, 300);
  f32.zero_grad();
  const float loss_f32 = f32.forward(in.data(), tg.data(), kB, kT);
  f32.backward();
  const float loss_b16 = b16.forward(in.data(), tg.data(), kB, kT);
  b16.backward();
  EXPECT_NE(loss_f32, loss_b16) << "bf16 gave float32's loss bit for bit: did it run?";
  EXPECT_LT(std::fabs(loss_b16 - loss_f32), 2e-3 * loss_f32) << loss_f32 << " vs " << loss_b16;
  double worst = 0;
  std::string worst_name;
  for (const TensorSpec& t : f32.tensors()) {
    const float* gf = f32.grad_data() + t.offset;
    const float* gb = b16.grad_data() + t.offset;
    const double e = rel_l2(gb, gf, t.size);
    EXPECT_LT(e, 0.05) << t.name;
    if (e > worst) {
      worst = e;
      worst_name = t.name;
    }
  }
  std::printf("loss f32 %.7f bf16 %.7f; worst gradient %s: relative L2 %.4f\n", loss_f32, loss_b16,
              worst_name.c_str(), worst);
  // Every GEMM ran a native bf16 kernel (never ref:any, never float32) and belongs to a part.
  const std::vector<GemmKernel> kernels = b16.gemm_kernels();
  ASSERT_FALSE(kernels.empty());
  for (const GemmKernel& k : kernels) {
    EXPECT_TRUE(k.bf16) << k.impl;
    EXPECT_EQ(k.impl.find("ref"), std::string::npos) << k.impl;
    EXPECT_TRUE(k.impl.find("bf16") != std::string::npos || k.impl.find("amx") != std::string::npos)
        << k.impl;
    EXPECT_FALSE(k.part.empty()) << k.impl << ": no step part attributed";
  }
  for (const GemmKernel& k : f32.gemm_kernels()) EXPECT_FALSE(k.bf16) << k.impl;
  omp_set_num_threads(threads_before);
}

// Three training steps (forward, backward, clip, AdamW) give the same bits twice, at 2 threads.
TEST(Bf16Model, TwoRunsAreBitIdentical) {
  SKIP_WITHOUT_NATIVE_BF16();
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(2);
  auto train = [](std::vector<float>* params) {
    Model m(block_config(MatmulPrecision::bf16));
    m.init_weights(3);
    AdamW opt(m);
    OptimConfig hp;
    std::vector<uint32_t> losses;
    std::vector<int32_t> in, tg;
    for (size_t s = 0; s < 3; ++s) {
      batch(&in, &tg, 50 + s, 300);
      m.zero_grad();
      losses.push_back(std::bit_cast<uint32_t>(m.forward(in.data(), tg.data(), kB, kT)));
      m.backward();
      clip_grad_norm(m, 1.0);
      opt.update(m, 1e-3f, hp);
    }
    params->assign(m.param_data(), m.param_data() + m.num_parameters());
    return losses;
  };
  std::vector<float> p1, p2;
  const std::vector<uint32_t> l1 = train(&p1), l2 = train(&p2);
  EXPECT_EQ(l1, l2);
  ASSERT_EQ(p1.size(), p2.size());
  EXPECT_EQ(0, std::memcmp(p1.data(), p2.data(), p1.size() * sizeof(float)));
  omp_set_num_threads(threads_before);
}

// AdamW writes the weights' bf16 copy as it updates them (tied and untied wte: the untied one's
// touched rows), so the next forward skips its conversion: after every update the copy is current
// and holds the conversion of every parameter, and training so gives the same bits as training
// that marks the copy stale before every forward (each forward then converts the whole arena).
TEST(Bf16Model, AdamWKeepsTheWeightsBf16CopyCurrentWithTheSameBits) {
  SKIP_WITHOUT_NATIVE_BF16();
  for (bool tied : {true, false}) {
    auto train = [&](bool stale_each_step, std::vector<float>* params) {
      ModelConfig c = block_config(MatmulPrecision::bf16);
      c.tie_embeddings = tied;
      Model m(c);
      m.init_weights(5);
      EXPECT_FALSE(m.params_bf16_current()) << "tied=" << tied;
      AdamW opt(m);
      OptimConfig hp;
      std::vector<uint32_t> losses;
      std::vector<int32_t> in, tg;
      for (size_t s = 0; s < 3; ++s) {
        batch(&in, &tg, 70 + s, 300);
        if (stale_each_step) m.param_data();  // a writable access: the copy is stale
        m.zero_grad();
        losses.push_back(std::bit_cast<uint32_t>(m.forward(in.data(), tg.data(), kB, kT)));
        EXPECT_TRUE(m.params_bf16_current()) << "tied=" << tied << ": the forward converted";
        m.backward();
        opt.update(m, 1e-3f, hp, m.wte_grad_rows(), 0.5f);
        EXPECT_TRUE(m.params_bf16_current()) << "tied=" << tied << " step " << s;
        const Model& cm = m;
        std::vector<uint16_t> want(m.num_parameters());
        ref::convert_f32_to_bf16(want.data(), cm.param_data(), m.num_parameters());
        EXPECT_EQ(0, std::memcmp(want.data(), m.params_bf16(), want.size() * sizeof(uint16_t)))
            << "tied=" << tied << " step " << s;
      }
      params->assign(m.param_data(), m.param_data() + m.num_parameters());
      EXPECT_FALSE(m.params_bf16_current()) << "tied=" << tied << ": param_data() marks it stale";
      // An update of part of the arena (data-parallel) leaves the copy stale.
      m.forward(in.data(), tg.data(), kB, kT);
      m.backward();
      opt.update_part(m, 1e-3f, hp, 0, m.num_parameters() / 2, m.wte_grad_rows());
      EXPECT_FALSE(m.params_bf16_current()) << "tied=" << tied;
      return losses;
    };
    std::vector<float> p1, p2;
    const std::vector<uint32_t> l1 = train(false, &p1), l2 = train(true, &p2);
    EXPECT_EQ(l1, l2) << "tied=" << tied;
    ASSERT_EQ(p1.size(), p2.size());
    EXPECT_EQ(0, std::memcmp(p1.data(), p2.data(), p1.size() * sizeof(float))) << "tied=" << tied;
  }
}

// The f32 default is the float32 model of before: no bf16 primitive, no bf16 memory.
TEST(Bf16Model, Float32DefaultHasNoBf16) {
  ModelConfig c = block_config(MatmulPrecision::f32);
  EXPECT_EQ(ModelConfig{}.matmul_precision, MatmulPrecision::f32);
  Model m(c);
  m.init_weights(1);
  std::vector<int32_t> in, tg;
  batch(&in, &tg, 1, 300);
  m.forward(in.data(), tg.data(), kB, kT);
  m.backward();
  for (const GemmKernel& k : m.gemm_kernels()) EXPECT_FALSE(k.bf16) << k.impl;
  Model b(block_config(MatmulPrecision::bf16));
  b.reserve(kB, kT);
  m.reserve(kB, kT);
  if (b.gemm_precision() == MatmulPrecision::bf16) {
    EXPECT_GT(b.activation_bytes(), m.activation_bytes());
  }
}

TEST(Bf16Config, KeyParsesRoundTripsAndRejectsOtherValues) {
  const Config c = load_config("", {"--model.matmul_precision=bf16"});
  EXPECT_EQ(c.model.matmul_precision, MatmulPrecision::bf16);
  EXPECT_NE(c.to_ini().find("matmul_precision = bf16"), std::string::npos);
  EXPECT_EQ(parse_config(c.to_ini(), "text").model.matmul_precision, MatmulPrecision::bf16);
  EXPECT_EQ(load_config("", {}).model.matmul_precision, MatmulPrecision::f32);
  const std::string err =
      test::error_of([] { load_config("", {"--model.matmul_precision=fp16"}); });
  EXPECT_NE(err.find("model.matmul_precision = 'fp16'"), std::string::npos) << err;
  EXPECT_NE(err.find("allowed: f32 or bf16"), std::string::npos) << err;
}

// On a CPU without AVX512_BF16 (simulated with ONEDNN_MAX_CPU_ISA, read when oneDNN starts, so in
// a child process) `wte train` says bf16 falls back to float32 and trains.
TEST(Bf16Cli, FallsBackToFloat32WithAMessageBelowAvx512Bf16) {
  const std::filesystem::path dir = test::temp_dir("bf16_fallback");
  test::write(dir / "corpus.txt", test::tiny_corpus());
  const std::string base = std::string(WTE_CLI) + " train --overwrite --out '" +
                           (dir / "out").string() + "' --data.text='" + (dir / "corpus.txt").string() +
                           "' --model.vocab_size=300 --model.d_model=16 --model.n_ctx=16 "
                           "--model.n_layer=1 --model.n_head=2 --data.seq_len=16 "
                           "--train.batch_size=2 --train.steps=2 --train.threads=1 "
                           "--model.matmul_precision=bf16";
  for (const char* isa : {"AVX2", "AVX512_CORE"}) {
    std::string out;
    ASSERT_EQ(test::run(std::string("ONEDNN_MAX_CPU_ISA=") + isa + " " + base, &out), 0) << out;
    EXPECT_NE(out.find("model.matmul_precision = bf16 falls back to float32 on this CPU"),
              std::string::npos)
        << isa << ":\n" << out;
  }
  if (bf16_gemm_support().native) {
    std::string out;
    ASSERT_EQ(test::run(base, &out), 0) << out;
    EXPECT_NE(out.find("gemms: bf16 inputs, float32 accumulation and outputs (oneDNN "),
              std::string::npos)
        << out;
  }
}

}  // namespace
}  // namespace wte
