// Matrix products of the model through oneDNN matmul primitives, and the linear layer built on them
// (GPT-2's conv1d: y = x · w + b with w stored (in, out)).
//
// Every operand is a strided view of a plain buffer: a transpose or a head's columns inside qkv are
// strides, never copies. A primitive is created once per distinct (shapes, strides, types, bias,
// accumulate) and reused; buffers are bound per call. oneDNN fixes its partitioning over threads
// when a primitive is created, so results are bit-identical for a fixed thread count.
//
// Float32 GEMMs of rank 2 may run on OpenBLAS or BLIS instead (src/model/gemm_blas.h): which one
// is decided once per primitive, by model.gemm / WTE_GEMM or, under `auto`, by the GEMM planner
// (src/model/gemm_plan.h: each library timed on the GEMM the first time this machine meets it,
// the fastest kept in a cache file). Results are bit-identical for a fixed thread count and
// choice. Batched (rank 4) and bf16 GEMMs always run on oneDNN.
//
// Precision (model.matmul_precision): GEMM inputs are float32, or bfloat16 copies of them (bits in
// uint16_t, made by convert_f32_to_bf16 once per tensor); accumulation, outputs and bias are
// float32 either way. oneDNN picks its bf16 kernel from the CPU (AVX512_BF16: brg:avx512_core_bf16;
// AMX: brg:avx512_core_amx...); bf16_gemm_support() says whether this CPU has one.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "src/model/gemm_blas.h"
#include "src/model/memory.h"
#include "src/model/part_timer.h"
#include "wte/config.h"

namespace wte {

/// The CPU engine every primitive of the model uses.
dnnl::engine& cpu_engine();

/// A (batched) matrix view: dims and strides in floats, outermost first, rank 2 or 4. The last two
/// dims are (rows, cols) of each matrix.
struct MatView {
  dnnl::memory::dims dims;
  dnnl::memory::dims strides;
};

/// A row-major (rows, cols) matrix; its transpose as a (cols, rows) view.
inline MatView plain(int64_t rows, int64_t cols) { return {{rows, cols}, {cols, 1}}; }
inline MatView transposed(int64_t rows, int64_t cols) { return {{cols, rows}, {1, cols}}; }

/// A GEMM operand: a strided view of float32 data or of bfloat16 bits.
struct Operand {
  const void* data;
  MatView view;
  dnnl::memory::data_type type;
};
inline Operand as_f32(const float* p, MatView v) {
  return {p, std::move(v), dnnl::memory::data_type::f32};
}
inline Operand as_bf16(const uint16_t* p, MatView v) {
  return {p, std::move(v), dnnl::memory::data_type::bf16};
}

/// An activation (or activation gradient) of the model: its float32 values and, when the model's
/// GEMMs are bf16 and a GEMM reads it, its bfloat16 copy (bits), written by the same kernel that
/// writes the values, in the same pass where it can (bf16 == nullptr: no copy, float32 GEMMs).
/// Converts implicitly from `float*`.
struct Activation {
  Activation(float* f = nullptr, uint16_t* b = nullptr) : f32(f), bf16(b) {}  // NOLINT: implicit
  float* f32;
  uint16_t* bf16;
  /// The view `elems` elements further in (a column block of a wider tensor).
  Activation at(size_t elems) const {
    return {f32 + elems, bf16 != nullptr ? bf16 + elems : nullptr};
  }
};

/// A GEMM input of a layer: its float32 values and, when the model's GEMMs are bf16, the bfloat16
/// copy they read instead (bf16 == nullptr: f32 GEMMs). Converts implicitly from `const float*`
/// and from an Activation.
struct GemmInput {
  GemmInput(const float* f, const uint16_t* b = nullptr) : f32(f), bf16(b) {}  // NOLINT: implicit
  GemmInput(const Activation& a) : f32(a.f32), bf16(a.bf16) {}                // NOLINT: implicit
  const float* f32;
  const uint16_t* bf16;
  Operand operand(MatView v) const { return bf16 != nullptr ? as_bf16(bf16, std::move(v)) : as_f32(f32, std::move(v)); }
  /// The view `elems` elements further in (a column block of a wider tensor).
  GemmInput at(size_t elems) const {
    return {f32 + elems, bf16 != nullptr ? bf16 + elems : nullptr};
  }
};

/// a.bf16 = bf16(a.f32) (n elements) when a carries a copy; nothing otherwise. For GEMM outputs
/// that a later GEMM reads (the other kernels write their outputs' copies themselves, while the
/// rows are in cache). Returns a.
Activation to_bf16(Activation a, size_t n);

/// The oneDNN kernel of one GEMM primitive of the model and the step part (PartTimer name) that
/// was open when it was created ("" when none was).
struct GemmKernel {
  std::string part;
  std::string impl;   // oneDNN's primitive_desc::impl_info_str(), e.g. "brg:avx512_core_bf16", or
                      // the BLAS library's version and kernels, e.g. "OpenBLAS 0.3.21 Haswell"
  bool bf16 = false;  // bf16 inputs (else float32)
  GemmLibrary library = GemmLibrary::onednn;
};

/// The GEMM choice in force for `configured` (model.gemm): the environment variable WTE_GEMM
/// (auto, onednn, openblas or blis) where the configuration says auto, else `configured`.
/// Throws wte::UsageError naming WTE_GEMM's value when it is none of those, and wte::Error when
/// the chosen library is unavailable here (gemm_library_version says why).
GemmChoice resolve_gemm_choice(GemmChoice configured);

/// 64-byte-aligned bfloat16 storage (bits), zeroed (src/model/memory.h).
using Bf16Buffer = std::unique_ptr<uint16_t[], AlignedDeleter>;
Bf16Buffer allocate_bf16(size_t n);

/// Whether oneDNN has a native bf16 matmul on this CPU: the kernel it picks for bf16 inputs and a
/// float32 output (impl_info_str of a 256³ primitive, with the ISA appended where the name has
/// none: "gemm:jit (avx512_core_bf16)") and for float32 inputs. `native` when the bf16 kernel's
/// name says bf16 or amx (AVX512_BF16 or AMX instructions); otherwise oneDNN emulates bf16 or has
/// no kernel for it, and the model runs float32 GEMMs.
/// Computed once (ONEDNN_MAX_CPU_ISA, read when oneDNN starts, caps the ISA).
struct Bf16Support {
  bool native = false;
  std::string bf16_impl;  // "brg:avx512_core_bf16", or "none (...)" when oneDNN has none
  std::string f32_impl;   // "brg:avx512_core"
};
const Bf16Support& bf16_gemm_support();

/// oneDNN matmuls with a primitive cache, and the stream they run on.
class Gemm {
 public:
  /// Float32 GEMMs on resolve_gemm_choice(automatic): WTE_GEMM's choice, else the planner's.
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  /// dst = src · wei (+ bias broadcast over rows) (+ the old dst if `accumulate`, via oneDNN's sum
  /// post-op). src (.., M, K), wei (.., K, N), dst (.., M, N) of one rank with equal batch dims;
  /// bias (N) or nullptr. Asynchronous on stream(): call wait() before reading dst outside oneDNN.
  void run(float* dst, const MatView& dst_v, const float* src, const MatView& src_v,
           const float* wei, const MatView& wei_v, const float* bias = nullptr,
           bool accumulate = false) {
    run(dst, dst_v, as_f32(src, src_v), as_f32(wei, wei_v), bias, accumulate);
  }
  /// The same with typed operands: src and wei both f32 or both bf16 (dst and bias are f32).
  /// Throws wte::Error for mixed types or ranks.
  void run(float* dst, const MatView& dst_v, const Operand& src, const Operand& wei,
           const float* bias = nullptr, bool accumulate = false);

  dnnl::stream& stream() { return stream_; }
  void wait() { stream_.wait(); }

  /// Which library runs the float32 rank-2 GEMMs whose primitives are created from now on
  /// (resolve_gemm_choice(choice); workers follow). Throws as resolve_gemm_choice does.
  void set_choice(GemmChoice choice);
  GemmChoice choice() const { return choice_; }

  /// Step parts, for `wte profile step`. part(name) opens the part `name` (a PartTimer name such
  /// as "qkv_gemm_fwd") and closes the one open before; the primitives created while a part is
  /// open are attributed to it (kernels()). With a timer attached (set_timer), closing a part
  /// waits for the stream and adds the time since it opened to the timer; detached, part() only
  /// records the name. part(nullptr) closes the open part and opens none.
  void part(const char* name);
  /// The open part's name (nullptr when none is open).
  const char* current_part() const { return part_; }
  /// Attaches `timer` (nullptr detaches); no part is open.
  void set_timer(PartTimer* timer);

  /// Every primitive's kernel (one entry per primitive, the workers' included) with the part
  /// that runs it.
  std::vector<GemmKernel> kernels() const;

  /// The single-thread GEMMs of thread t of a parallel region that splits its products among
  /// its threads (each thread runs whole products on its own). Call it for every t on the thread
  /// that opens the region, before the region (the pool grows here, not inside it); use the
  /// returned worker only from inside, after omp_set_num_threads(1) in that thread. Why: oneDNN
  /// plans a primitive's blocking and thread partition from the thread count when it is created,
  /// while inside a region it runs on the calling thread alone; a worker's primitives are created
  /// inside the region with the count at 1, so they are planned for the one thread that runs them.
  /// The worker takes the open part's name (kernels()); it has no timer: the region is timed in
  /// the caller's part.
  Gemm& worker(size_t t);

 private:
  struct Prim;
  GemmLibrary pick_library(Prim& p, const Operand& src, const Operand& wei, float* dst,
                           const float* bias, bool accumulate);
  void execute(Prim& p, float* dst, const void* src, const void* wei, const float* bias);

  GemmChoice choice_ = GemmChoice::automatic;
  PartTimer* timer_ = nullptr;
  const char* part_ = nullptr;  // the open part
  std::chrono::steady_clock::time_point part_start_;
  dnnl::stream stream_;
  std::map<std::vector<int64_t>, std::unique_ptr<Prim>> cache_;
  std::vector<std::unique_ptr<Gemm>> workers_;
};

/// Linear layer forward (GPT-2's conv1d), llm.c's argument order:
///   out (N,OC) = inp (N,C) · weight (C,OC) + bias (OC)      (bias may be nullptr)
/// out written, and out.bf16 (if given) with out's bf16 copy, for a GEMM that reads it next (in
/// step part "bf16_convert"; the GEMM runs in the part the caller opened). inp and weight both
/// float32 or both with bf16 copies (GemmInput). Runs and waits for oneDNN.
void matmul_forward(Activation out, GemmInput inp, GemmInput weight, const float* bias, size_t N,
                    size_t C, size_t OC, Gemm& gemm);

/// Its backward. The parameter gradients accumulate (+=, Model::zero_grad zeroes them once per
/// step), the input gradient is written (=):
///   dinp (N,C) = dout · weightᵀ;  dweight (C,OC) += inpᵀ · dout;  dbias (OC) += Σ_n dout[n,:]
/// (dweight through oneDNN's sum post-op: one float add of the product to the old value).
/// dbias may be nullptr (no bias); the bias sum is the bias_backward kernel (fixed row blocks, so
/// its bits do not depend on the thread count) and reads the float32 dout.
/// bf16 GEMMs: dout, inp and weight all carry bf16 copies, which the GEMMs read; otherwise none
/// does. dinp.bf16 (optional): receives the bf16 copy of dinp, for a GEMM that reads it next.
/// Step parts: the GEMMs run in the part the caller opened (Gemm::part), the bias sum (first,
/// while dout is in cache) in "bias_bwd"; no part is open on return.
void matmul_backward(Activation dinp, float* dweight, float* dbias, GemmInput dout, GemmInput inp,
                     GemmInput weight, size_t N, size_t C, size_t OC, Gemm& gemm);

}  // namespace wte
