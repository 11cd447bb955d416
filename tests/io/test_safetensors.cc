// The safetensors reader/writer (src/io/safetensors.h), the GPT-2 name map and config.json
// (src/io/hf_gpt2.h), and import/export (include/wte/interop.h) on hand-made files: every bad
// file gives its own error naming the tensor or offset, and nothing is written. The end-to-end
// comparison with PyTorch is tests/io/test_hf_gpt2_interop.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "src/io/hf_gpt2.h"
#include "src/io/safetensors.h"
#include "tests/test_util.h"
#include "wte/checkpoint.h"
#include "wte/error.h"
#include "wte/interop.h"
#include "wte/model.h"
#include "wte/rng.h"
#include "wte/tokenizer.h"

namespace fs = std::filesystem;
namespace st = wte::safetensors;
using wte::test::error_of;
using wte::test::temp_dir;
using wte::test::write;

namespace {

struct Raw {
  std::string name, dtype;
  std::vector<size_t> shape;
  std::string bytes;
};

std::string shape_json(const std::vector<size_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) o += ",";
    o += std::to_string(s[i]);
  }
  return o + "]";
}

// A file of `tensors` back to back; `header_edit` may rewrite the JSON before it is framed.
std::string file_of(const std::vector<Raw>& tensors, const std::string& extra_json = "") {
  std::string json = "{", data;
  for (const Raw& t : tensors) {
    if (json.size() > 1) json += ",";
    json += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + shape_json(t.shape) +
            ",\"data_offsets\":[" + std::to_string(data.size()) + "," +
            std::to_string(data.size() + t.bytes.size()) + "]}";
    data += t.bytes;
  }
  json += extra_json + "}";
  std::string out(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json + data;
}

// A file of a header's JSON text and a data buffer.
std::string frame(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json + data;
}

std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

std::string parse_error(const std::string& bytes) {
  return error_of([&] {
    st::View v(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "safetensors 'f'");
  });
}

// A GPT-2 of `c` in Hugging Face's layout, random weights, as Raw tensors (F32).
std::vector<Raw> gpt2_tensors(const wte::ModelConfig& c, uint64_t seed, const std::string& prefix = "") {
  wte::Rng rng(seed);
  std::vector<Raw> out;
  wte::Model shapes(c);
  const auto names = wte::hf::gpt2_names(c);
  for (const auto& p : names) {
    const wte::TensorSpec* spec = nullptr;
    for (const auto& t : shapes.tensors())
      if (t.name == p.wte) spec = &t;
    std::vector<float> v(spec->size);
    for (float& x : v) x = static_cast<float>(rng.normal() * 0.05);
    out.push_back({p.hf == "lm_head.weight" ? p.hf : prefix + p.hf, "F32", spec->shape, f32_bytes(v)});
  }
  return out;
}

// The position of the tensor named `name` (Hugging Face's name, without a prefix) in `tensors`.
size_t index_of(const std::vector<Raw>& tensors, const std::string& name) {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == name) return i;
  ADD_FAILURE() << "no tensor '" << name << "'";
  return 0;
}

wte::ModelConfig tiny_config(bool tied = true) {
  return {.vocab_size = 256, .d_model = 8, .n_ctx = 6, .n_layer = 2, .n_head = 2,
          .tie_embeddings = tied};
}

std::string tiny_config_json(const std::string& extra = "") {
  return "{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2LMHeadModel\"], \"vocab_size\": 256,"
         " \"n_embd\": 8, \"n_layer\": 2, \"n_head\": 2, \"n_positions\": 6, \"n_ctx\": 6,"
         " \"layer_norm_epsilon\": 1e-05, \"activation_function\": \"gelu_new\"" + extra + "}";
}

}  // namespace

// ---- the format -------------------------------------------------------------------------------

TEST(Safetensors, HalfAndBfloat16WidenExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 x;
    const uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(&x, &bits, 2);
    const float want = static_cast<float>(x), got = st::half_to_float(bits);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(std::memcmp(&want, &got, 4), 0) << "half bits " << h << ": " << got << " vs " << want;
    }
  }
  EXPECT_EQ(st::half_to_float(0x0001), std::ldexp(1.0f, -24));  // the smallest subnormal
  EXPECT_EQ(st::half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(st::bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(st::bf16_to_float(0xc040), -3.0f);
}

TEST(Safetensors, ParsesDtypesShapesOffsetsAndMetadata) {
  const std::string half = [] {
    std::string s;
    for (uint16_t b : {uint16_t{0x3c00}, uint16_t{0xc000}, uint16_t{0x3800}}) s.append(reinterpret_cast<const char*>(&b), 2);
    return s;
  }();
  const std::string bytes = file_of({{"a", "F32", {2, 2}, f32_bytes({1, 2, 3, 4})},
                                     {"b", "F16", {3}, half},
                                     {"scalar", "BF16", {}, std::string("\x80\x3f", 2)}},
                                    ",\"__metadata__\":{\"format\":\"pt\"}");
  const st::View v(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "f");
  ASSERT_EQ(v.tensors().size(), 3u);
  EXPECT_EQ(v.metadata().at("format"), "pt");
  std::vector<float> out(4);
  v.to_f32(*v.find("a"), out.data());
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4}));
  v.to_f32(*v.find("b"), out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 0.5f);
  v.to_f32(*v.find("scalar"), out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(v.find("scalar")->numel(), 1u);
}

// Each broken file has its own message, naming the tensor or the offset.
TEST(Safetensors, EveryBrokenFileHasItsOwnError) {
  const std::string good = file_of({{"w", "F32", {2, 3}, f32_bytes({1, 2, 3, 4, 5, 6})}});
  EXPECT_NE(parse_error("abc").find("3 bytes, too short"), std::string::npos);
  std::string long_header = good;
  const uint64_t huge = good.size();
  std::memcpy(long_header.data(), &huge, 8);
  EXPECT_NE(parse_error(long_header).find("header length at offset 0 is " + std::to_string(good.size()) +
                                          " bytes, past the end of the file"),
            std::string::npos)
      << parse_error(long_header);
  const std::string truncated = good.substr(0, good.size() - 4);
  EXPECT_NE(parse_error(truncated).find("tensor 'w': data_offsets [0, 24] end at file offset"),
            std::string::npos)
      << parse_error(truncated);
  EXPECT_NE(parse_error(truncated).find("past the end of the file"), std::string::npos);
  std::string json = good;
  json[8] = '[';
  EXPECT_NE(parse_error(json).find("does not start with '{'"), std::string::npos) << parse_error(json);
  std::string bad_json = file_of({{"w", "F32", {1}, f32_bytes({1})}});
  bad_json.replace(bad_json.find("\"shape\":[1]"), 11, "\"shape\":[1}");
  EXPECT_NE(parse_error(bad_json).find("is not valid JSON"), std::string::npos) << parse_error(bad_json);
  const std::string dup = file_of({{"w", "F32", {1}, f32_bytes({1})}, {"w", "F32", {1}, f32_bytes({2})}});
  EXPECT_NE(parse_error(dup).find("names 'w' twice"), std::string::npos) << parse_error(dup);
  const std::string dtype = file_of({{"w", "F128", {1}, std::string(16, '\0')}});
  EXPECT_NE(parse_error(dtype).find("tensor 'w' has dtype \"F128\""), std::string::npos) << parse_error(dtype);
  const std::string size = file_of({{"w", "F32", {2, 2}, f32_bytes({1, 2, 3})}});
  EXPECT_NE(parse_error(size).find("tensor 'w': data_offsets [0, 12] hold 12 bytes, but F32 [2, 2] needs 16"),
            std::string::npos) << parse_error(size);
  const std::string neg =
      frame("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", f32_bytes({1}));
  EXPECT_NE(parse_error(neg).find("-1 is not a whole number"), std::string::npos) << parse_error(neg);
  const std::string overlap =
      frame("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
            f32_bytes({1, 2}));
  EXPECT_NE(parse_error(overlap).find("tensor 'b' at data offset 4 overlaps tensor 'a'"),
            std::string::npos) << parse_error(overlap);
  const std::string trailing = good + "xxxx";
  EXPECT_NE(parse_error(trailing).find("trailing bytes no tensor explains"), std::string::npos)
      << parse_error(trailing);
  const std::string hole =
      frame("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", f32_bytes({1, 2}));
  EXPECT_NE(parse_error(hole).find("data bytes [0, 4) (file offset"), std::string::npos) << parse_error(hole);
  const std::string field =
      frame("{\"w\":{\"dtupe\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", f32_bytes({1}));
  EXPECT_NE(parse_error(field).find("tensor 'w' has an unknown field 'dtupe'"), std::string::npos)
      << parse_error(field);
  const std::string overflow = frame(
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", "");
  EXPECT_NE(parse_error(overflow).find("more elements than 2^64"), std::string::npos)
      << parse_error(overflow);
  const std::string past = frame(
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[1000,1004]}}", f32_bytes({1}));
  EXPECT_NE(parse_error(past).find("tensor 'w': data_offsets [1000, 1004] end at file offset"),
            std::string::npos) << parse_error(past);
}

// Names and keys from a hostile header are escaped and cut in errors: an escape code in a tensor
// name or a __metadata__ key shows as \x1b, a 5000-byte name by its first 80 bytes.
TEST(Safetensors, ErrorsEscapeTheHeadersNames) {
  const std::string esc = "\\u001b]0;owned\\u0007\\u001b[31m";  // JSON escapes of ESC ] ... BEL ESC [
  for (const std::string& bytes :
       {frame("{\"" + esc + "w\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}",
              std::string(16, '\0')),
        frame("{\"__metadata__\":{\"" + esc + "k\":1}}", ""),
        frame("{\"" + esc + std::string(5000, 'n') + "\":{\"dtype\":\"F32\",\"shape\":[2],"
              "\"data_offsets\":[0,4]}}", std::string(4, '\0'))}) {
    const std::string msg = parse_error(bytes);
    EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\x07'), std::string::npos) << msg;
    EXPECT_NE(msg.find("'\\x1b]0;owned\\x07\\x1b[31m"), std::string::npos) << msg;
    EXPECT_LT(msg.size(), 600u) << msg;
  }
}

TEST(Safetensors, WriterHeaderIsAlignedAndReadsBack) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7};
  const std::string header = st::header_bytes({{"x.weight", {2, 3}, a.data()}, {"y", {1}, b.data()}},
                                              {{"format", "pt"}});
  EXPECT_EQ(header.size() % 8, 0u);
  const std::string bytes = header + f32_bytes(a) + f32_bytes(b);
  const st::View v(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "f");
  EXPECT_EQ(v.tensors()[0].name, "x.weight");
  EXPECT_EQ(v.tensors()[0].shape, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(v.tensors()[1].begin, 24u);
  EXPECT_EQ(v.metadata().at("format"), "pt");

  const fs::path dir = temp_dir("safetensors_writer");
  st::write_file((dir / "m.safetensors").string(), {{"x.weight", {2, 3}, a.data()}}, {});
  const st::MappedFile f((dir / "m.safetensors").string());
  std::vector<float> back(6);
  f.view().to_f32(f.view().tensors()[0], back.data());
  EXPECT_EQ(back, a);
  EXPECT_FALSE(fs::exists(dir / "m.safetensors.tmp"));
  const std::string err = error_of([&] {
    st::write_file((dir / "no" / "m.safetensors").string(), {{"x", {1}, b.data()}}, {});
  });
  EXPECT_NE(err.find("cannot create"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir / "no"));
  EXPECT_NE(error_of([&] { st::MappedFile m((dir / "missing").string()); }).find("cannot open"),
            std::string::npos);
}

// ---- the GPT-2 name map and config.json --------------------------------------------------------

TEST(HfGpt2, NameMapBothWays) {
  const auto names = wte::hf::gpt2_names(tiny_config(false));
  wte::Model m(tiny_config(false));
  ASSERT_EQ(names.size(), m.tensors().size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(names[i].wte, m.tensors()[i].name);
  std::map<std::string, std::string> by_wte;
  for (const auto& p : names) by_wte[p.wte] = wte::hf::state_dict_name(p);
  EXPECT_EQ(by_wte["wte"], "transformer.wte.weight");
  EXPECT_EQ(by_wte["ln_f/b"], "transformer.ln_f.bias");
  EXPECT_EQ(by_wte["lm_head"], "lm_head.weight");
  EXPECT_EQ(by_wte["h1/attn/c_attn/w"], "transformer.h.1.attn.c_attn.weight");
  EXPECT_EQ(by_wte["h0/mlp/c_proj/b"], "transformer.h.0.mlp.c_proj.bias");
  EXPECT_EQ(by_wte["h0/ln_2/g"], "transformer.h.0.ln_2.weight");
  EXPECT_TRUE(wte::hf::is_ignored_buffer("h.11.attn.bias"));
  EXPECT_TRUE(wte::hf::is_ignored_buffer("transformer.h.0.attn.masked_bias"));
  EXPECT_FALSE(wte::hf::is_ignored_buffer("h.0.attn.c_attn.bias"));
  EXPECT_FALSE(wte::hf::is_ignored_buffer("h.x.attn.bias"));
}

TEST(HfGpt2, ConfigJsonIsReadAndCheckedKeyByKey) {
  const wte::ModelConfig c = wte::hf::parse_config_json(tiny_config_json(), "config.json 'c'");
  EXPECT_EQ(c.vocab_size, 256u);
  EXPECT_EQ(c.d_model, 8u);
  EXPECT_EQ(c.n_ctx, 6u);
  EXPECT_EQ(c.n_layer, 2u);
  EXPECT_EQ(c.n_head, 2u);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_TRUE(c.ln_f);
  EXPECT_EQ(c.ln_eps, 1e-5f);
  auto err = [](const std::string& json) {
    return error_of([&] { wte::hf::parse_config_json(json, "config.json 'c'"); });
  };
  EXPECT_NE(err("{\"n_embd\": 8}").find("has no \"vocab_size\""), std::string::npos);
  EXPECT_NE(err(tiny_config_json(", \"activation_function\": \"relu\"")).find("activation_function is \"relu\""),
            std::string::npos) << err(tiny_config_json(", \"activation_function\": \"relu\""));
  EXPECT_NE(err("{\"model_type\": \"llama\"}").find("model_type is \"llama\""), std::string::npos);
  EXPECT_NE(err("{\"architectures\": [\"GPT2DoubleHeadsModel\"]}").find("architecture \"GPT2DoubleHeadsModel\" is not one wte has"),
            std::string::npos);
  EXPECT_NE(err(tiny_config_json(", \"scale_attn_by_inverse_layer_idx\": true")).find("scale_attn_by_inverse_layer_idx"),
            std::string::npos);
  EXPECT_NE(err(tiny_config_json(", \"n_inner\": 100")).find("n_inner is 100"), std::string::npos);
  std::string bad_head = tiny_config_json();
  bad_head.replace(bad_head.find("\"n_head\": 2"), 11, "\"n_head\": 3");
  EXPECT_NE(err(bad_head).find("n_head 3 does not divide n_embd 8"), std::string::npos);
  std::string neg = tiny_config_json();
  neg.replace(neg.find("\"n_embd\": 8"), 11, "\"n_embd\": -8");
  EXPECT_NE(err(neg).find("\"n_embd\" is -8"), std::string::npos) << err(neg);
  EXPECT_NE(err("[1]").find("expected a JSON object"), std::string::npos);
  // Written back: the same settings read again.
  const std::string out = wte::hf::config_json(c, wte::Tokenizer());
  const wte::ModelConfig again = wte::hf::parse_config_json(out, "written");
  EXPECT_EQ(again.d_model, c.d_model);
  EXPECT_EQ(again.n_ctx, c.n_ctx);
  EXPECT_EQ(again.ln_eps, c.ln_eps);
  EXPECT_NE(out.find("\"layer_norm_epsilon\": 1e-05"), std::string::npos) << out;
  wte::ModelConfig no_ln_f = c;
  no_ln_f.ln_f = false;
  EXPECT_NE(error_of([&] { wte::hf::config_json(no_ln_f, wte::Tokenizer()); }).find("ln_f = false"),
            std::string::npos);
}

TEST(HfGpt2, TensorChecksNameTheTensor) {
  const wte::ModelConfig c = tiny_config();
  auto err = [&](const std::vector<Raw>& tensors, const wte::ModelConfig& cfg) {
    const std::string bytes = file_of(tensors);
    const st::View v(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "safetensors 'm'");
    return error_of([&] {
      const auto layout = wte::hf::check_tensors(v, cfg);
      wte::Model model(cfg);
      wte::hf::load_tensors(v, layout, model);
    });
  };
  std::vector<Raw> good = gpt2_tensors(c, 1);
  EXPECT_EQ(err(good, c), "");
  EXPECT_EQ(err(gpt2_tensors(c, 1, "transformer."), c), "");
  std::vector<Raw> missing = good;
  missing.erase(missing.begin() + index_of(missing, "h.0.attn.c_proj.bias"));
  EXPECT_NE(err(missing, c).find("tensor 'h.0.attn.c_proj.bias' is missing"), std::string::npos)
      << err(missing, c);
  std::vector<Raw> shaped = good;
  shaped[index_of(shaped, "h.0.attn.c_attn.weight")].shape = {24, 8};  // as nn.Linear (out, in)
  EXPECT_NE(err(shaped, c).find("tensor 'h.0.attn.c_attn.weight' has shape (24, 8), but config.json's "
                                "GPT-2 needs (8, 24)"),
            std::string::npos) << err(shaped, c);
  std::vector<Raw> ints = good;
  ints[index_of(ints, "wpe.weight")].dtype = "I32";
  EXPECT_NE(err(ints, c).find("tensor 'wpe.weight' has dtype I32"), std::string::npos) << err(ints, c);
  std::vector<Raw> extra = good;
  extra.push_back({"h.0.crossattention.q_attn.weight", "F32", {1}, f32_bytes({0})});
  EXPECT_NE(err(extra, c).find("tensor 'h.0.crossattention.q_attn.weight' (1,) is not part of GPT-2"),
            std::string::npos) << err(extra, c);
  std::vector<Raw> both = good;
  both.push_back(good[0]);
  both.back().name = "transformer.wte.weight";
  EXPECT_NE(err(both, c).find("'wte.weight' is in the file twice"), std::string::npos) << err(both, c);
  std::vector<Raw> nan = good;
  float q = NAN;
  std::memcpy(nan[index_of(nan, "ln_f.weight")].bytes.data() + 4 * 3, &q, 4);  // ln_f.weight[3]
  EXPECT_NE(err(nan, c).find("tensor 'ln_f.weight' holds nan at [3]"), std::string::npos) << err(nan, c);
  std::vector<Raw> buffers = good;
  buffers.push_back({"h.0.attn.bias", "F32", {1, 1, 6, 6}, std::string(144, '\0')});
  buffers.push_back({"h.1.attn.masked_bias", "F32", {}, f32_bytes({-1e4f})});
  EXPECT_EQ(err(buffers, c), "");
  // Untied: lm_head.weight is required; tied: a present one must equal wte.
  const wte::ModelConfig untied = tiny_config(false);
  std::vector<Raw> no_head = gpt2_tensors(untied, 2);
  no_head.erase(no_head.begin() + index_of(no_head, "lm_head.weight"));
  EXPECT_NE(err(no_head, untied).find("tensor 'lm_head.weight' is missing"), std::string::npos)
      << err(no_head, untied);
  std::vector<Raw> tied_head = good;
  tied_head.push_back(good[0]);
  tied_head.back().name = "lm_head.weight";
  EXPECT_EQ(err(tied_head, c), "");
  tied_head.back().bytes[5] ^= 1;
  EXPECT_NE(err(tied_head, c).find("tensor 'lm_head.weight' differs from wte.weight at [0, 1]"),
            std::string::npos) << err(tied_head, c);
}

// ---- import and export, as files ----------------------------------------------------------------

namespace {

// A model directory: model.safetensors of `tensors`, config.json, vocab.json + merges.txt (the
// 256 byte tokens, no merges: vocab_size 256).
fs::path model_dir(const std::string& name, const std::vector<Raw>& tensors,
                   const std::string& config = tiny_config_json()) {
  const fs::path dir = temp_dir("safetensors_" + name);
  write(dir / "model.safetensors", file_of(tensors));
  write(dir / "config.json", config);
  const wte::Tokenizer bytes_only;
  write(dir / "vocab.json", bytes_only.encoder_json());
  write(dir / "merges.txt", bytes_only.vocab_bpe());
  return dir;
}

wte::HfImportSource source(const fs::path& dir) {
  return {(dir / "model.safetensors").string(), (dir / "config.json").string(), dir.string()};
}

}  // namespace

TEST(HfGpt2, ImportExportImportIsBitIdentical) {
  const std::vector<Raw> tensors = gpt2_tensors(tiny_config(false), 3, "transformer.");
  std::string cfg = tiny_config_json(", \"tie_word_embeddings\": false");
  const fs::path dir = model_dir("round_trip", tensors, cfg);
  const std::string a = (dir / "a.h5").string(), b = (dir / "b.h5").string();
  const wte::HfImportSummary s = wte::import_hf_gpt2(source(dir), a);
  EXPECT_EQ(s.tensors, tensors.size());
  EXPECT_TRUE(s.prefixed);
  EXPECT_FALSE(s.model.tie_embeddings);
  wte::Model ma(s.model);
  const wte::CheckpointInfo info = wte::load_checkpoint(a, ma, nullptr);
  EXPECT_EQ(info.step, 0);
  EXPECT_FALSE(info.has_optimizer);
  // Every tensor equals the file's bytes.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto names = wte::hf::gpt2_names(s.model);
    EXPECT_EQ(std::memcmp(ma.param(names[i].wte), tensors[i].bytes.data(), tensors[i].bytes.size()), 0)
        << names[i].wte;
  }
  const fs::path out = dir / "exported";
  const wte::ExportSummary e = wte::export_hf_gpt2(a, wte::ExportFormat::kSafetensors, out.string());
  EXPECT_EQ(e.files.size(), 5u);
  for (const char* f : {"model.safetensors", "config.json", "vocab.json", "merges.txt", "tokenizer.json"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  wte::import_hf_gpt2(source(out), b);
  wte::Model mb(s.model);
  const wte::CheckpointInfo info_b = wte::load_checkpoint(b, mb, nullptr);
  EXPECT_EQ(std::memcmp(ma.param_data(), mb.param_data(), 4 * ma.num_parameters()), 0);
  EXPECT_EQ(info.config_ini, info_b.config_ini);
  EXPECT_EQ(info.encoder_json, info_b.encoder_json);
  EXPECT_EQ(info.vocab_bpe, info_b.vocab_bpe);
  // npy: NumPy format 1.0 headers, 64-byte aligned data.
  const fs::path npy = dir / "npy";
  wte::export_hf_gpt2(a, wte::ExportFormat::kNpy, npy.string());
  const std::string w = wte::test::slurp(npy / "transformer.h.1.attn.c_attn.weight.npy");
  EXPECT_EQ(w.substr(0, 6), "\x93NUMPY");
  EXPECT_NE(w.find("'shape': (8, 24)"), std::string::npos);
  const uint16_t hl = static_cast<uint16_t>(uint8_t(w[8]) | (uint8_t(w[9]) << 8));
  EXPECT_EQ((10 + hl) % 64, 0u);
  EXPECT_EQ(w.size(), 10 + hl + 4u * 8 * 24);
}

// A bad input file: its own error, and no output file (nor a temporary one).
TEST(HfGpt2, BadFilesWriteNothing) {
  const std::vector<Raw> good = gpt2_tensors(tiny_config(), 4);
  struct Case {
    std::string name;
    std::vector<Raw> tensors;
    std::string config;
    std::string expect;
  };
  std::vector<Raw> shaped = good;
  shaped[0].shape = {128, 16};
  std::vector<Raw> missing = good;
  missing.erase(missing.begin() + index_of(missing, "h.1.mlp.c_proj.bias"));
  std::vector<Case> cases = {
      {"missing", missing, tiny_config_json(), "tensor 'h.1.mlp.c_proj.bias' is missing"},
      {"shaped", shaped, tiny_config_json(), "tensor 'wte.weight' has shape (128, 16), but"},
      {"arch", good, tiny_config_json(", \"activation_function\": \"gelu\""), "activation_function is \"gelu\""},
      {"vocab", good, [] { std::string j = tiny_config_json(); j.replace(j.find("\"vocab_size\": 256"), 17, "\"vocab_size\": 300"); return j; }(),
       "has 256 tokens but config.json"},
  };
  for (const Case& c : cases) {
    const fs::path dir = model_dir("bad_" + c.name, c.tensors, c.config);
    const std::string out = (dir / "out.h5").string();
    const std::string err = error_of([&] { wte::import_hf_gpt2(source(dir), out); });
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.name << ": " << err;
    EXPECT_FALSE(fs::exists(out)) << c.name;
    EXPECT_FALSE(fs::exists(out + ".tmp")) << c.name;
  }
  const fs::path dir = model_dir("bad_truncated", good);
  const std::string bytes = wte::test::slurp(dir / "model.safetensors");
  write(dir / "model.safetensors", bytes.substr(0, bytes.size() - 1));
  const std::string err = error_of([&] { wte::import_hf_gpt2(source(dir), (dir / "o.h5").string()); });
  // The file's last tensor (wte's arena order: ln_f.bias, the last of a tied model) loses a byte.
  EXPECT_NE(err.find("tensor 'ln_f.bias': data_offsets"), std::string::npos) << err;
  EXPECT_NE(err.find("past the end of the file"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir / "o.h5"));
}
