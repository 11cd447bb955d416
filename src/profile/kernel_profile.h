// `wte profile scatter|gather|all`: the embedding lookup's kernels (the gather wte[ids], the
// lookup with wpe, every scatter strategy of its backward, the row-sparse backward and the untied
// backward fused with lazy AdamW) timed beside the machine's memory limits measured in the same
// run, warm and with caches flushed, at every thread count and id distribution asked for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "src/profile/profile.h"
#include "wte/kernels.h"

namespace wte::profile {

/// What profile_kernels measures. Checked by the caller (the command line): every count >= 1,
/// thread counts distinct, a file distribution's path a readable regular file.
struct KernelProfileSettings {
  size_t V = 50257;   // rows of the table
  size_t C = 768;     // floats per row
  size_t N = 8192;    // ids per step (B·T)
  size_t repeat = 15; // timed repeats per measurement (median)
  std::vector<IdDistribution> dists;     // one set of measurements per distribution
  std::vector<int> threads = {1, 2};     // OpenMP thread counts, measured in this order
  std::vector<ScatterStrategy> strategies;  // scatter strategies timed (kAuto names its choice)
  uint64_t seed = 1234;  // of the table, dhidden, wpe (mt19937) and the generated ids
  bool quick = false;    // the small streaming-copy probe (kQuickCopyProbeBytes)
  bool gather = true;    // time the gather (both store kinds) and the lookup
  bool scatter = true;   // time every strategy, the row-sparse backward and lazy AdamW
};

/// The streaming-copy probe's buffer size in bytes (each of its two buffers; profile::CopyProbe):
/// 48 MiB with `quick`, else 256 MiB.
size_t copy_probe_bytes(bool quick);

/// One measured line of `wte profile`'s table.
struct KernelMeasurement {
  int threads = 1;
  std::string dist;      // the distribution's label, e.g. "zipf:1.1"
  std::string kernel;    // copy, read, row-read, row-memcpy, gather, lookup, scatter,
                         // scatter-rows, lazy-adamw
  std::string strategy;  // vector-nt, memcpy, auto=stream, sorted, auto=sorted, fused, ...
  std::string cache;     // "warm", or "cold" (caches flushed before every run)
  double seconds = 0;    // median wall time of one run
  double bytes = 0;      // bytes the kernel must move (wte profile --help)
  double copy_gbs = 0;   // the streaming copy's GB/s, same threads and cache state, same run
  double rows_gbs = 0;   // a memcpy of the same random rows, GB/s, same run
  std::string note;      // e.g. "same bits as 1t", "U=512 rows out"
  double gbs() const { return bytes / seconds / 1e9; }
};

/// Runs every measurement of `settings`: allocates and touches a (V, C) table, its gradient and
/// AdamW moments, (N, C) hidden states and the copy probe once, then for each thread count (set
/// with omp_set_num_threads), distribution and cache state ("warm", then "cold") times the limits
/// (streaming copy and memcpy, streaming read, random-row read and memcpy), then the gather and
/// lookup (settings.gather) and the scatters (settings.scatter). A deterministic strategy's warm
/// result is hashed and compared with the first thread count's ("same bits as 1t" or "bits differ
/// from 1t" in the note). `progress` (may be empty) is told what is being measured, e.g.
/// "profile: 2 thread(s), uniform, warm: limits...", and "" once everything is done.
/// Leaves the OpenMP thread count at the last one measured.
/// Throws wte::Error as make_ids does (an unreadable id file, an id outside [0, V)).
std::vector<KernelMeasurement> profile_kernels(
    const KernelProfileSettings& settings,
    const std::function<void(const std::string&)>& progress = {});

}  // namespace wte::profile
