// The instruction set oneDNN runs its primitives with, by name. The one place wte names oneDNN's
// cpu_isa values: their set differs between oneDNN 2.x and 3.x (DNNL_VERSION_MAJOR).
#pragma once

#include <string>

namespace wte {

/// oneDNN's name for the most capable instruction set its primitives use on this CPU (capped by
/// ONEDNN_MAX_CPU_ISA), e.g. "avx512_core_bf16", "avx2"; "isa N" for a value this build does not
/// name.
std::string onednn_isa();

/// Whether oneDNN runs its AVX-512 kernels here (avx512_core or a superset of it).
bool onednn_isa_is_avx512();

}  // namespace wte
