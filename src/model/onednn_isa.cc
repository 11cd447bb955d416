#include "src/model/onednn_isa.h"

#include <oneapi/dnnl/dnnl.hpp>

namespace wte {

std::string onednn_isa() {
  using isa = dnnl::cpu_isa;
  const isa current = dnnl::get_effective_cpu_isa();
  switch (current) {
    case isa::sse41: return "sse41";
    case isa::avx: return "avx";
    case isa::avx2: return "avx2";
    case isa::avx2_vnni: return "avx2_vnni";
#if DNNL_VERSION_MAJOR < 3  // Xeon Phi, dropped in oneDNN 3.0
    case isa::avx512_mic: return "avx512_mic";
    case isa::avx512_mic_4ops: return "avx512_mic_4ops";
#endif
    case isa::avx512_core: return "avx512_core";
    case isa::avx512_core_vnni: return "avx512_core_vnni";
    case isa::avx512_core_bf16: return "avx512_core_bf16";
    case isa::avx512_core_amx: return "avx512_core_amx";
    default: return "isa " + std::to_string(static_cast<int>(current));
  }
}

bool onednn_isa_is_avx512() {
  using isa = dnnl::cpu_isa;
  const isa current = dnnl::get_effective_cpu_isa();
  return current == isa::avx512_core || current == isa::avx512_core_vnni ||
         current == isa::avx512_core_bf16 || current == isa::avx512_core_amx;
}

}  // namespace wte
