#include "src/model/gemm_blas.h"

#include <dlfcn.h>
#include <omp.h>

#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

#include "src/model/onednn_isa.h"
#include "wte/error.h"

#ifdef WTE_BLIS_HEADER
// blis.h: the typed API's argument types (trans_t, dim_t, inc_t, rntm_t); its inline helpers
// compare unsigned values with 0, which -Wextra reports.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtype-limits"
#include WTE_BLIS_HEADER
#pragma GCC diagnostic pop
#endif

namespace wte {
namespace {

// cblas_sgemm as OpenBLAS 0.3 declares it (blasint: int without USE_64BITINT, which Debian's
// libopenblas0 builds do not set; its enums are ints). Declared here rather than through
// cblas.h: BLIS ships a cblas.h of its own.
using CblasSgemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int ldb, float beta, float* c,
                            int ldc);
using CharFn = char* (*)();
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;

// A library opened once per process; `why` says what failed when handle is null.
struct Opened {
  void* handle = nullptr;
  std::string why;
};

Opened open_library(const char* path, const char* package) {
  Opened o;
  if (path == nullptr) {
    o.why = std::string("wte was built without it (install ") + package + " and run cmake again)";
    return o;
  }
  // A library's start-up code may set OpenMP's thread count from the environment: keep ours.
  const int threads = omp_get_max_threads();
  o.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  omp_set_num_threads(threads);
  if (o.handle == nullptr) {
    const char* err = dlerror();
    o.why = std::string("cannot open ") + path + ": " + (err != nullptr ? err : "?") +
            " (package " + package + ")";
  }
  return o;
}

template <typename Fn>
Fn symbol(Opened& o, const char* name) {
  if (o.handle == nullptr) return nullptr;
  auto fn = reinterpret_cast<Fn>(dlsym(o.handle, name));
  if (fn == nullptr) {
    o.why = std::string("no symbol ") + name + " in the library";
    o.handle = nullptr;
  }
  return fn;
}

struct OpenBlas {
  Opened lib;
  CblasSgemm sgemm = nullptr;
  std::string version;
};

const OpenBlas& openblas() {
  static const OpenBlas o = [] {
    OpenBlas b;
#ifdef WTE_OPENBLAS_PATH
    b.lib = open_library(WTE_OPENBLAS_PATH, "libopenblas0-openmp");
#else
    b.lib = open_library(nullptr, "libopenblas-openmp-dev");
#endif
    b.sgemm = symbol<CblasSgemm>(b.lib, "cblas_sgemm");
    const auto corename = symbol<CharFn>(b.lib, "openblas_get_corename");
    const auto config = symbol<CharFn>(b.lib, "openblas_get_config");
    if (b.lib.handle != nullptr) {
      // openblas_get_config: "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"
      std::string c = config();
      const size_t v = c.find(' ', c.find(' ') + 1);
      b.version = c.substr(0, v) + " " + corename();
    } else {
      b.version = "unavailable (" + b.lib.why + ")";
    }
    return b;
  }();
  return o;
}

#ifdef WTE_BLIS_HEADER
using BliSgemmEx = void (*)(trans_t, trans_t, dim_t, dim_t, dim_t, float*, float*, inc_t, inc_t,
                            float*, inc_t, inc_t, float*, float*, inc_t, inc_t, cntx_t*, rntm_t*);
using BliArchQuery = arch_t (*)();
using BliArchString = char* (*)(arch_t);
#endif

struct Blis {
  Opened lib;
#ifdef WTE_BLIS_HEADER
  BliSgemmEx sgemm = nullptr;
#endif
  std::string version;
};

const Blis& blis() {
  static const Blis o = [] {
    Blis b;
#if defined(WTE_BLIS_PATH) && defined(WTE_BLIS_HEADER)
    b.lib = open_library(WTE_BLIS_PATH, "libblis4-openmp");
    b.sgemm = symbol<BliSgemmEx>(b.lib, "bli_sgemm_ex");
    const auto version = symbol<CharFn>(b.lib, "bli_info_get_version_str");
    const auto query = symbol<BliArchQuery>(b.lib, "bli_arch_query_id");
    const auto arch = symbol<BliArchString>(b.lib, "bli_arch_string");
    if (b.lib.handle != nullptr) b.version = std::string("BLIS ") + version() + " " + arch(query());
#else
    b.lib = open_library(nullptr, "libblis-openmp-dev");
#endif
    if (b.lib.handle == nullptr) b.version = "unavailable (" + b.lib.why + ")";
    return b;
  }();
  return o;
}

int to_int(int64_t v, const char* what) {
  if (v < 0 || v > INT32_MAX)
    throw Error(std::string("blas_sgemm: ") + what + " = " + std::to_string(v) +
                " is outside OpenBLAS's 32-bit range");
  return static_cast<int>(v);
}

}  // namespace

const char* to_string(GemmLibrary lib) {
  switch (lib) {
    case GemmLibrary::onednn: return "onednn";
    case GemmLibrary::openblas: return "openblas";
    case GemmLibrary::blis: return "blis";
  }
  return "?";
}

bool gemm_library_available(GemmLibrary lib) {
  switch (lib) {
    case GemmLibrary::onednn: return true;
    case GemmLibrary::openblas: return openblas().lib.handle != nullptr;
    case GemmLibrary::blis: return blis().lib.handle != nullptr;
  }
  return false;
}

std::string gemm_library_version(GemmLibrary lib) {
  switch (lib) {
    case GemmLibrary::onednn: {
      const dnnl_version_t* v = dnnl_version();
      return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
             std::to_string(v->patch) + " " + onednn_isa();
    }
    case GemmLibrary::openblas: return openblas().version;
    case GemmLibrary::blis: return blis().version;
  }
  return "?";
}

void blas_sgemm(GemmLibrary lib, const BlasGemm& g, const float* a, const float* b, float* c,
                bool accumulate, int threads) {
  if (lib == GemmLibrary::onednn || !gemm_library_available(lib))
    throw Error(std::string("blas_sgemm: library ") + to_string(lib) + " is " +
                (lib == GemmLibrary::onednn ? "not a BLAS" : gemm_library_version(lib)));
  const float beta = accumulate ? 1.0f : 0.0f;
  if (lib == GemmLibrary::openblas) {
    // OpenBLAS's OpenMP build takes its thread count from omp_get_max_threads() and runs one
    // thread inside a parallel region: `threads` is that count already.
    openblas().sgemm(kCblasRowMajor, g.trans_a ? kCblasTrans : kCblasNoTrans,
                     g.trans_b ? kCblasTrans : kCblasNoTrans, to_int(g.M, "M"), to_int(g.N, "N"),
                     to_int(g.K, "K"), 1.0f, a, to_int(g.lda, "lda"), b, to_int(g.ldb, "ldb"), beta,
                     c, to_int(g.ldc, "ldc"));
    return;
  }
#ifdef WTE_BLIS_HEADER
  // BLIS takes any (row, column) strides: a transpose is a swap of the two.
  rntm_t rntm = BLIS_RNTM_INITIALIZER;
  bli_rntm_set_num_threads(threads, &rntm);
  float alpha = 1.0f, beta_v = beta;
  const inc_t rsa = g.trans_a ? 1 : g.lda, csa = g.trans_a ? g.lda : 1;
  const inc_t rsb = g.trans_b ? 1 : g.ldb, csb = g.trans_b ? g.ldb : 1;
  blis().sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, g.M, g.N, g.K, &alpha, const_cast<float*>(a),
               rsa, csa, const_cast<float*>(b), rsb, csb, &beta_v, c, g.ldc, 1, nullptr, &rntm);
#endif
}

}  // namespace wte
