// The choice between the dense and the tiled attention: see src/model/attention_tiled.h. The
// kernels are in simd/attention_tiled.cc.
#include "src/model/attention_tiled.h"

namespace wte {

bool use_tiled_attention(const ModelConfig& config, size_t T) {
  switch (config.attention) {
    case AttentionImpl::dense: return false;
    case AttentionImpl::tiled: return true;
    case AttentionImpl::automatic: break;
  }
  return T >= kTiledAttentionMinT;
}

}  // namespace wte
