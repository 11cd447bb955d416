// A wte model as llama.cpp's GPT-2 (architecture "gpt2"): the metadata keys, tensor names, layouts
// and tokenizer keys llama.cpp's GPT-2 loader reads (its src/models/gpt2.cpp and llama-vocab.cpp;
// the names are gguf-py's constants.py). docs/interop.md prints the map. Private to wte; the
// public entry point is export_hf_gpt2 (include/wte/interop.h).
//
// Layout: ggml stores a matrix as ne = {in, out} (ne[0] contiguous), i.e. row-major (out, in),
// and computes y = W x per row of W. wte's linear weights are (in, out) row-major (Conv1D), so
// attn_qkv, attn_output, ffn_up and ffn_down are transposed on the way out; the embeddings
// (rows, C) and an untied lm_head (V, C) are already (out, in) and are written as they are.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "src/io/gguf.h"
#include "wte/config.h"
#include "wte/model.h"
#include "wte/tokenizer.h"

namespace wte::gguf {

/// One tensor of the file and where its values come from.
struct Gpt2Tensor {
  TensorInfo info;            // GGUF name ("blk.0.attn_qkv.weight"), ne, type
  std::string wte_name;       // wte's tensor ("h0/attn/c_attn/w"); empty: every value is `fill`
  float fill = 0;             // (the identity block of a model without blocks)
  size_t rows = 0, cols = 0;  // wte's shape (a 1-D tensor: rows = 1)
  bool transpose = false;     // wte's (in, out) -> ggml's (out, in)
};

/// GPT-2's GGUF names for wte's tensors, in wte's arena order, with the type each gets for the
/// file type `type`: F32 writes every tensor F32; F16 and Q8_0 give that type to the 2-D weights
/// (token_embd, the four linear weights per block, an untied output) and keep position_embd,
/// LayerNorms and biases F32, as llama.cpp's converter does; a weight whose input dimension is
/// not a multiple of 32 falls back from Q8_0 to F16. A tied model has no `output` tensor
/// (llama.cpp then uses token_embd). A model without blocks (n_layer = 0) gets one identity block,
/// since llama.cpp's loader needs at least one: LayerNorm gains 1, every weight and bias 0, so the
/// attention and the MLP add exactly 0 to the residual stream at every type.
std::vector<Gpt2Tensor> gpt2_tensors(const ModelConfig& config, TensorType type);

/// The metadata of a wte model as llama.cpp's GPT-2: general.* (architecture "gpt2", `name`,
/// file_type, alignment, quantization_version for Q8_0), gpt2.* (context_length = n_ctx,
/// embedding_length = d_model, feed_forward_length = 4 d_model, block_count = n_layer (1 for a
/// model without blocks: see gpt2_tensors),
/// attention.head_count = n_head, attention.layer_norm_epsilon = ln_eps, vocab_size) and
/// tokenizer.ggml.* (model "gpt2", pre "gpt-2", tokens in GPT-2's bytes_to_unicode spelling,
/// token_type 1 (normal) for each but <|endoftext|> 3 (control), merges "a b" in rank order,
/// bos/eos/padding ids = <|endoftext|> when the vocabulary has it, add_bos_token and
/// add_eos_token false). Throws wte::Error for a model GPT-2 cannot express (ln_f off) or a
/// tokenizer whose size is not vocab_size.
Metadata gpt2_metadata(const ModelConfig& config, const Tokenizer& tokenizer, TensorType type,
                       const std::string& name);

/// The values of `t` in ggml's order (transposed when t.transpose), from the model's arena,
/// into `dst` (rows * cols floats).
void gpt2_values(const Model& model, const Gpt2Tensor& t, float* dst);

}  // namespace wte::gguf
