// Why a model's loss is NaN or infinite, for the errors of the evaluations that refuse such a
// loss (`wte eval`, Python's Model.loss): a damaged or diverged parameter, or a forward that
// overflows float32.
#pragma once

#include <string>

#include "wte/model.h"

namespace wte {

/// "its parameter h0/attn/c_attn/w holds nan (element 12 of 3072)" for the first parameter
/// tensor (in Model::tensors() order) holding a NaN or an infinity, else "every parameter is
/// finite, so the forward overflowed float32 on these tokens (weights too large)".
std::string non_finite_loss_cause(const Model& model);

}  // namespace wte
