// The GGUF writer (src/io/gguf.h), the GPT-2 map (src/io/gguf_gpt2.h) and `export --format gguf`
// (include/wte/interop.h), read back by a small GGUF reader written here from ggml's
// docs/gguf.md. llama.cpp itself loads the files in tests/io/test_gguf_llama_cpp.py.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "src/io/gguf.h"
#include "src/io/gguf_gpt2.h"
#include "src/io/safetensors.h"
#include "tests/test_util.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/error.h"
#include "wte/interop.h"
#include "wte/model.h"
#include "wte/tokenizer.h"

namespace fs = std::filesystem;
namespace gg = wte::gguf;
using wte::test::error_of;

namespace {

// ---- a reader of the format, from docs/gguf.md --------------------------------------------------
struct Cursor {
  const std::string& b;
  size_t pos = 0;
  uint64_t u(int bytes) {
    if (pos + bytes > b.size()) throw std::runtime_error("read past the end");
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(b[pos + i])) << (8 * i);
    pos += bytes;
    return v;
  }
  std::string str() {
    const uint64_t n = u(8);
    if (pos + n > b.size()) throw std::runtime_error("string past the end");
    std::string s = b.substr(pos, n);
    pos += n;
    return s;
  }
};

struct Value {
  uint32_t type = 0;
  uint64_t scalar = 0;                // integers, bool, float bits
  std::string text;
  uint32_t elem_type = 0;
  std::vector<uint64_t> scalars;      // array of numbers
  std::vector<std::string> strings;   // array of strings
};

struct Tensor {
  std::vector<uint64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;
};

struct File {
  uint32_t version = 0;
  std::vector<std::string> keys;  // in file order
  std::map<std::string, Value> kv;
  std::vector<std::string> names;
  std::map<std::string, Tensor> tensors;
  size_t data_start = 0;
};

uint64_t scalar_of(Cursor& c, uint32_t type) {
  switch (type) {
    case 0: case 1: case 7: return c.u(1);
    case 2: case 3: return c.u(2);
    case 4: case 5: case 6: return c.u(4);
    case 10: case 11: case 12: return c.u(8);
  }
  throw std::runtime_error("unexpected value type " + std::to_string(type));
}

File parse(const std::string& bytes) {
  File f;
  Cursor c{bytes};
  if (bytes.substr(0, 4) != "GGUF") throw std::runtime_error("no GGUF magic");
  c.pos = 4;
  f.version = static_cast<uint32_t>(c.u(4));
  const uint64_t n_tensors = c.u(8), n_kv = c.u(8);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = c.str();
    Value v;
    v.type = static_cast<uint32_t>(c.u(4));
    if (v.type == 8) {
      v.text = c.str();
    } else if (v.type == 9) {
      v.elem_type = static_cast<uint32_t>(c.u(4));
      const uint64_t n = c.u(8);
      for (uint64_t k = 0; k < n; ++k) {
        if (v.elem_type == 8)
          v.strings.push_back(c.str());
        else
          v.scalars.push_back(scalar_of(c, v.elem_type));
      }
    } else {
      v.scalar = scalar_of(c, v.type);
    }
    f.keys.push_back(key);
    f.kv[key] = v;
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string name = c.str();
    Tensor t;
    const uint32_t dims = static_cast<uint32_t>(c.u(4));
    for (uint32_t d = 0; d < dims; ++d) t.ne.push_back(c.u(8));
    t.type = static_cast<uint32_t>(c.u(4));
    t.offset = c.u(8);
    f.names.push_back(name);
    f.tensors[name] = t;
  }
  f.data_start = (c.pos + 31) / 32 * 32;
  return f;
}

float f32_at(const std::string& bytes, size_t pos) {
  float v;
  std::memcpy(&v, bytes.data() + pos, 4);
  return v;
}

// A saved checkpoint of a small GPT-2 with random weights and a byte-level vocabulary plus
// "<|endoftext|>" when `eot`.
std::string tiny_checkpoint(const fs::path& dir, bool tied, bool eot, float plant = 0,
                            size_t n_layer = 2) {
  wte::Tokenizer tok;
  if (eot) {
    // The 256 byte tokens, then "<|endoftext|>" as GPT-2's files have it: a token no merge makes.
    std::string enc = tok.encoder_json();
    enc.back() = ',';
    enc += " \"<|endoftext|>\": 256}";
    tok = wte::Tokenizer::from_strings(enc, tok.vocab_bpe(), "test tokenizer");
  }
  wte::Config cfg;
  cfg.model = {.vocab_size = tok.size(), .d_model = 64, .n_ctx = 8, .n_layer = n_layer, .n_head = 2,
               .tie_embeddings = tied};
  cfg.data.seq_len = 8;
  wte::Model m(cfg.model);
  m.init_weights(5);
  if (plant != 0) m.param("h1/mlp/c_fc/w")[37] = plant;
  const std::string path = (dir / "tiny.h5").string();
  wte::save_checkpoint(path, m, nullptr, tok, cfg, 0);
  return path;
}

}  // namespace

TEST(Gguf, HalfRoundsToNearestEvenAndRoundTripsEveryHalf) {
  EXPECT_EQ(gg::float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(gg::float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(gg::float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(gg::float_to_half(65520.0f), 0x7C00);  // halfway to 2^16: rounds up, to infinity
  EXPECT_EQ(gg::float_to_half(1.0f + 0x1p-11f), 0x3C00);       // a tie: to the even mantissa
  EXPECT_EQ(gg::float_to_half(1.0f + 3 * 0x1p-11f), 0x3C02);   // a tie: to the even mantissa
  EXPECT_EQ(gg::float_to_half(0x1p-24f), 0x0001);              // the smallest subnormal
  EXPECT_EQ(gg::float_to_half(0x1p-25f), 0x0000);              // a tie between 0 and it: 0
  EXPECT_EQ(gg::float_to_half(3 * 0x1p-26f), 0x0001);          // 0.75 of it: up
  EXPECT_EQ(gg::float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(gg::float_to_half(INFINITY), 0x7C00);
  EXPECT_EQ(gg::float_to_half(NAN) & 0x7C00, 0x7C00);
  EXPECT_NE(gg::float_to_half(NAN) & 0x03FF, 0);
  // Every half that is not NaN widens (safetensors' exact widening) and comes back the same.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = wte::safetensors::half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(gg::float_to_half(f), h) << std::hex << h;
  }
}

TEST(Gguf, Q8_0BlockMatchesAHandComputedExample) {
  // x_j = (j - 16) / 2: max|x| = 8 (x_0), so d = 8 / 127 and q_j = round(x_j * 127 / 8).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = (j - 16) * 0.5f;
  std::vector<uint8_t> out(34);
  ASSERT_EQ(gg::convert(x.data(), 32, gg::TensorType::kQ8_0, out.data()), 32u);
  // d = 0.0629921... = 1.00787 * 2^-4: exponent 15 - 4 = 11, mantissa round(0.00787 * 1024) = 8.
  EXPECT_EQ(out[0] | (out[1] << 8), 0x2C08);
  auto q = [&](int j) { return static_cast<int8_t>(out[2 + j]); };
  EXPECT_EQ(q(0), -127);   // -8 * 15.875
  EXPECT_EQ(q(1), -119);   // -7.5 * 15.875 = -119.06
  EXPECT_EQ(q(15), -8);    // -0.5 * 15.875 = -7.94
  EXPECT_EQ(q(16), 0);
  EXPECT_EQ(q(17), 8);     // 7.94
  EXPECT_EQ(q(24), 64);    // 4 * 15.875 = 63.5: half away from zero
  EXPECT_EQ(q(31), 119);
  // A block of zeros: scale 0, every q 0.
  std::vector<float> zeros(32, 0.0f);
  ASSERT_EQ(gg::convert(zeros.data(), 32, gg::TensorType::kQ8_0, out.data()), 32u);
  for (uint8_t b : out) EXPECT_EQ(b, 0);
  // A scale float16 cannot hold: the block's first index comes back.
  std::vector<float> big(64, 1.0f);
  big[40] = 1e7f;  // 1e7 / 127 > 65504
  EXPECT_EQ(gg::convert(big.data(), 64, gg::TensorType::kQ8_0, std::vector<uint8_t>(68).data()), 32u);
  EXPECT_EQ(gg::convert(big.data(), 64, gg::TensorType::kF16, std::vector<uint8_t>(128).data()), 40u);
}

TEST(Gguf, HeaderKeyValuesAndAlignment) {
  gg::Metadata m;
  m.add_string("general.architecture", "gpt2");
  m.add_uint32("gpt2.block_count", 7);
  m.add_float32("gpt2.attention.layer_norm_epsilon", 1e-5f);
  m.add_bool("tokenizer.ggml.add_bos_token", true);
  m.add_string_array("tokenizer.ggml.tokens", {"a", "Ġb", ""});
  m.add_int32_array("tokenizer.ggml.token_type", {1, -3});
  EXPECT_NE(error_of([&] { m.add_uint32("gpt2.block_count", 1); }).find("given twice"),
            std::string::npos);
  for (const char* bad : {"", "General.name", "a..b", ".a", "a.", "a b", "a-b"})
    EXPECT_NE(error_of([&] { m.add_uint32(bad, 1); }).find("is not allowed"), std::string::npos)
        << bad;
  const std::vector<gg::TensorInfo> tensors = {
      {"a", {3}, gg::TensorType::kF32},             // 12 bytes -> padded to 32
      {"b", {64, 2}, gg::TensorType::kQ8_0},        // 4 blocks of 34 = 136 -> 160
      {"c", {5, 1}, gg::TensorType::kF16}};         // 10 bytes
  const std::string h = gg::header(m, tensors);
  EXPECT_EQ(h.size() % 32, 0u);
  const File f = parse(h);
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.keys, (std::vector<std::string>{"general.architecture", "gpt2.block_count",
                                              "gpt2.attention.layer_norm_epsilon",
                                              "tokenizer.ggml.add_bos_token",
                                              "tokenizer.ggml.tokens", "tokenizer.ggml.token_type"}));
  EXPECT_EQ(f.kv.at("general.architecture").type, 8u);
  EXPECT_EQ(f.kv.at("general.architecture").text, "gpt2");
  EXPECT_EQ(f.kv.at("gpt2.block_count").type, 4u);
  EXPECT_EQ(f.kv.at("gpt2.block_count").scalar, 7u);
  float eps;
  const uint32_t bits = static_cast<uint32_t>(f.kv.at("gpt2.attention.layer_norm_epsilon").scalar);
  std::memcpy(&eps, &bits, 4);
  EXPECT_EQ(f.kv.at("gpt2.attention.layer_norm_epsilon").type, 6u);
  EXPECT_EQ(eps, 1e-5f);
  EXPECT_EQ(f.kv.at("tokenizer.ggml.add_bos_token").type, 7u);
  EXPECT_EQ(f.kv.at("tokenizer.ggml.add_bos_token").scalar, 1u);
  EXPECT_EQ(f.kv.at("tokenizer.ggml.tokens").type, 9u);
  EXPECT_EQ(f.kv.at("tokenizer.ggml.tokens").elem_type, 8u);
  EXPECT_EQ(f.kv.at("tokenizer.ggml.tokens").strings, (std::vector<std::string>{"a", "Ġb", ""}));
  EXPECT_EQ(f.kv.at("tokenizer.ggml.token_type").elem_type, 5u);
  EXPECT_EQ(f.kv.at("tokenizer.ggml.token_type").scalars,
            (std::vector<uint64_t>{1, 0xFFFFFFFDu}));
  EXPECT_EQ(f.names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(f.tensors.at("a").offset, 0u);
  EXPECT_EQ(f.tensors.at("b").offset, 32u);
  EXPECT_EQ(f.tensors.at("b").type, 8u);
  EXPECT_EQ(f.tensors.at("b").ne, (std::vector<uint64_t>{64, 2}));
  EXPECT_EQ(f.tensors.at("c").offset, 32u + 160u);
  EXPECT_EQ(f.data_start, h.size());
  // Q8_0 along a dimension that is not a multiple of 32; a name past 64 bytes; 5 dimensions.
  EXPECT_NE(error_of([&] { gg::header(m, {{"q", {48, 2}, gg::TensorType::kQ8_0}}); })
                .find("multiple of 32"), std::string::npos);
  EXPECT_NE(error_of([&] { gg::header(m, {{std::string(65, 'n'), {1}, gg::TensorType::kF32}}); })
                .find("1 to 64 bytes"), std::string::npos);
  EXPECT_NE(error_of([&] { gg::header(m, {{"t", {1, 1, 1, 1, 1}, gg::TensorType::kF32}}); })
                .find("1 to 4"), std::string::npos);
}

TEST(Gguf, ExportWritesGpt2NamesLayoutsAndTokenizer) {
  const fs::path dir = wte::test::temp_dir("gguf_export");
  const std::string ckpt = tiny_checkpoint(dir, /*tied=*/false, /*eot=*/true);
  const wte::CheckpointModel ck = wte::load_checkpoint_model(ckpt);
  const wte::Model& m = *ck.model;
  const size_t C = 64, V = 257;
  for (wte::GgufType type : {wte::GgufType::kF32, wte::GgufType::kF16, wte::GgufType::kQ8_0}) {
    const fs::path out = dir / ("out" + std::to_string(static_cast<int>(type)));
    const wte::ExportSummary s = wte::export_hf_gpt2(ckpt, wte::ExportFormat::kGguf, out.string(), type);
    ASSERT_EQ(s.files.size(), 5u);
    for (const char* name : {"model.gguf", "config.json", "vocab.json", "merges.txt", "tokenizer.json"})
      EXPECT_TRUE(fs::exists(out / name)) << name;
    const std::string bytes = wte::test::slurp(out / "model.gguf");
    const File f = parse(bytes);
    EXPECT_EQ(f.version, 3u);
    EXPECT_EQ(f.kv.at("general.architecture").text, "gpt2");
    EXPECT_EQ(f.kv.at("general.alignment").scalar, 32u);
    EXPECT_EQ(f.kv.at("general.file_type").scalar, type == wte::GgufType::kF32 ? 0u
                                                   : type == wte::GgufType::kF16 ? 1u : 7u);
    EXPECT_EQ(f.kv.count("general.quantization_version"), type == wte::GgufType::kQ8_0 ? 1u : 0u);
    EXPECT_EQ(f.kv.at("gpt2.context_length").scalar, 8u);
    EXPECT_EQ(f.kv.at("gpt2.embedding_length").scalar, C);
    EXPECT_EQ(f.kv.at("gpt2.feed_forward_length").scalar, 4 * C);
    EXPECT_EQ(f.kv.at("gpt2.block_count").scalar, 2u);
    EXPECT_EQ(f.kv.at("gpt2.attention.head_count").scalar, 2u);
    EXPECT_EQ(f.kv.at("tokenizer.ggml.model").text, "gpt2");
    EXPECT_EQ(f.kv.at("tokenizer.ggml.pre").text, "gpt-2");
    const Value& tokens = f.kv.at("tokenizer.ggml.tokens");
    ASSERT_EQ(tokens.strings.size(), V);
    EXPECT_EQ(tokens.strings[0], "!");          // GPT-2's byte order: '!' is id 0
    EXPECT_EQ(tokens.strings[256], "<|endoftext|>");
    EXPECT_EQ(f.kv.at("tokenizer.ggml.token_type").scalars[256], 3u);  // control
    EXPECT_EQ(f.kv.at("tokenizer.ggml.token_type").scalars[0], 1u);    // normal
    EXPECT_EQ(f.kv.at("tokenizer.ggml.merges").strings.size(), 0u);
    EXPECT_EQ(f.kv.at("tokenizer.ggml.eos_token_id").scalar, 256u);
    EXPECT_EQ(f.kv.at("tokenizer.ggml.bos_token_id").scalar, 256u);
    // Names in wte's arena order; the untied head is `output`.
    ASSERT_EQ(f.names.size(), 2u + 12 * 2 + 2 + 1);
    EXPECT_EQ(f.names[0], "token_embd.weight");
    EXPECT_EQ(f.names[1], "position_embd.weight");
    EXPECT_EQ(f.names[4], "blk.0.attn_qkv.weight");
    EXPECT_EQ(f.names.back(), "output.weight");
    const Tensor& qkv = f.tensors.at("blk.1.attn_qkv.weight");
    EXPECT_EQ(qkv.ne, (std::vector<uint64_t>{C, 3 * C}));  // ggml (in, out): row-major (out, in)
    EXPECT_EQ(f.tensors.at("blk.1.ffn_down.weight").ne, (std::vector<uint64_t>{4 * C, C}));
    EXPECT_EQ(f.tensors.at("token_embd.weight").ne, (std::vector<uint64_t>{C, V}));
    EXPECT_EQ(f.tensors.at("position_embd.weight").type, 0u);  // F32 in every file type
    EXPECT_EQ(f.tensors.at("blk.0.attn_qkv.bias").type, 0u);
    EXPECT_EQ(f.tensors.at("output_norm.weight").type, 0u);
    const uint32_t want = type == wte::GgufType::kF32 ? 0u : type == wte::GgufType::kF16 ? 1u : 8u;
    EXPECT_EQ(qkv.type, want);
    EXPECT_EQ(f.tensors.at("output.weight").type, want);
    for (const auto& [name, t] : f.tensors) EXPECT_EQ(t.offset % 32, 0u) << name;
    EXPECT_EQ(f.data_start % 32, 0u);
    // Values: wte's c_attn/w (in, out) = (C, 3C) comes out transposed, (3C rows of C).
    const float* w = m.param("h1/attn/c_attn/w");
    const size_t base = f.data_start + qkv.offset;
    if (type == wte::GgufType::kF32) {
      for (size_t o : {size_t{0}, size_t{5}, 3 * C - 1})
        for (size_t i : {size_t{0}, size_t{7}, C - 1})
          EXPECT_EQ(f32_at(bytes, base + 4 * (o * C + i)), w[i * 3 * C + o]) << o << "," << i;
      EXPECT_EQ(std::memcmp(bytes.data() + f.data_start, m.param("wte"), 4 * V * C), 0);
      EXPECT_EQ(bytes.size(), f.data_start + f.tensors.at("output.weight").offset + 4 * V * C);
    } else if (type == wte::GgufType::kQ8_0) {
      // The first block of row o = 2 of the transposed matrix: w[i][2] for i < 32.
      std::vector<float> row(32);
      for (size_t i = 0; i < 32; ++i) row[i] = w[i * 3 * C + 2];
      std::vector<uint8_t> block(34);
      gg::convert(row.data(), 32, gg::TensorType::kQ8_0, block.data());
      const size_t row_bytes = C / 32 * 34;
      EXPECT_EQ(std::memcmp(bytes.data() + base + 2 * row_bytes, block.data(), 34), 0);
    }
  }
}

TEST(Gguf, TiedModelHasNoOutputAndAVocabularyWithoutEndOfTextHasNoIds) {
  const fs::path dir = wte::test::temp_dir("gguf_tied");
  const std::string ckpt = tiny_checkpoint(dir, /*tied=*/true, /*eot=*/false);
  wte::export_hf_gpt2(ckpt, wte::ExportFormat::kGguf, (dir / "out").string());
  const File f = parse(wte::test::slurp(dir / "out" / "model.gguf"));
  EXPECT_EQ(f.tensors.count("output.weight"), 0u);
  EXPECT_EQ(f.names.size(), 2u + 12 * 2 + 2);
  EXPECT_EQ(f.kv.count("tokenizer.ggml.eos_token_id"), 0u);
  EXPECT_EQ(f.kv.count("tokenizer.ggml.bos_token_id"), 0u);
  for (uint64_t t : f.kv.at("tokenizer.ggml.token_type").scalars) EXPECT_EQ(t, 1u);
}

TEST(Gguf, AWeightFloat16CannotHoldIsAnErrorAndWritesNothing) {
  const fs::path dir = wte::test::temp_dir("gguf_overflow");
  const std::string ckpt = tiny_checkpoint(dir, true, false, /*plant=*/1e5f);
  const fs::path out = dir / "out";
  const std::string err = error_of(
      [&] { wte::export_hf_gpt2(ckpt, wte::ExportFormat::kGguf, out.string(), wte::GgufType::kF16); });
  // h1/mlp/c_fc/w[37] is (in 0, out 37): index 37 * C + 0 in ggml's (out, in) order.
  EXPECT_NE(err.find("tensor 'h1/mlp/c_fc/w' (blk.1.ffn_up.weight) holds 100000 at index 2368"),
            std::string::npos) << err;
  EXPECT_NE(err.find("--gguf-type f32"), std::string::npos) << err;
  EXPECT_TRUE(fs::is_empty(out)) << "files left in " << out;
  // F32 holds it.
  wte::export_hf_gpt2(ckpt, wte::ExportFormat::kGguf, out.string(), wte::GgufType::kF32);
  EXPECT_TRUE(fs::exists(out / "model.gguf"));
}

// llama.cpp's loader needs a block: a model without any gets one that adds exactly 0.
TEST(Gguf, AModelWithoutBlocksGetsOneIdentityBlock) {
  const fs::path dir = wte::test::temp_dir("gguf_no_blocks");
  const std::string ckpt = tiny_checkpoint(dir, true, false, 0, /*n_layer=*/0);
  wte::export_hf_gpt2(ckpt, wte::ExportFormat::kGguf, (dir / "out").string());
  const std::string bytes = wte::test::slurp(dir / "out" / "model.gguf");
  const File f = parse(bytes);
  EXPECT_EQ(f.kv.at("gpt2.block_count").scalar, 1u);
  ASSERT_EQ(f.names.size(), 2u + 12 + 2);
  const size_t C = 64;
  for (const std::string& name : f.names) {
    if (name.rfind("blk.0.", 0) != 0) continue;
    const Tensor& t = f.tensors.at(name);
    size_t n = 1;
    for (uint64_t d : t.ne) n *= d;
    const float want = name == "blk.0.attn_norm.weight" || name == "blk.0.ffn_norm.weight" ? 1 : 0;
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(f32_at(bytes, f.data_start + t.offset + 4 * i), want) << name << " " << i;
  }
  EXPECT_EQ(f.tensors.at("blk.0.ffn_up.weight").ne, (std::vector<uint64_t>{C, 4 * C}));
}

// A write that fails part way (the file size limit: EFBIG) leaves the directory as it was: the
// earlier export's files unchanged, no new file, no temporary file.
TEST(Gguf, AFailingWriteLeavesTheDirectoryAsItWas) {
  const fs::path dir = wte::test::temp_dir("gguf_failing_write");
  const std::string ckpt = tiny_checkpoint(dir, false, true);
  const fs::path out = dir / "out";
  wte::export_hf_gpt2(ckpt, wte::ExportFormat::kSafetensors, out.string());
  wte::test::write(out / "config.json", "earlier export\n");
  std::map<std::string, std::string> before;
  for (const auto& e : fs::directory_iterator(out))
    before[e.path().filename().string()] = wte::test::slurp(e.path());
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;  // the header and tokenizer fit; the tensors do not
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string err = error_of(
      [&] { wte::export_hf_gpt2(ckpt, wte::ExportFormat::kGguf, out.string(), wte::GgufType::kF32); });
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_handler);
  EXPECT_NE(err.find("model.gguf' failed"), std::string::npos) << err;
  EXPECT_NE(err.find("nothing was written"), std::string::npos) << err;
  std::map<std::string, std::string> after;
  for (const auto& e : fs::directory_iterator(out))
    after[e.path().filename().string()] = wte::test::slurp(e.path());
  EXPECT_EQ(before, after);
}
