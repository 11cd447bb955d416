// The parameter table: every tensor of a GPT-2 model of a given config, by GPT-2's name, with its
// shape and place in the parameter arena. It is written once, here, and read by everything that
// lists the parameters: wte::Model lays its parameter and gradient arenas out from it
// (Model::tensors()), the memory plan counts it (src/model/memory_plan.h), the Hugging Face import
// checks a file's shapes against it (src/io/hf_gpt2.cc), and the double reference sizes its
// tensors from it (src/reference/model.h).
#pragma once

#include <cstddef>
#include <vector>

#include "wte/config.h"
#include "wte/model.h"  // TensorSpec

namespace wte {

/// The tensors of one transformer block of width C (= d_model), named as in GPT-2 after the
/// block's "h{l}/" prefix, in arena order (offsets from the block's first entry): ln_1/g (C),
/// ln_1/b (C), attn/c_attn/w (C,3C), attn/c_attn/b (3C), attn/c_proj/w (C,C), attn/c_proj/b (C),
/// ln_2/g (C), ln_2/b (C), mlp/c_fc/w (C,4C), mlp/c_fc/b (4C), mlp/c_proj/w (4C,C),
/// mlp/c_proj/b (C). Weights (in, out) as GPT-2's conv1d stores them.
std::vector<TensorSpec> block_parameter_tensors(size_t C);

/// The parameter tensors of a model of `config` in arena order, with their names (also their
/// HDF5 dataset names), shapes, offsets, sizes and weight decay. Order (GPT-2's, as in its
/// checkpoint and Hugging Face's state dict): wte (V,C), wpe (n_ctx,C), for each block l the
/// tensors of block_parameter_tensors under "h{l}/", ln_f/g (C), ln_f/b (C), then lm_head (V,C)
/// if untied (wte then has a row-sparse gradient). Checkpoints are read by name, so files written
/// in another order still load.
std::vector<TensorSpec> parameter_tensors(const ModelConfig& config);

}  // namespace wte
