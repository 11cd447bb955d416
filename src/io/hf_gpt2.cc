#include "src/io/hf_gpt2.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "src/io/json_util.h"
#include "src/tokenizer/quoted_excerpt.h"
#include "src/model/parameters.h"
#include "wte/config.h"
#include "wte/error.h"

namespace wte::hf {
namespace {

// A tensor name from the file in single quotes, escaped and cut (quoted_excerpt).
std::string named(const std::string& name) { return quoted_excerpt(name, 80, '\''); }

constexpr const char* kPrefix = "transformer.";

std::string shape_str(const std::vector<size_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The block tensors: wte's suffix under h{l}/ and Hugging Face's under h.{l}., in arena order.
constexpr const char* kBlock[][2] = {
    {"ln_1/g", "ln_1.weight"},           {"ln_1/b", "ln_1.bias"},
    {"attn/c_attn/w", "attn.c_attn.weight"}, {"attn/c_attn/b", "attn.c_attn.bias"},
    {"attn/c_proj/w", "attn.c_proj.weight"}, {"attn/c_proj/b", "attn.c_proj.bias"},
    {"ln_2/g", "ln_2.weight"},           {"ln_2/b", "ln_2.bias"},
    {"mlp/c_fc/w", "mlp.c_fc.weight"},   {"mlp/c_fc/b", "mlp.c_fc.bias"},
    {"mlp/c_proj/w", "mlp.c_proj.weight"}, {"mlp/c_proj/b", "mlp.c_proj.bias"},
};

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// HEAD, the block index and SEP: "h3/" (wte's block names: "h", '/') or "h.3." (Hugging Face's:
// "h.", '.'). Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on
// "h" + std::to_string(l), which inserts into the temporary.
std::string block_prefix(const char* head, size_t l, char sep) {
  std::string s = head;
  s += std::to_string(l);
  s += sep;
  return s;
}

}  // namespace

std::vector<NamePair> gpt2_names(const ModelConfig& c) {
  std::vector<NamePair> out = {{"wte", "wte.weight"}, {"wpe", "wpe.weight"}};
  for (size_t l = 0; l < c.n_layer; ++l)
    for (const auto& b : kBlock)
      out.push_back({block_prefix("h", l, '/') + b[0], block_prefix("h.", l, '.') + b[1]});
  out.push_back({"ln_f/g", "ln_f.weight"});
  out.push_back({"ln_f/b", "ln_f.bias"});
  if (!c.tie_embeddings) out.push_back({"lm_head", "lm_head.weight"});
  return out;
}

std::string state_dict_name(const NamePair& p) {
  return p.hf == "lm_head.weight" ? p.hf : kPrefix + p.hf;
}

bool is_ignored_buffer(const std::string& name) {
  std::string n = starts_with(name, kPrefix) ? name.substr(std::strlen(kPrefix)) : name;
  if (!starts_with(n, "h.")) return false;
  size_t i = 2;
  while (i < n.size() && n[i] >= '0' && n[i] <= '9') ++i;
  if (i == 2) return false;
  const std::string rest = n.substr(i);
  return rest == ".attn.bias" || rest == ".attn.masked_bias";
}

ModelConfig parse_config_json(const std::string& text, const std::string& origin) {
  const nlohmann::json j = json::parse(text, origin);
  if (!j.is_object()) throw Error(origin + ": expected a JSON object (a GPT2Config)");
  auto value_str = [](const nlohmann::json& v) { return json::brief(v, 60); };
  if (j.contains("model_type") && j["model_type"] != "gpt2")
    throw Error(origin + ": model_type is " + value_str(j["model_type"]) +
                "; wte imports GPT-2 (model_type \"gpt2\") only");
  if (j.contains("architectures")) {
    const nlohmann::json& a = j["architectures"];
    if (!a.is_array()) throw Error(origin + ": architectures is " + value_str(a) + ", expected a list");
    for (const nlohmann::json& name : a)
      if (name != "GPT2LMHeadModel" && name != "GPT2Model")
        throw Error(origin + ": architecture " + value_str(name) +
                    " is not one wte has; wte imports GPT2LMHeadModel and GPT2Model");
  }
  auto whole = [&](const char* key, uint64_t lo, uint64_t hi, bool required,
                   uint64_t fallback) -> uint64_t {
    if (!j.contains(key) || j[key].is_null()) {
      if (required) throw Error(origin + ": has no \"" + key + "\" (GPT2Config's " + key + ")");
      return fallback;
    }
    const nlohmann::json& v = j[key];
    uint64_t x = 0;
    if (v.is_number_unsigned()) {
      x = v.get<uint64_t>();
    } else if (v.is_number_integer() && v.get<int64_t>() >= 0) {
      x = static_cast<uint64_t>(v.get<int64_t>());
    } else {
      throw Error(origin + ": \"" + key + "\" is " + value_str(v) + ", expected a whole number in [" +
                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    if (x < lo || x > hi)
      throw Error(origin + ": \"" + key + "\" is " + std::to_string(x) + "; wte allows [" +
                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  };
  auto flag = [&](const char* key, bool fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_boolean())
      throw Error(origin + ": \"" + key + "\" is " + value_str(j[key]) + ", expected true or false");
    return j[key].get<bool>();
  };
  ModelConfig m;
  // Ranges: src/io/config.cc's keys (model.vocab_size >= 256: the byte tokens).
  m.vocab_size = whole("vocab_size", 256, 1u << 24, true, 0);
  m.d_model = whole("n_embd", 1, 1u << 16, true, 0);
  m.n_layer = whole("n_layer", 0, 1024, true, 0);
  m.n_head = whole("n_head", 1, 1u << 16, true, 0);
  const bool has_positions = j.contains("n_positions") && !j["n_positions"].is_null();
  m.n_ctx = whole(has_positions ? "n_positions" : "n_ctx", 1, 1u << 20, true, 0);
  if (m.n_layer > 0 && m.d_model % m.n_head != 0)
    throw Error(origin + ": n_head " + std::to_string(m.n_head) + " does not divide n_embd " +
                std::to_string(m.d_model));
  m.ln_f = true;
  m.tie_embeddings = flag("tie_word_embeddings", true);
  m.ln_eps = 1e-5f;
  if (j.contains("layer_norm_epsilon") && !j["layer_norm_epsilon"].is_null()) {
    // The config parser's own check of model.ln_eps (the range, and a float32 that is neither 0
    // nor subnormal): what import stores, every other command reads back.
    const nlohmann::json& v = j["layer_norm_epsilon"];
    if (!v.is_number())
      throw Error(origin + ": \"layer_norm_epsilon\" is " + value_str(v) +
                  ", expected a number (model.ln_eps)");
    char text[32];
    const auto res = std::to_chars(text, text + sizeof text, v.get<double>());
    Config cfg;
    const std::string why = set_config_key(cfg, "model.ln_eps", std::string(text, res.ptr));
    if (!why.empty())
      throw Error(origin + ": \"layer_norm_epsilon\" is " + value_str(v) + " (wte's model.ln_eps): " +
                  why);
    m.ln_eps = cfg.model.ln_eps;
  }
  const std::string act = j.contains("activation_function") ? value_str(j["activation_function"])
                                                            : "\"gelu_new\"";
  if (act != "\"gelu_new\"")
    throw Error(origin + ": activation_function is " + act +
                "; wte has GPT-2's tanh GELU only (\"gelu_new\")");
  if (!flag("scale_attn_weights", true))
    throw Error(origin + ": scale_attn_weights is false; wte's attention always divides by "
                "sqrt(head size)");
  if (flag("scale_attn_by_inverse_layer_idx", false))
    throw Error(origin + ": scale_attn_by_inverse_layer_idx is true; wte's attention has no "
                "per-layer scale");
  if (flag("add_cross_attention", false))
    throw Error(origin + ": add_cross_attention is true; wte has no cross-attention");
  if (j.contains("n_inner") && !j["n_inner"].is_null()) {
    const uint64_t inner = whole("n_inner", 1, uint64_t{1} << 32, false, 0);
    if (inner != 4 * m.d_model)
      throw Error(origin + ": n_inner is " + std::to_string(inner) + "; wte's MLP is 4 * n_embd = " +
                  std::to_string(4 * m.d_model) + " wide");
  }
  return m;
}

std::string config_json(const ModelConfig& c, const Tokenizer& tokenizer) {
  if (!c.ln_f)
    throw Error("the model has model.ln_f = false; Hugging Face's GPT-2 always applies ln_f, so "
                "it cannot be exported as GPT-2");
  char eps[32];
  const auto res = std::to_chars(eps, eps + sizeof eps, c.ln_eps);  // shortest round trip
  nlohmann::ordered_json j;
  j["architectures"] = {"GPT2LMHeadModel"};
  j["model_type"] = "gpt2";
  j["activation_function"] = "gelu_new";
  j["vocab_size"] = c.vocab_size;
  j["n_positions"] = c.n_ctx;
  j["n_ctx"] = c.n_ctx;
  j["n_embd"] = c.d_model;
  j["n_layer"] = c.n_layer;
  j["n_head"] = c.n_head;
  j["n_inner"] = nullptr;
  j["layer_norm_epsilon"] = std::stod(std::string(eps, res.ptr));
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["scale_attn_weights"] = true;
  j["scale_attn_by_inverse_layer_idx"] = false;
  j["reorder_and_upcast_attn"] = false;
  // wte trains without dropout; Hugging Face's defaults (0.1) would change the training math.
  j["attn_pdrop"] = 0.0;
  j["embd_pdrop"] = 0.0;
  j["resid_pdrop"] = 0.0;
  j["initializer_range"] = 0.02;
  const int32_t eot = tokenizer.id_of("<|endoftext|>");
  if (eot >= 0) {
    j["bos_token_id"] = eot;
    j["eos_token_id"] = eot;
  } else {
    j["bos_token_id"] = nullptr;
    j["eos_token_id"] = nullptr;
  }
  j["torch_dtype"] = "float32";
  j["use_cache"] = true;
  return j.dump(2) + "\n";
}

std::string tokenizer_json(const Tokenizer& tok) {
  // Field names and values: the tokenizers library's serialization of a ByteLevel BPE, as in
  // openai-community/gpt2's tokenizer.json.
  nlohmann::ordered_json bpe;
  bpe["type"] = "BPE";
  bpe["dropout"] = nullptr;
  bpe["unk_token"] = nullptr;
  bpe["continuing_subword_prefix"] = "";
  bpe["end_of_word_suffix"] = "";
  bpe["fuse_unk"] = false;
  bpe["byte_fallback"] = false;
  std::vector<std::string> spelled(tok.size());
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (size_t i = 0; i < tok.size(); ++i) {
    spelled[i] = Tokenizer::to_unicode_form(tok.piece(static_cast<int32_t>(i)));
    vocab[spelled[i]] = i;
  }
  bpe["vocab"] = std::move(vocab);
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  for (size_t r = 0; r < tok.num_merges(); ++r) {
    const auto [a, b] = tok.merge(r);
    merges.push_back(spelled[a] + " " + spelled[b]);
  }
  bpe["merges"] = std::move(merges);
  auto byte_level = [](bool add_prefix_space, bool trim_offsets) {
    nlohmann::ordered_json b;
    b["type"] = "ByteLevel";
    b["add_prefix_space"] = add_prefix_space;
    b["trim_offsets"] = trim_offsets;
    b["use_regex"] = true;
    return b;
  };
  nlohmann::ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = nlohmann::ordered_json::array();
  const int32_t eot = tok.id_of("<|endoftext|>");
  if (eot >= 0) {
    nlohmann::ordered_json a;
    a["id"] = eot;
    a["content"] = "<|endoftext|>";
    a["single_word"] = false;
    a["lstrip"] = false;
    a["rstrip"] = false;
    a["normalized"] = true;
    a["special"] = true;
    j["added_tokens"].push_back(std::move(a));
  }
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = byte_level(false, true);
  j["post_processor"] = byte_level(true, false);
  j["decoder"] = byte_level(true, true);
  j["model"] = std::move(bpe);
  return j.dump(2) + "\n";
}

FileLayout check_tensors(const safetensors::View& file, const ModelConfig& c) {
  const std::string& o = file.origin();
  FileLayout layout;
  const std::vector<NamePair> names = gpt2_names(c);
  // Hugging Face name (prefix removed) -> the file's tensor.
  std::map<std::string, const safetensors::TensorInfo*> by_name;
  bool with_prefix = false, without_prefix = false;
  for (const safetensors::TensorInfo& t : file.tensors()) {
    if (is_ignored_buffer(t.name)) {
      layout.ignored.push_back(t.name);
      continue;
    }
    std::string n = t.name;
    if (n == "lm_head.weight") {
      layout.lm_head = &t;
      continue;
    }
    if (starts_with(n, kPrefix)) {
      n = n.substr(std::strlen(kPrefix));
      with_prefix = true;
    } else {
      without_prefix = true;
    }
    if (!by_name.emplace(n, &t).second)
      throw Error(o + ": tensor " + named(n) + " is in the file twice (as " + named(n) + " and " +
                  named(kPrefix + n) + ")");
  }
  layout.prefixed = with_prefix && !without_prefix;
  auto check_float = [&](const safetensors::TensorInfo& t) {
    if (t.dtype != safetensors::Dtype::F32 && t.dtype != safetensors::Dtype::F16 &&
        t.dtype != safetensors::Dtype::BF16)
      throw Error(o + ": tensor " + named(t.name) + " has dtype " + safetensors::dtype_name(t.dtype) +
                  "; wte imports F32, F16 and BF16 weights");
  };
  // Every tensor's shape, from the model's table (src/model/parameters.h), lm_head included.
  std::map<std::string, std::vector<size_t>> want;
  {
    ModelConfig untied = c;
    untied.tie_embeddings = false;
    for (const TensorSpec& t : parameter_tensors(untied)) want[t.name] = t.shape;
  }
  for (const NamePair& p : names) {
    const safetensors::TensorInfo* t = nullptr;
    if (p.hf == "lm_head.weight") {
      t = layout.lm_head;
    } else if (const auto it = by_name.find(p.hf); it != by_name.end()) {
      t = it->second;
      by_name.erase(it);
    }
    if (t == nullptr)
      throw Error(o + ": tensor '" + p.hf + "' is missing (wte's " + p.wte +
                  (p.hf == "lm_head.weight" ? "; config.json has tie_word_embeddings false"
                                            : "; n_layer " + std::to_string(c.n_layer)) +
                  ")");
    check_float(*t);
    if (t->shape != want.at(p.wte))
      throw Error(o + ": tensor " + named(t->name) + " has shape " + shape_str(t->shape) +
                  ", but config.json's GPT-2 needs " + shape_str(want.at(p.wte)) + " for wte's " +
                  p.wte + (p.wte.find("/w") != std::string::npos
                               ? " (Conv1D weights are stored (in, out))"
                               : ""));
    layout.tensors.push_back(t);
  }
  if (c.tie_embeddings && layout.lm_head != nullptr) {
    check_float(*layout.lm_head);
    if (layout.lm_head->shape != want.at("lm_head"))
      throw Error(o + ": tensor 'lm_head.weight' has shape " + shape_str(layout.lm_head->shape) +
                  ", but the tied lm_head is wte, " + shape_str(want.at("lm_head")));
  }
  if (!by_name.empty()) {
    const safetensors::TensorInfo* t = by_name.begin()->second;
    throw Error(o + ": tensor " + named(t->name) + " " + shape_str(t->shape) +
                " is not part of GPT-2 as wte has it (n_layer " + std::to_string(c.n_layer) +
                "; " + std::to_string(by_name.size()) +
                " such tensor(s)): an architecture wte does not have, or another config.json");
  }
  return layout;
}

void load_tensors(const safetensors::View& file, const FileLayout& layout, Model& model) {
  const std::string& o = file.origin();
  const std::vector<NamePair> names = gpt2_names(model.config());
  if (names.size() != layout.tensors.size())
    throw Error(o + ": internal error: the layout was checked against another model");
  for (size_t i = 0; i < names.size(); ++i) {
    const safetensors::TensorInfo& t = *layout.tensors[i];
    float* dst = model.param(names[i].wte);
    if (dst == nullptr) throw Error(o + ": internal error: the model has no tensor " + names[i].wte);
    file.to_f32(t, dst);
    const size_t n = t.numel();
    for (size_t k = 0; k < n; ++k)
      if (!std::isfinite(dst[k])) {
        const size_t cols = t.shape.size() == 2 ? t.shape[1] : n;
        throw Error(o + ": tensor " + named(t.name) + " holds " + std::to_string(dst[k]) + " at [" +
                    (t.shape.size() == 2 ? std::to_string(k / cols) + ", " + std::to_string(k % cols)
                                         : std::to_string(k)) +
                    "] (" + safetensors::dtype_name(t.dtype) +
                    "); every weight must be finite");
      }
  }
  if (model.config().tie_embeddings && layout.lm_head != nullptr) {
    const safetensors::TensorInfo& t = *layout.lm_head;
    std::vector<float> head(t.numel());
    file.to_f32(t, head.data());
    const float* wte = model.params().wte;
    for (size_t k = 0; k < head.size(); ++k)
      if (std::memcmp(&head[k], &wte[k], sizeof(float)) != 0) {
        const size_t C = model.config().d_model;
        throw Error(o + ": tensor 'lm_head.weight' differs from wte.weight at [" +
                    std::to_string(k / C) + ", " + std::to_string(k % C) + "] (" +
                    std::to_string(head[k]) + " vs " + std::to_string(wte[k]) +
                    "), but config.json ties them (tie_word_embeddings true); set it to false "
                    "to import an untied lm_head");
      }
  }
}

}  // namespace wte::hf
