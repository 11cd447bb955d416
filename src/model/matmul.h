// Matrix products of the model through oneDNN matmul primitives, and the linear layer built on them
// (GPT-2's conv1d: y = x · w + b with w stored (in, out)).
//
// Every operand is a strided view of a plain float buffer: a transpose or a head's columns inside
// qkv are strides, never copies. A primitive is created once per distinct (shapes, strides, bias,
// accumulate) and reused; buffers are bound per call. oneDNN fixes its partitioning over threads
// when a primitive is created, so results are bit-identical for a fixed thread count.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "wte/model.h"  // StepTimes

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

/// oneDNN matmuls with a primitive cache, and the stream they run on.
class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  /// dst = src · wei (+ bias broadcast over rows) (+ the old dst if `accumulate`, via oneDNN's sum
  /// post-op). src (.., M, K), wei (.., K, N), dst (.., M, N) of one rank with equal batch dims;
  /// bias (N) or nullptr. Asynchronous on stream(): call wait() before reading dst outside oneDNN.
  void run(float* dst, const MatView& dst_v, const float* src, const MatView& src_v,
           const float* wei, const MatView& wei_v, const float* bias = nullptr,
           bool accumulate = false);

  dnnl::stream& stream() { return stream_; }
  void wait() { stream_.wait(); }
  /// Primitives created so far (one per distinct shape/stride/flag combination).
  size_t num_primitives() const { return cache_.size(); }

  /// Per-part timing for `wte profile step` (Model::set_step_times). start_timing(times) attaches
  /// `times` (nullptr detaches) and starts the clock; then mark(field) waits for the stream and
  /// adds the time since the previous mark to times->*field. Detached, mark does nothing (no wait).
  void start_timing(StepTimes* times);
  void mark(double StepTimes::*field);

 private:
  StepTimes* times_ = nullptr;
  std::chrono::steady_clock::time_point last_mark_;
  struct Prim;
  dnnl::stream stream_;
  std::map<std::vector<int64_t>, std::unique_ptr<Prim>> cache_;
};

/// Linear layer forward (GPT-2's conv1d), llm.c's argument order:
///   out (N,OC) = inp (N,C) · weight (C,OC) + bias (OC)      (bias may be nullptr)
/// out written. Runs and waits for oneDNN.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, size_t N,
                    size_t C, size_t OC, Gemm& gemm);

/// Its backward; every output is written (=), none accumulated:
///   dinp (N,C) = dout · weightᵀ;  dweight (C,OC) = inpᵀ · dout;  dbias (OC) = Σ_n dout[n,:]
/// dbias may be nullptr (no bias); the bias sum is the bias_backward kernel (fixed row blocks, so
/// its bits do not depend on the thread count).
/// `gemm_part` (optional): the StepTimes field its two GEMMs are charged to (gemm.mark); the bias
/// sum is then charged to StepTimes::bias_bwd.
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, size_t N, size_t C, size_t OC,
                     Gemm& gemm, double StepTimes::*gemm_part = nullptr);

}  // namespace wte
