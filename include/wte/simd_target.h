// The Highway target wte's kernels run on, and the cap on it (WTE_MAX_SIMD).
//
// Highway picks the best target this CPU supports (AVX3, AVX2, SSE4, ... on x86-64; SVE, NEON on
// arm64) at the first dynamic dispatch. The environment variable WTE_MAX_SIMD caps it, as
// ONEDNN_MAX_CPU_ISA caps oneDNN's ISA and OPENBLAS_CORETYPE OpenBLAS's kernels: it names a Highway
// target (any case: AVX3_DL, AVX3, AVX2, SSE4, SSSE3, EMU128, SCALAR on x86-64; SVE2, SVE, NEON, ...
// on arm64) and dispatch then picks no better target than it; a cap above what the CPU has changes
// nothing, and an empty value is no cap. With both caps at AVX2 a CPU with AVX-512 runs the same
// 256-bit code, and gives the same bits, as an AVX2-only one.
//
// The kernels library applies WTE_MAX_SIMD when it is loaded, before main (or before a Python
// module's init function), in every program that links it (simd/simd_target.cc). A value that
// names no target ends the process with exit status 2 and a message naming the variable, the value
// and the allowed names, before any work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wte {

/// The name of the Highway target the kernels run now ("AVX2", "SSE4", "NEON", ...): the best this
/// CPU supports, or no better than the cap.
std::string simd_target_name();

/// Sets the cap for this process as WTE_MAX_SIMD does at start-up; nullptr or "" removes it. It
/// takes effect at the next dispatch. Throws std::invalid_argument (naming WTE_MAX_SIMD, the value
/// and the allowed names) if `name` is none of simd_target_names(), leaving the cap unchanged.
void apply_simd_target_cap(const char* name);

/// The cap in force, upper-case ("SSE4"), or "" when there is none.
std::string simd_target_cap();

/// Every Highway target name of this CPU architecture, best first (the values WTE_MAX_SIMD takes).
std::vector<std::string> simd_target_names();

}  // namespace wte
