// Hugging Face's GPT-2 (transformers' GPT2LMHeadModel / GPT2Model) against wte's tensors: the name
// map, both ways, in one place (docs/interop.md prints it), and config.json. Private to wte; the
// commands use include/wte/interop.h.
//
// Layout: no tensor needs a transpose. wte stores linear weights (in, out) and computes
// y = x · w + b, as GPT-2's TensorFlow conv1d and Hugging Face's Conv1D do (Conv1D.weight has
// shape (nx, nf) = (in, out): forward is torch.addmm(bias, x, weight)); the embeddings are
// (rows, C) in both; an untied lm_head is nn.Linear(C, V), weight (out, in) = (V, C), which is
// wte's lm_head (V, C) used as h · lm_headᵀ. c_attn's 3C output columns are [q | k | v] in both.
#pragma once

#include <string>
#include <vector>

#include "src/io/safetensors.h"
#include "wte/config.h"
#include "wte/model.h"
#include "wte/tokenizer.h"

namespace wte::hf {

/// One of wte's tensors and its Hugging Face name, without the "transformer." prefix that
/// GPT2LMHeadModel's state dict puts before every name except lm_head.weight.
struct NamePair {
  std::string wte;  // "h0/attn/c_attn/w"
  std::string hf;   // "h.0.attn.c_attn.weight"
};

/// Every tensor of wte's model of `config` with its Hugging Face name, in Model::tensors() order:
///   wte -> wte.weight, wpe -> wpe.weight,
///   h{l}/ln_1/g, ln_1/b -> h.{l}.ln_1.weight, .bias;  h{l}/attn/c_attn/w, b -> h.{l}.attn.c_attn.weight, .bias;
///   h{l}/attn/c_proj/w, b -> h.{l}.attn.c_proj.*;     h{l}/ln_2/g, b -> h.{l}.ln_2.*;
///   h{l}/mlp/c_fc/w, b -> h.{l}.mlp.c_fc.*;           h{l}/mlp/c_proj/w, b -> h.{l}.mlp.c_proj.*,
///   ln_f/g -> ln_f.weight, ln_f/b -> ln_f.bias, lm_head -> lm_head.weight (untied only)
std::vector<NamePair> gpt2_names(const ModelConfig& config);

/// The name a tensor has in GPT2LMHeadModel's state dict (what save_pretrained writes):
/// "transformer." + hf for every tensor but lm_head.weight.
std::string state_dict_name(const NamePair& p);

/// Hugging Face buffers that are not parameters and are ignored on import: h.{l}.attn.bias (the
/// causal mask) and h.{l}.attn.masked_bias (with or without the "transformer." prefix).
bool is_ignored_buffer(const std::string& name);

/// Parses a GPT-2 config.json (transformers' GPT2Config) into wte's model settings. Read:
/// n_embd -> d_model, n_layer, n_head, n_positions (or n_ctx when n_positions is absent; when both
/// are present n_positions, the rows of wpe) -> n_ctx, vocab_size, layer_norm_epsilon -> ln_eps
/// (default 1e-5), tie_word_embeddings (default true); ln_f is always on. Checked, each a
/// wte::Error naming `origin` and the key: the shape keys present, whole numbers within wte's
/// config ranges; n_head divides n_embd; model_type "gpt2" and architectures among
/// GPT2LMHeadModel / GPT2Model when present; activation_function "gelu_new" (GPT-2's tanh GELU,
/// the only one wte has); and the settings that change the math wte does not have:
/// scale_attn_weights must be true, scale_attn_by_inverse_layer_idx and add_cross_attention false,
/// n_inner null or 4 * n_embd.
ModelConfig parse_config_json(const std::string& text, const std::string& origin);

/// config.json for a wte model (GPT2LMHeadModel, gelu_new, no dropout, n_inner null,
/// bos/eos = the id of "<|endoftext|>" when the tokenizer has it). ln_eps is written as the
/// shortest decimal that reads back as the same float32. Throws wte::Error if the model has
/// ln_f off (Hugging Face's GPT-2 always applies ln_f).
std::string config_json(const ModelConfig& config, const Tokenizer& tokenizer);

/// tokenizer.json (Hugging Face's tokenizers format, version "1.0") for a wte vocabulary, as
/// GPT-2's own file has it: model BPE (vocab: GPT-2's bytes_to_unicode spelling -> id, in id
/// order; merges "a b" in rank order; no unk token, no dropout, no subword prefix or suffix),
/// pre_tokenizer ByteLevel (add_prefix_space false, use_regex true: GPT-2's regex), decoder and
/// post_processor ByteLevel, no normalizer, and added_tokens <|endoftext|> (special) when the
/// vocabulary has it. Hugging Face's tokenizers then reads "<|endoftext|>" in a text as that one
/// token, where wte's encode() reads it as text.
std::string tokenizer_json(const Tokenizer& tokenizer);

/// What check_tensors found besides the model's tensors.
struct FileLayout {
  bool prefixed = false;                 // names carry "transformer."
  const safetensors::TensorInfo* lm_head = nullptr;  // lm_head.weight, if in the file
  std::vector<std::string> ignored;      // buffers skipped (is_ignored_buffer)
  std::vector<const safetensors::TensorInfo*> tensors;  // per gpt2_names(config) entry
};

/// Checks a safetensors file against wte's GPT-2 of `config`, before any tensor is read or any
/// model allocated, each a wte::Error naming the file and the tensor: every tensor of
/// gpt2_names present (with or without the "transformer." prefix; the same tensor under both
/// names is an error), with the shape wte needs (both shapes named) and dtype F32, F16 or BF16;
/// lm_head.weight present for an untied model, (V, C) if present; no tensor that is neither a
/// model tensor nor an ignored buffer (a tensor of an architecture wte does not have).
FileLayout check_tensors(const safetensors::View& file, const ModelConfig& config);

/// Copies the tensors check_tensors found into `model` (built from the same config), converting
/// to float32, then checks every value is finite (a wte::Error naming the tensor and the index).
/// A tied model's lm_head.weight, if the file has one, must equal wte.weight bit for bit after
/// conversion (else a wte::Error: the file's head is not tied). Writes straight into the model's
/// arena (no second copy of a 500 MB model): on error the model holds partial values and the
/// caller must discard it (import does: nothing is written).
void load_tensors(const safetensors::View& file, const FileLayout& layout, Model& model);

}  // namespace wte::hf
