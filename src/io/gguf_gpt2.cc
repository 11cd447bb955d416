#include "src/io/gguf_gpt2.h"

#include <algorithm>
#include <cstring>

#include "wte/error.h"

namespace wte::gguf {
namespace {

// ggml's file types (general.file_type; docs/gguf.md): what most tensors are.
uint32_t file_type(TensorType t) {
  switch (t) {
    case TensorType::kF32: return 0;   // ALL_F32
    case TensorType::kF16: return 1;   // MOSTLY_F16
    case TensorType::kQ8_0: return 7;  // MOSTLY_Q8_0
  }
  return 0;
}

// GGML_QNT_VERSION, the quantization format's version (gguf-py: GGML_QUANT_VERSION).
constexpr uint32_t kQuantizationVersion = 2;

std::string block(size_t l, const char* suffix) {
  std::string s = "blk.";
  s += std::to_string(l);
  s += '.';
  s += suffix;
  return s;
}

std::string wte_block(size_t l, const char* suffix) {
  std::string s = "h";
  s += std::to_string(l);
  s += '/';
  s += suffix;
  return s;
}

}  // namespace

std::vector<Gpt2Tensor> gpt2_tensors(const ModelConfig& c, TensorType type) {
  const size_t C = c.d_model, V = c.vocab_size, P = c.n_ctx;
  std::vector<Gpt2Tensor> out;
  // A vector (n,) or a matrix stored (rows, cols) in wte; `weight`: a 2-D weight that takes the
  // file's type (else F32).
  auto add = [&](std::string name, std::string wte_name, size_t rows, size_t cols, bool transpose,
                 bool weight) {
    Gpt2Tensor t;
    t.info.name = std::move(name);
    t.wte_name = std::move(wte_name);
    t.rows = rows;
    t.cols = cols;
    t.transpose = transpose;
    // ggml's ne: {contiguous, rows} of what is written.
    if (rows == 1)
      t.info.ne = {cols};
    else if (transpose)
      t.info.ne = {rows, cols};  // wte (in, out) written as (out, in): ne = {in, out}
    else
      t.info.ne = {cols, rows};
    t.info.type = weight ? type : TensorType::kF32;
    if (t.info.type == TensorType::kQ8_0 && t.info.ne[0] % kQ8Block != 0)
      t.info.type = TensorType::kF16;
    out.push_back(std::move(t));
  };
  add("token_embd.weight", "wte", V, C, false, true);
  add("position_embd.weight", "wpe", P, C, false, false);
  for (size_t l = 0; l < std::max<size_t>(c.n_layer, 1); ++l) {
    add(block(l, "attn_norm.weight"), wte_block(l, "ln_1/g"), 1, C, false, false);
    add(block(l, "attn_norm.bias"), wte_block(l, "ln_1/b"), 1, C, false, false);
    add(block(l, "attn_qkv.weight"), wte_block(l, "attn/c_attn/w"), C, 3 * C, true, true);
    add(block(l, "attn_qkv.bias"), wte_block(l, "attn/c_attn/b"), 1, 3 * C, false, false);
    add(block(l, "attn_output.weight"), wte_block(l, "attn/c_proj/w"), C, C, true, true);
    add(block(l, "attn_output.bias"), wte_block(l, "attn/c_proj/b"), 1, C, false, false);
    add(block(l, "ffn_norm.weight"), wte_block(l, "ln_2/g"), 1, C, false, false);
    add(block(l, "ffn_norm.bias"), wte_block(l, "ln_2/b"), 1, C, false, false);
    add(block(l, "ffn_up.weight"), wte_block(l, "mlp/c_fc/w"), C, 4 * C, true, true);
    add(block(l, "ffn_up.bias"), wte_block(l, "mlp/c_fc/b"), 1, 4 * C, false, false);
    add(block(l, "ffn_down.weight"), wte_block(l, "mlp/c_proj/w"), 4 * C, C, true, true);
    add(block(l, "ffn_down.bias"), wte_block(l, "mlp/c_proj/b"), 1, C, false, false);
  }
  if (c.n_layer == 0) {  // the identity block: no wte tensor behind it
    for (size_t i = 2; i < out.size(); ++i) {
      out[i].wte_name.clear();
      const std::string& n = out[i].info.name;
      out[i].fill = n == "blk.0.attn_norm.weight" || n == "blk.0.ffn_norm.weight" ? 1.0f : 0.0f;
    }
  }
  add("output_norm.weight", "ln_f/g", 1, C, false, false);
  add("output_norm.bias", "ln_f/b", 1, C, false, false);
  if (!c.tie_embeddings) add("output.weight", "lm_head", V, C, false, true);
  return out;
}

Metadata gpt2_metadata(const ModelConfig& c, const Tokenizer& tok, TensorType type,
                       const std::string& name) {
  if (!c.ln_f)
    throw Error("the model has model.ln_f = false; llama.cpp's GPT-2 always applies ln_f "
                "(output_norm), so it cannot be exported as GPT-2");
  if (tok.size() != c.vocab_size)
    throw Error("the tokenizer has " + std::to_string(tok.size()) + " tokens but the model's "
                "vocab_size is " + std::to_string(c.vocab_size));
  Metadata m;
  m.add_string("general.architecture", "gpt2");
  m.add_string("general.name", name);
  m.add_uint32("general.file_type", file_type(type));
  m.add_uint32("general.alignment", kAlignment);
  if (type == TensorType::kQ8_0) m.add_uint32("general.quantization_version", kQuantizationVersion);
  auto u32 = [](size_t v) { return static_cast<uint32_t>(v); };  // config ranges fit 32 bits
  m.add_uint32("gpt2.context_length", u32(c.n_ctx));
  m.add_uint32("gpt2.embedding_length", u32(c.d_model));
  m.add_uint32("gpt2.feed_forward_length", u32(4 * c.d_model));
  m.add_uint32("gpt2.block_count", u32(std::max<size_t>(c.n_layer, 1)));
  m.add_uint32("gpt2.attention.head_count", u32(c.n_head));
  m.add_float32("gpt2.attention.layer_norm_epsilon", c.ln_eps);
  m.add_uint32("gpt2.vocab_size", u32(c.vocab_size));

  const int32_t eot = tok.id_of("<|endoftext|>");
  std::vector<std::string> tokens(tok.size());
  std::vector<int32_t> types(tok.size(), 1);  // llama.cpp's LLAMA_TOKEN_TYPE_NORMAL
  for (size_t i = 0; i < tok.size(); ++i)
    tokens[i] = Tokenizer::to_unicode_form(tok.piece(static_cast<int32_t>(i)));
  if (eot >= 0) types[eot] = 3;  // LLAMA_TOKEN_TYPE_CONTROL: never matched in text unless asked
  std::vector<std::string> merges(tok.num_merges());
  for (size_t r = 0; r < tok.num_merges(); ++r) {
    const auto [a, b] = tok.merge(r);
    merges[r] = tokens[a] + " " + tokens[b];
  }
  m.add_string("tokenizer.ggml.model", "gpt2");
  m.add_string("tokenizer.ggml.pre", "gpt-2");
  m.add_string_array("tokenizer.ggml.tokens", tokens);
  m.add_int32_array("tokenizer.ggml.token_type", types);
  m.add_string_array("tokenizer.ggml.merges", merges);
  if (eot >= 0) {
    m.add_uint32("tokenizer.ggml.bos_token_id", u32(eot));
    m.add_uint32("tokenizer.ggml.eos_token_id", u32(eot));
    m.add_uint32("tokenizer.ggml.padding_token_id", u32(eot));
  }
  m.add_bool("tokenizer.ggml.add_bos_token", false);
  m.add_bool("tokenizer.ggml.add_eos_token", false);
  return m;
}

void gpt2_values(const Model& model, const Gpt2Tensor& t, float* dst) {
  if (t.wte_name.empty()) {
    std::fill(dst, dst + t.rows * t.cols, t.fill);
    return;
  }
  const float* src = model.param(t.wte_name);
  if (src == nullptr) throw Error("internal error: the model has no tensor " + t.wte_name);
  if (!t.transpose) {
    std::memcpy(dst, src, sizeof(float) * t.rows * t.cols);
    return;
  }
  // wte (in = rows, out = cols) row-major -> (out, in) row-major.
  for (size_t i = 0; i < t.rows; ++i)
    for (size_t o = 0; o < t.cols; ++o) dst[o * t.rows + i] = src[i * t.cols + o];
}

}  // namespace wte::gguf
