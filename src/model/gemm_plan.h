// The GEMM planner behind model.gemm = auto, in the manner of FFTW's plans: the first time this
// machine meets a float32 GEMM (its shape, strides, transposes, accumulate, bias and thread count:
// the key), each available library runs it on the GEMM's own operands a few times, interleaved,
// and the fastest is kept; the choice is appended to a cache file, so every later run on the
// machine takes the same library without timing and computes the same bits.
//
// The cache file is one per machine and library set: gemm-plans-<hash>.txt, where the hash is of
// the CPU's model name and the version and kernel set of every library (gemm_library_version,
// oneDNN's ISA included, so ONEDNN_MAX_CPU_ISA or another kernel set gets a file of its own). Its
// folder: $WTE_GEMM_CACHE if set (`off`: no file, plans live only as long as the process), else
// $XDG_CACHE_HOME/wte, else $HOME/.cache/wte. Writers hold an flock on the file and re-read it
// first, so processes that plan the same GEMM at once all take the first choice written. Lines
// that do not parse are ignored; a file that cannot be written leaves the plans in memory, with
// one warning on stderr.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "src/model/gemm_blas.h"

namespace wte {

/// The library for the GEMM `key` (a description that names everything the speed depends on):
/// the cached choice if this process or the cache file has one (and it is among `candidates`),
/// else the fastest of `candidates` by `seconds` (one run of the GEMM on that library; called a
/// few times per candidate, rounds interleaved, the minimum kept). oneDNN keeps the GEMM unless
/// another library is at least 3% faster. Thread-safe; `seconds` runs under the planner's lock.
GemmLibrary plan_gemm(const std::string& key, const std::vector<GemmLibrary>& candidates,
                      const std::function<double(GemmLibrary)>& seconds);

/// The cache file's path, or "" when WTE_GEMM_CACHE is `off` or no folder is known.
std::string gemm_plan_cache_path();

}  // namespace wte
