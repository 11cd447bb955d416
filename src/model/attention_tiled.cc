// The choice between the dense and the tiled attention: see src/model/attention_tiled.h. The
// kernels are in simd/attention_tiled.cc.
#include "src/model/attention_tiled.h"

#include <string>

#include "wte/simd_target.h"

namespace wte {

size_t tiled_attention_min_t() {
  // The T per sequence from which the tiled attention is faster than the dense one, by the vector
  // width of the Highway target in force: attention's parts, forward and backward, in interleaved
  // rounds of bench/attention_speed.sh (parts 2 and 5a), at the default config's attention shape
  // (d_model 256, 4 heads) and GPT-2 small's (768, 12), 1 and 2 threads.
  //  - 512-bit vectors (AVX3, AVX3_DL): 128; dense and tiled tie at T 64, tiled is faster from
  //    T 128 on. AMD Zen 4: bench/results/attention-20261207-1638-amd-epyc-ccf65097bdee.json.
  //  - narrower (AVX2; SSE4 and NEON take the same value, unmeasured): 384; dense is faster at
  //    T 64 to 256 at 2 threads (at 1 thread they tie at 256), tiled from T 384 on. AMD Zen 3:
  //    bench/results/attention-20261207-2258-amd-epyc-dd4aee1d58cc.json (T 64, 128, 256, 1024),
  //    bench/results/attention-20261207-2302-amd-epyc-dd4aee1d58cc.json (T 384, 512, 768).
  const std::string target = simd_target_name();
  if (target.rfind("AVX3", 0) == 0) return 128;
  return 384;
}

bool use_tiled_attention(const ModelConfig& config, size_t T, size_t auto_min_t) {
  switch (config.attention) {
    case AttentionImpl::dense: return false;
    case AttentionImpl::tiled: return true;
    case AttentionImpl::automatic: break;
  }
  return T >= auto_min_t;
}

}  // namespace wte
