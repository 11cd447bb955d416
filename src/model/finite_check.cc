#include "src/model/finite_check.h"

#include <cmath>
#include <cstdio>

namespace wte {

std::string non_finite_loss_cause(const Model& model) {
  const float* p = model.param_data();
  for (const TensorSpec& t : model.tensors())
    for (size_t i = 0; i < t.size; ++i)
      if (!std::isfinite(p[t.offset + i])) {
        char value[32];
        std::snprintf(value, sizeof value, "%g", static_cast<double>(p[t.offset + i]));
        return "its parameter " + t.name + " holds " + value + " (element " + std::to_string(i) +
               " of " + std::to_string(t.size) + ")";
      }
  return "every parameter is finite, so the forward overflowed float32 on these tokens (weights "
         "too large)";
}

}  // namespace wte
