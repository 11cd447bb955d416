// Wall-clock seconds per named part of a training step, for `wte profile step`. The model's Gemm
// (src/model/matmul.h) owns the clock: the model, its blocks and layers open parts by name
// (Gemm::part), and a PartTimer attached with Model::set_part_timer receives each part's time.
// Names are short identifiers ("ln_fwd", "qkv_gemm_fwd", "attn_qk_fwd", "bf16_convert", ...);
// src/profile/step_profile.cc lists the ones a step opens, in order, with their labels.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace wte {

/// Seconds per part name, summed over every time the part ran (a block part sums over the layers).
class PartTimer {
 public:
  /// Adds `seconds` to part `name`.
  void add(const char* name, double seconds) {
    for (auto& [n, s] : parts_)
      if (n == name) {
        s += seconds;
        return;
      }
    parts_.emplace_back(name, seconds);
  }
  /// Seconds of part `name` (0 if it never ran).
  double seconds(const std::string& name) const {
    for (const auto& [n, s] : parts_)
      if (n == name) return s;
    return 0.0;
  }
  /// Every part that ran, in the order each first ran.
  const std::vector<std::pair<std::string, double>>& parts() const { return parts_; }
  /// Forgets every part (between steps).
  void reset() { parts_.clear(); }

 private:
  std::vector<std::pair<std::string, double>> parts_;
};

}  // namespace wte
