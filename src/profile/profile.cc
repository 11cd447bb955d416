#include "src/profile/profile.h"

#include <omp.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>

#include "hwy/targets.h"
#include "src/model/onednn_isa.h"
#include "wte/data.h"
#include "wte/kernels.h"
#include "src/io/suggest.h"
#include "wte/error.h"
#include "wte/simd_target.h"

namespace wte::profile {

IdDistribution parse_distribution(const std::string& text) {
  IdDistribution d;
  d.label = text;
  if (text == "uniform") {
    d.kind = IdDistribution::Kind::kUniform;
  } else if (text == "same") {
    d.kind = IdDistribution::Kind::kSame;
  } else if (text == "sequential") {
    d.kind = IdDistribution::Kind::kSequential;
  } else if (text.rfind("zipf:", 0) == 0) {
    d.kind = IdDistribution::Kind::kZipf;
    char* end = nullptr;
    d.s = std::strtod(text.c_str() + 5, &end);
    if (end == text.c_str() + 5 || *end != '\0' || !(d.s > 0.0) || !std::isfinite(d.s))
      throw Error("--dist '" + text + "': the Zipf exponent must be a number > 0, e.g. zipf:1.1");
  } else if (text.rfind("file:", 0) == 0 && text.size() > 5) {
    d.kind = IdDistribution::Kind::kFile;
    d.path = text.substr(5);
  } else {
    throw Error("--dist '" + text + "' is not a distribution; allowed: uniform, zipf:S (S > 0), "
                "same, sequential, file:PATH (raw int32 token ids)" +
                io::did_you_mean(text.substr(0, text.find(':')),
                                 {"uniform", "zipf", "same", "sequential", "file"}));
  }
  return d;
}

std::vector<int32_t> make_ids(const IdDistribution& dist, size_t N, size_t V, uint64_t seed) {
  std::vector<int32_t> ids(N);
  std::mt19937_64 rng(seed);
  switch (dist.kind) {
    case IdDistribution::Kind::kUniform: {
      std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V - 1));
      for (int32_t& id : ids) id = pick(rng);
      break;
    }
    case IdDistribution::Kind::kZipf: {
      std::vector<double> cdf(V);
      double total = 0.0;
      for (size_t r = 0; r < V; ++r) cdf[r] = total += 1.0 / std::pow(static_cast<double>(r + 1), dist.s);
      std::vector<int32_t> perm(V);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      std::uniform_real_distribution<double> u(0.0, total);
      for (int32_t& id : ids) {
        const size_t r = static_cast<size_t>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin());
        id = perm[std::min(r, V - 1)];
      }
      break;
    }
    case IdDistribution::Kind::kSame:
      std::fill(ids.begin(), ids.end(), static_cast<int32_t>(V / 2));
      break;
    case IdDistribution::Kind::kSequential:
      for (size_t n = 0; n < N; ++n) ids[n] = static_cast<int32_t>(n % V);
      break;
    case IdDistribution::Kind::kFile: {
      const std::vector<int32_t> file = read_token_file(dist.path);
      if (file.empty()) throw Error("--dist file:" + dist.path + ": the file holds no token ids");
      check_token_ids(file.data(), std::min(file.size(), N), V, "--dist file:" + dist.path);
      for (size_t n = 0; n < N; ++n) ids[n] = file[n % file.size()];
      break;
    }
  }
  return ids;
}

size_t count_distinct(const std::vector<int32_t>& ids, size_t V) {
  std::vector<char> seen(V, 0);
  size_t u = 0;
  for (int32_t id : ids) u += seen[static_cast<size_t>(id)] ? 0 : (seen[static_cast<size_t>(id)] = 1);
  return u;
}

void flush_caches() {
  static std::vector<char> buffer(64u << 20);
  static char value = 0;
  ++value;
  std::memset(buffer.data(), value, buffer.size());
  asm volatile("" : : "r"(buffer.data()) : "memory");
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

std::string mfu_line(double model_gflops_per_s, double mfu) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "model FLOPs utilisation: %.1f GFLOP/s = %.1f%% of that peak",
                model_gflops_per_s, 100.0 * mfu);
  std::string line = buf;
  if (mfu > 1.0)
    line += " (above 100%: the peak is unreliable, measured low while the machine was busy; "
            "rerun on a quiet machine)";
  return line;
}

double median_seconds(const std::function<void()>& fn, size_t repeat, bool flush) {
  using Clock = std::chrono::steady_clock;
  if (flush) flush_caches();
  fn();  // warm-up: first-touch faults, thread pool start, oneDNN JIT
  std::vector<double> times;
  times.reserve(repeat);
  for (size_t r = 0; r < std::max<size_t>(repeat, 1); ++r) {
    if (flush) flush_caches();
    const auto t0 = Clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::nth_element(times.begin(), times.begin() + static_cast<ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

std::pair<double, double> paired_median_seconds(const std::function<void()>& a,
                                                const std::function<void()>& b, size_t repeat,
                                                bool flush) {
  using Clock = std::chrono::steady_clock;
  auto timed = [&](const std::function<void()>& fn) {
    if (flush) flush_caches();
    const auto t0 = Clock::now();
    fn();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  timed(a);  // warm-up of both
  timed(b);
  std::vector<double> ta, tb;
  for (size_t r = 0; r < std::max<size_t>(repeat, 1); ++r) {
    ta.push_back(timed(a));
    tb.push_back(timed(b));
  }
  auto median = [](std::vector<double>& x) {
    std::nth_element(x.begin(), x.begin() + static_cast<ptrdiff_t>(x.size() / 2), x.end());
    return x[x.size() / 2];
  };
  return {median(ta), median(tb)};
}

CopyProbe::CopyProbe(size_t b)
    : bytes(b / sizeof(float) * sizeof(float)), src(allocate_floats(b / sizeof(float))),
      dst(allocate_floats(b / sizeof(float))) {
  std::fill(src.get(), src.get() + bytes / sizeof(float), 1.0f);
}

void CopyProbe::run() { stream_copy(dst.get(), src.get(), bytes / sizeof(float)); }

void CopyProbe::run_memcpy() {
  char* d = reinterpret_cast<char*>(dst.get());
  const char* s = reinterpret_cast<const char*>(src.get());
  const size_t chunk = 1u << 20;
  const size_t chunks = (bytes + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
  for (size_t k = 0; k < chunks; ++k)
    std::memcpy(d + k * chunk, s + k * chunk, std::min(chunk, bytes - k * chunk));
}

float CopyProbe::run_read() { return stream_read(src.get(), bytes / sizeof(float)); }

struct GemmProbe::Impl {
  GemmLibrary library = GemmLibrary::onednn;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul matmul_prim;
  std::vector<float> src, wei, dst;
  std::vector<uint16_t> src16, wei16;
  dnnl::memory src_mem, wei_mem, dst_mem;
};

GemmProbe::GemmProbe(size_t M, size_t K, size_t N, bool bf16, GemmLibrary library)
    : M_(M), K_(K), N_(N), impl_(new Impl) {
  impl_->library = bf16 ? GemmLibrary::onednn : library;
  if (!gemm_library_available(impl_->library))
    throw Error(std::string("GEMM library ") + to_string(library) + ": " +
                gemm_library_version(library));
  using dnnl::memory;
  const auto md = [](size_t rows, size_t cols, memory::data_type type) {
    return memory::desc({static_cast<memory::dim>(rows), static_cast<memory::dim>(cols)}, type,
                        memory::format_tag::ab);
  };
  const memory::data_type in = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const memory::desc src_md = md(M, K, in), wei_md = md(K, N, in),
                     dst_md = md(M, N, memory::data_type::f32);
  const dnnl::matmul::primitive_desc matmul_pd(dnnl::matmul::desc(src_md, wei_md, dst_md),
                                               impl_->engine);
  impl_->matmul_prim = dnnl::matmul(matmul_pd);
  impl_->src.resize(M * K);
  impl_->wei.resize(K * N);
  impl_->dst.resize(M * N);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (float& x : impl_->src) x = normal(rng);
  for (float& x : impl_->wei) x = normal(rng);
  if (bf16) {
    impl_->src16.resize(M * K);
    impl_->wei16.resize(K * N);
    convert_f32_to_bf16(impl_->src16.data(), impl_->src.data(), M * K);
    convert_f32_to_bf16(impl_->wei16.data(), impl_->wei.data(), K * N);
  }
  impl_->src_mem = memory(src_md, impl_->engine,
                          bf16 ? static_cast<void*>(impl_->src16.data()) : impl_->src.data());
  impl_->wei_mem = memory(wei_md, impl_->engine,
                          bf16 ? static_cast<void*>(impl_->wei16.data()) : impl_->wei.data());
  impl_->dst_mem = memory(dst_md, impl_->engine, impl_->dst.data());
}

GemmProbe::~GemmProbe() { delete impl_; }

double GemmProbe::run() {
  const auto t0 = std::chrono::steady_clock::now();
  if (impl_->library != GemmLibrary::onednn) {
    BlasGemm g;
    g.M = static_cast<int64_t>(M_);
    g.N = static_cast<int64_t>(N_);
    g.K = static_cast<int64_t>(K_);
    g.lda = g.K;
    g.ldb = g.ldc = g.N;
    blas_sgemm(impl_->library, g, impl_->src.data(), impl_->wei.data(), impl_->dst.data(), false,
               omp_get_max_threads());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  impl_->matmul_prim.execute(impl_->stream, {{DNNL_ARG_SRC, impl_->src_mem},
                                             {DNNL_ARG_WEIGHTS, impl_->wei_mem},
                                             {DNNL_ARG_DST, impl_->dst_mem}});
  impl_->stream.wait();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

FmaProbe::FmaProbe(size_t iterations) : iterations_(iterations) {
  threads_ = omp_get_max_threads();
  fma_chains(1.0f, 0.5f, 0.5f, 1, &lanes_);
}

double FmaProbe::run() {
  const auto t0 = std::chrono::steady_clock::now();
  float total = 0;
  // mul 1 - 2^-20 and add 2^-20·x keep every chain finite and changing (no denormals, no constant
  // the compiler could fold); the sum is kept so the loop is never dropped.
#pragma omp parallel reduction(+ : total)
  {
    size_t lanes = 0;
    total += fma_chains(1.0f + static_cast<float>(omp_get_thread_num()), 1.0f - 1.0f / 1048576,
                        1.0f / 1048576, iterations_, &lanes);
  }
  sink_ += total;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double FmaProbe::gflop() const {
  return 2.0 * static_cast<double>(threads_) * kFmaChains * static_cast<double>(lanes_) *
         static_cast<double>(iterations_) / 1e9;
}

double gemm_peak_gflops(size_t M, size_t K, size_t N, size_t repeat) {
  GemmProbe probe(M, K, N);
  return probe.gflop() / median_seconds([&] { probe.run(); }, repeat, false);
}

float read_rows(const float* table, const int32_t* ids, size_t N, size_t C) {
  return gather_read(ids, table, N, C);
}

void copy_rows(float* dst, const float* table, const int32_t* ids, size_t N, size_t C) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n)
    std::memcpy(dst + n * C, table + static_cast<size_t>(ids[n]) * C, C * sizeof(float));
}

namespace {

// "48K" / "1024K" / "32M" (sysfs cache sizes) in bytes; 0 if it does not parse.
size_t parse_cache_size(const std::string& text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) return 0;
  const char unit = *end;
  return static_cast<size_t>(v) * (unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1);
}

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string kib(size_t bytes) {
  if (bytes == 0) return "?";
  if (bytes >= (size_t{4} << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

std::string MachineState::describe() const {
  return "L1d " + kib(l1d_bytes) + ", L2 " + kib(l2_bytes) + ", L3 " + kib(l3_bytes) + " (" +
         cache_source + "); Highway " + highway_target + ", oneDNN " + onednn_isa +
         "; transparent huge pages " +
         (transparent_hugepages.empty() ? "?" : transparent_hugepages) +
         (highway_cap.empty() ? "" : "; Highway capped by WTE_MAX_SIMD=" + highway_cap);
}

MachineState read_machine_state() {
  MachineState m;
  m.cpu_model = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, family, model;
  auto value = [](const std::string& l) {
    const size_t colon = l.find(':');
    const size_t start = colon == std::string::npos ? std::string::npos : l.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : l.substr(start);
  };
  while (std::getline(cpuinfo, line)) {
    if (line.empty()) break;  // the first processor's block only
    if (line.rfind("model name", 0) == 0) m.cpu_model = value(line);
    else if (line.rfind("cpu family", 0) == 0) family = value(line);
    else if (line.rfind("model", 0) == 0 && line.rfind("model name", 0) != 0) model = value(line);
  }
  if (!family.empty()) m.cpu_family = "family " + family + " model " + model;
  m.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (getloadavg(m.load_average, 3) != 3) m.load_average[0] = m.load_average[1] = m.load_average[2] = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = read_first_line(dir + "level"), type = read_first_line(dir + "type");
    if (level.empty()) continue;
    const size_t size = parse_cache_size(read_first_line(dir + "size"));
    if (level == "1" && type == "Data") m.l1d_bytes = size;
    if (level == "2") m.l2_bytes = size;
    if (level == "3") m.l3_bytes = size;
  }
  const auto from_sysconf = [](int name) {
    const long v = sysconf(name);
    return v > 0 ? static_cast<size_t>(v) : size_t{0};
  };
  m.cache_source = m.l1d_bytes != 0 || m.l2_bytes != 0 || m.l3_bytes != 0 ? "sysfs" : "sysconf";
  if (m.l1d_bytes == 0) m.l1d_bytes = from_sysconf(_SC_LEVEL1_DCACHE_SIZE);
  if (m.l2_bytes == 0) m.l2_bytes = from_sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (m.l3_bytes == 0) m.l3_bytes = from_sysconf(_SC_LEVEL3_CACHE_SIZE);
  m.highway_target = simd_target_name();
  m.highway_cap = simd_target_cap();
  m.onednn_isa = onednn_isa();
  // "always [madvise] never": the bracketed word is the mode in force.
  const std::string thp = read_first_line("/sys/kernel/mm/transparent_hugepage/enabled");
  const size_t open = thp.find('['), close = thp.find(']');
  if (open != std::string::npos && close != std::string::npos && close > open)
    m.transparent_hugepages = thp.substr(open + 1, close - open - 1);
  return m;
}

}  // namespace wte::profile
