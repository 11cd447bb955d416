// Building blocks of `wte profile`: token id distributions, a median-of-repeats timer that can flush
// the caches between repeats, and the machine's memory limits measured in the same process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "src/model/gemm_blas.h"
#include "wte/model.h"

namespace wte::profile {

/// A token id distribution, parsed from `uniform`, `zipf:S` (S > 0), `same`, `sequential` or
/// `file:PATH` (raw int32 ids, e.g. a run's train.bin). Throws wte::Error naming the text and the
/// allowed forms.
struct IdDistribution {
  enum class Kind { kUniform, kZipf, kSame, kSequential, kFile } kind = Kind::kUniform;
  double s = 0.0;     // Zipf exponent
  std::string path;   // file:
  std::string label;  // as given, e.g. "zipf:1.1"
};
IdDistribution parse_distribution(const std::string& text);

/// N ids in [0, V) drawn from `dist` with a fixed seed (same ids on every run and machine):
///   uniform     each id uniform in [0, V)
///   zipf:S      rank r in [0, V) with probability ∝ 1/(r+1)^S, then mapped through a fixed random
///               permutation of [0, V) so the hot rows are scattered over the table as in real
///               vocabularies (token frequencies follow Zipf's law)
///   same        every id V/2 (one row takes every position: the worst case for row parallelism)
///   sequential  n mod V
///   file:PATH   the file's first N ids, cycled if it holds fewer; every id checked against V
/// Throws wte::Error for an unreadable file or an id outside [0, V) (names the id and position).
std::vector<int32_t> make_ids(const IdDistribution& dist, size_t N, size_t V, uint64_t seed);

/// Number of distinct ids (U, the rows a scatter must read and write).
size_t count_distinct(const std::vector<int32_t>& ids, size_t V);

/// The median of `v`: its middle value, the upper of the two middle ones for an even count (no
/// averaging: always one of the measured values); 0 for an empty `v`.
double median(std::vector<double> v);

/// The step profile's MFU line: "model FLOPs utilisation: G GFLOP/s = P% of that peak", where G is
/// the model's FLOPs per second of step time and P = 100 x `mfu` (G over the GEMM peak measured
/// in the same run). Above 100% the peak was measured low (a busy machine, a core taken away
/// mid-run) and the line says so: "(above 100%: the peak is unreliable; ...)".
std::string mfu_line(double model_gflops_per_s, double mfu);

/// Median wall time in seconds of `repeat` runs of fn() after one untimed warm-up run. If `flush`,
/// a buffer twice the size of the last-level cache (64 MiB) is written before every run (untimed),
/// so fn starts with cold caches.
double median_seconds(const std::function<void()>& fn, size_t repeat, bool flush);

/// Times two functions interleaved (a, b, a, b, ...; caches flushed before each if `flush`) and
/// returns their medians {a, b}. A kernel and its bound measured this way see the same machine
/// state, so their ratio is far less noisy on a shared machine than two separate medians.
std::pair<double, double> paired_median_seconds(const std::function<void()>& a,
                                                const std::function<void()>& b, size_t repeat,
                                                bool flush);

/// Writes 64 MiB (more than the 32 MiB L3), evicting earlier data from every cache level.
void flush_caches();

/// The machine's streaming limits on `bytes`-byte arrays (src and dst each that large, allocated
/// like a table: allocate_floats), parallel over the OpenMP threads in contiguous chunks:
///   run()         dst = src with wte::stream_copy: vector loads, non-temporal stores (no read of
///                 the destination lines): the copy bandwidth the hardware allows
///   run_memcpy()  the same with libc's memcpy per 1 MiB chunk (what most code gets)
///   run_read()    wte::stream_read of src: the read bandwidth
struct CopyProbe {
  explicit CopyProbe(size_t bytes);
  void run();
  void run_memcpy();
  float run_read();
  size_t bytes_moved() const { return 2 * bytes; }  // copy: read + written
  size_t bytes;
  Model::Buffer src, dst;
};

/// The machine's GEMM peak (f32, or bf16 inputs) as oneDNN reaches it: one row-major (M,K)·(K,N) oneDNN matmul
/// primitive, created once (at the current OpenMP thread count), inputs N(0,1). `wte profile step`
/// times it interleaved with the steps and divides a step's model FLOPs per second by its GFLOP/s
/// (MFU). Use a large square-ish shape (2048³: the GEMM's best case).
class GemmProbe {
 public:
  /// bf16: bfloat16 inputs (float32 accumulation and output), as model.matmul_precision = bf16.
  /// library: the library that runs a float32 probe (OpenBLAS and BLIS: one sgemm call on the
  /// same buffers); bf16 probes run on oneDNN. Throws wte::Error if the library is unavailable.
  GemmProbe(size_t M, size_t K, size_t N, bool bf16 = false,
            GemmLibrary library = GemmLibrary::onednn);
  ~GemmProbe();
  GemmProbe(const GemmProbe&) = delete;
  GemmProbe& operator=(const GemmProbe&) = delete;
  double run();  // one matmul, waited for; returns its wall time in seconds
  double gflop() const { return 2.0 * static_cast<double>(M_) * K_ * N_ / 1e9; }

 private:
  struct Impl;
  size_t M_, K_, N_;
  Impl* impl_;
};

/// The CPU's float32 FMA limit as measured: wte::fma_chains (register-only FMA chains, the
/// dispatched Highway target) on every OpenMP thread at once. run() returns the wall time of one
/// round; gflop() is the work of that round (threads × kFmaChains × lanes × iterations × 2).
class FmaProbe {
 public:
  explicit FmaProbe(size_t iterations = 4000000);
  double run();
  double gflop() const;
  size_t lanes() const { return lanes_; }
  int threads() const { return threads_; }

 private:
  size_t iterations_, lanes_ = 1;
  int threads_ = 1;
  float sink_ = 0;
};

/// GFLOP/s of GemmProbe(M, K, N): median of `repeat` runs after a warm-up.
double gemm_peak_gflops(size_t M, size_t K, size_t N, size_t repeat);

/// The random-row read: wte::gather_read of the rows ids[0, N) (the same rows the gather copies, read
/// at the bandwidth the hardware allows, nothing written). Returns the sum (keep it).
float read_rows(const float* table, const int32_t* ids, size_t N, size_t C);

/// memcpy of the rows ids[0, N) of a (V, C) float table into an (N, C) buffer: the gather's bound
/// (no arithmetic, same rows, same order, same parallel split as wte::embedding_forward).
void copy_rows(float* dst, const float* table, const int32_t* ids, size_t N, size_t C);

/// What else the machine is doing while wte profile measures: timings on a busy machine are not
/// the machine's own. Read from /proc/cpuinfo ("model name"), sysconf and getloadavg(3).
struct MachineState {
  std::string cpu_model;          // e.g. "AMD EPYC 9B45"; "unknown" if /proc/cpuinfo has none
  std::string cpu_family;         // "family 26 model 2" from /proc/cpuinfo ("" if absent)
  int cpus = 0;                   // online logical CPUs
  // Cache sizes in bytes from /sys/devices/system/cpu/cpu0/cache (sysconf if absent; 0: unknown):
  // L1 data and L2 of one core, L3 as seen by cpu0 (shared by the cores of its complex).
  size_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;
  std::string cache_source;       // "sysfs" or "sysconf" (which may report a whole package's L3)
  std::string highway_target;     // the target Highway's dynamic dispatch chose, e.g. "AVX3"
  std::string highway_cap;        // the WTE_MAX_SIMD cap in force, e.g. "AVX2" ("" for none)
  std::string onednn_isa;         // oneDNN's dnnl::get_effective_cpu_isa(), e.g. "avx512_core_bf16"
  std::string transparent_hugepages;  // the selected mode of /sys/kernel/mm/transparent_hugepage
  /// One line: caches and ISAs, e.g. "L1d 48 KiB, L2 1024 KiB, L3 32 MiB; Highway AVX3, oneDNN
  /// avx512_core_bf16; THP madvise".
  std::string describe() const;
  double load_average[3] = {0, 0, 0};  // 1, 5 and 15 minutes (runnable + waiting processes)
  /// Busy: the 1-minute load average is at least half a process per CPU, i.e. other work holds
  /// about half a core or more on average.
  bool busy() const { return load_average[0] >= 0.5 * cpus; }
};
MachineState read_machine_state();

}  // namespace wte::profile
