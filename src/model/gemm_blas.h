// Float32 GEMMs through BLAS libraries beside oneDNN: Debian's OpenBLAS and BLIS, both their
// OpenMP builds (GNU libgomp, the runtime oneDNN and wte's kernels use, so all share one thread
// pool and one thread count).
//
// Each library is opened at run time by the full path CMake found (dlopen, RTLD_LOCAL): both
// export cblas_sgemm and sgemm_, so linking both (or one beside a PyTorch that loads another
// OpenBLAS) would bind one library's symbols where the other's were meant. A library that was not
// found at build time or does not open is unavailable; oneDNN always is.
//
// Neither library splits the inner dimension K among threads (OpenBLAS and BLIS partition M and
// N only), so each output element is one thread's fixed sequence of FMAs: for a fixed library,
// shape and strides the bits are the same run after run (and, unlike oneDNN's, at any thread count).
#pragma once

#include <cstdint>
#include <string>

namespace wte {

/// The implementations a float32 GEMM can run on.
enum class GemmLibrary { onednn, openblas, blis };

/// "onednn", "openblas" or "blis".
const char* to_string(GemmLibrary lib);

/// Whether `lib` can run here: oneDNN always; OpenBLAS and BLIS when built in and their shared
/// library opened (the first call opens it).
bool gemm_library_available(GemmLibrary lib);

/// The library's version and the kernel set it runs here, e.g. "OpenBLAS 0.3.21 Haswell",
/// "BLIS 0.9.0 zen3"; "oneDNN 2.6.3 avx2"; "unavailable (<why>)" when it cannot run.
std::string gemm_library_version(GemmLibrary lib);

/// A row-major GEMM for a BLAS library: c (M,N), row stride ldc, (+)= a (M,K) · b (K,N), where a
/// and b are each a row-major matrix (trans false: element (i,j) at i*ld + j) or the transpose of
/// one (trans true: element (i,j) at j*ld + i).
struct BlasGemm {
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

/// c (+)= a · b on `lib` (openblas or blis) with `threads` threads (1 inside a parallel region):
/// c = a·b, or c += a·b when `accumulate` (BLAS's beta = 1: one add of the product to the old
/// value). Throws wte::Error if `lib` is unavailable or onednn.
void blas_sgemm(GemmLibrary lib, const BlasGemm& g, const float* a, const float* b, float* c,
                bool accumulate, int threads);

}  // namespace wte
