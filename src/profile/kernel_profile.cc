#include "src/profile/kernel_profile.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>

#include "wte/model.h"

namespace wte::profile {
namespace {

// printf into a std::string (progress lines are short).
template <typename... Args>
std::string format(const char* fmt, Args... args) {
  char line[256];
  std::snprintf(line, sizeof line, fmt, args...);
  return line;
}

// FNV-1a of the bytes of the given rows of a (V, C) table: equal hashes <=> (almost surely) equal bits.
uint64_t hash_rows(const float* table, const std::vector<int32_t>& rows, size_t C) {
  uint64_t h = 1469598103934665603ULL;
  for (int32_t r : rows) {
    const auto* p = reinterpret_cast<const unsigned char*>(table + static_cast<size_t>(r) * C);
    for (size_t i = 0; i < C * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ULL;
  }
  return h;
}

// The buffers every measurement uses, allocated and touched once (page faults would dominate
// otherwise): the (V, C) table, its gradient and AdamW moments, (N, C) hidden states and their
// gradient, the row-sparse gradient's min(N, V) rows, wpe (T, C) and the copy probe.
struct KernelBuffers {
  explicit KernelBuffers(const KernelProfileSettings& s)
      : table(allocate_floats(s.V * s.C)),
        dwte(allocate_floats(s.V * s.C)),
        m(allocate_floats(s.V * s.C)),
        v(allocate_floats(s.V * s.C)),
        dhidden(allocate_floats(s.N * s.C)),
        hidden(allocate_floats(s.N * s.C)),
        out_rows(allocate_floats(s.N * s.C)),
        grad_rows(allocate_floats(std::min(s.N, s.V) * s.C)),
        grad_ids(std::min(s.N, s.V)),
        T(s.N % 128 == 0 ? 128 : 1),  // wpe (T, C) stays in L2 like in training
        B(s.N / T),
        wpe(allocate_floats(T * s.C)),
        copy(copy_probe_bytes(s.quick)) {
    std::mt19937 rng(static_cast<uint32_t>(s.seed));
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (size_t i = 0; i < s.V * s.C; ++i) table[i] = normal(rng);
    for (size_t i = 0; i < s.N * s.C; ++i) dhidden[i] = normal(rng);
    for (size_t i = 0; i < T * s.C; ++i) wpe[i] = normal(rng);
  }
  Model::Buffer table, dwte, m, v, dhidden, hidden, out_rows, grad_rows;
  std::vector<int32_t> grad_ids;
  size_t T, B;
  Model::Buffer wpe;
  CopyProbe copy;
  ScatterWorkspace ws;
};

// One distribution's ids at one thread count and cache state: the measurements of one block of
// the table, appended to `out` with this pass's limits.
struct Pass {
  const KernelProfileSettings& s;
  KernelBuffers& buf;
  const std::function<void(const std::string&)>& progress;
  std::vector<KernelMeasurement>& out;
  int threads;
  const std::string& label;
  const char* cache;
  bool flush;
  const std::vector<int32_t>& ids;
  size_t U;                             // distinct ids
  const std::vector<int32_t>& touched;  // the distinct ids, ascending
  double copy_gbs = 0, rows_gbs = 0;

  void add(const std::string& kernel, const std::string& strategy, double seconds, double bytes,
           std::string note = "") {
    out.push_back({threads, label, kernel, strategy, cache, seconds, bytes, copy_gbs, rows_gbs,
                   std::move(note)});
  }
  void say(const std::string& what) const {
    if (progress)
      progress(format("profile: %d thread(s), %s, %s: %s...", threads, label.c_str(), cache,
                      what.c_str()));
  }
  double median_of(const std::function<void()>& fn) const {
    return median_seconds(fn, s.repeat, flush);
  }
};

// The machine's limits: streaming copy (vector loads, non-temporal stores; and libc's memcpy),
// streaming read, and the read of the same random rows (prefetched); then the gather and its
// bounds (a memcpy of the same rows; the same rows read), timed interleaved so their ratio sees
// the same machine state, and the lookup with wpe.
void measure_limits_and_gather(Pass& p) {
  const size_t N = p.s.N, C = p.s.C;
  KernelBuffers& b = p.buf;
  p.say("limits");
  volatile float sink = 0;
  const auto [copy_s, memcpy_s] = paired_median_seconds(
      [&] { b.copy.run(); }, [&] { b.copy.run_memcpy(); }, p.s.repeat, p.flush);
  const double read_s = p.median_of([&] { sink = b.copy.run_read(); });
  p.copy_gbs = b.copy.bytes_moved() / copy_s / 1e9;
  const double gather_bytes = 2.0 * N * C * 4;
  const double row_read_s =
      p.median_of([&] { sink = read_rows(b.table.get(), p.ids.data(), N, C); });
  const auto copy_rows_fn = [&] { copy_rows(b.out_rows.get(), b.table.get(), p.ids.data(), N, C); };
  const bool streams = gather_streams(N, C);
  const auto gather = [&] { embedding_gather(b.hidden.get(), p.ids.data(), b.table.get(), N, C); };
  const auto gather_other = [&] {
    embedding_gather(b.hidden.get(), p.ids.data(), b.table.get(), N, C,
                     streams ? GatherStores::kCached : GatherStores::kStreaming);
  };
  const auto lookup = [&] {
    embedding_forward(b.hidden.get(), p.ids.data(), b.table.get(), b.wpe.get(), b.B, b.T, C);
  };
  if (p.s.gather) p.say("gather");
  const auto [rows_s, gather_s] =
      p.s.gather ? paired_median_seconds(copy_rows_fn, gather, p.s.repeat, p.flush)
                 : std::pair<double, double>{p.median_of(copy_rows_fn), 0.0};
  p.rows_gbs = gather_bytes / rows_s / 1e9;
  p.add("copy", "vector-nt", copy_s, b.copy.bytes_moved());
  p.add("copy", "memcpy", memcpy_s, b.copy.bytes_moved());
  p.add("read", "vector", read_s, static_cast<double>(b.copy.bytes));
  p.add("row-read", "prefetch", row_read_s, gather_bytes / 2, "rows read only");
  p.add("row-memcpy", "memcpy", rows_s, gather_bytes);
  if (!p.s.gather) return;
  p.add("gather", std::string("auto=") + (streams ? "stream" : "cached"), gather_s, gather_bytes);
  p.add("gather", streams ? "cached" : "stream", p.median_of(gather_other), gather_bytes);
  p.add("lookup", "gather+wpe", p.median_of(lookup), gather_bytes, "embedding_forward");
}

// Every scatter strategy of the lookup's backward, then the row-sparse backward and the untied
// backward fused with lazy AdamW. `first_hash` holds, per strategy, the bits of its warm result
// at the first thread count (`first_pass`: written, else compared).
void measure_scatters(Pass& p, bool first_pass, std::vector<uint64_t>& first_hash) {
  const size_t N = p.s.N, C = p.s.C, V = p.s.V, U = p.U;
  KernelBuffers& b = p.buf;
  const std::string first_threads = std::to_string(p.s.threads[0]) + "t";
  const double scatter_bytes = (static_cast<double>(N) + 2.0 * U) * C * 4 + 4.0 * N;
  for (size_t si = 0; si < p.s.strategies.size(); ++si) {
    const ScatterStrategy st = p.s.strategies[si];
    std::string name = scatter_strategy_name(st);
    if (st == ScatterStrategy::kAuto)
      name += std::string("=") + scatter_strategy_name(choose_scatter_strategy(p.ids.data(), N, C, V));
    p.say("scatter " + name);
    const auto scatter = [&] {
      embedding_backward_wte_strategy(st, b.dwte.get(), b.dhidden.get(), p.ids.data(), N, C, V,
                                      &b.ws);
    };
    const double s = p.median_of(scatter);
    std::string note;
    if (!p.flush) {  // the result's bits from a zero table, compared across thread counts
      for (int32_t r : p.touched)
        std::memset(b.dwte.get() + static_cast<size_t>(r) * C, 0, C * sizeof(float));
      scatter();
      const uint64_t h = hash_rows(b.dwte.get(), p.touched, C);
      if (first_pass) first_hash[si] = h;
      else note = h == first_hash[si] ? "same bits as " + first_threads
                                      : "bits differ from " + first_threads;
    }
    p.add("scatter", name, s, scatter_bytes, note);
  }
  // The lookup's gradient in its row-sparse form (U distinct ids + U summed rows, what untied
  // training hands to the lazy AdamW): no (V, C) buffer is read or written.
  p.say("scatter rows");
  size_t num_rows = 0;
  const double rows_s = p.median_of([&] {
    embedding_backward_rows(b.grad_rows.get(), b.grad_ids.data(), &num_rows, b.dhidden.get(),
                            p.ids.data(), N, C, V, &b.ws);
  });
  p.add("scatter-rows", "sorted", rows_s,
        (static_cast<double>(N) + static_cast<double>(U)) * C * 4 + 4.0 * N,
        "U=" + std::to_string(U) + " rows out");
  p.say("untied scatter + lazy AdamW");
  const AdamWParams hp{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 10};
  const double s = p.median_of([&] {
    embedding_backward_adamw_lazy(b.table.get(), b.m.get(), b.v.get(), b.dhidden.get(),
                                  p.ids.data(), N, C, V, hp, &b.ws);
  });
  p.add("lazy-adamw", "fused", s, (static_cast<double>(N) + 6.0 * U) * C * 4 + 4.0 * N,
        "U=" + std::to_string(U));
}

}  // namespace

size_t copy_probe_bytes(bool quick) { return quick ? (48u << 20) : (256u << 20); }

std::vector<KernelMeasurement> profile_kernels(
    const KernelProfileSettings& s, const std::function<void(const std::string&)>& progress) {
  if (progress)
    progress(format("profile: allocating a %zu x %zu table (%.0f MB) and its moments...", s.V,
                    s.C, s.V * s.C * 4e-6));
  KernelBuffers buf(s);
  std::vector<KernelMeasurement> out;
  // Bits of each deterministic strategy's result per distribution at the first thread count.
  std::vector<std::vector<uint64_t>> first_hash(s.dists.size(),
                                                std::vector<uint64_t>(s.strategies.size(), 0));
  for (size_t ti = 0; ti < s.threads.size(); ++ti) {
    omp_set_num_threads(s.threads[ti]);
    for (size_t di = 0; di < s.dists.size(); ++di) {
      const std::vector<int32_t> ids = make_ids(s.dists[di], s.N, s.V, s.seed + di);
      const size_t U = count_distinct(ids, s.V);
      std::vector<int32_t> touched;
      {
        std::vector<char> seen(s.V, 0);
        for (int32_t id : ids) seen[static_cast<size_t>(id)] = 1;
        for (size_t r = 0; r < s.V; ++r)
          if (seen[r]) touched.push_back(static_cast<int32_t>(r));
      }
      for (const char* cache : {"warm", "cold"}) {
        Pass p{s, buf, progress, out, s.threads[ti], s.dists[di].label, cache,
               std::strcmp(cache, "cold") == 0, ids, U, touched};
        measure_limits_and_gather(p);
        if (s.scatter) measure_scatters(p, ti == 0, first_hash[di]);
      }
    }
  }
  if (progress) progress("");
  return out;
}

}  // namespace wte::profile
