// JSON nested 100,000 deep (a 200 KB file) in every JSON wte reads: a safetensors header,
// config.json, vocab.json/encoder.json, and the tokenizer stored in a checkpoint. Each reader
// refuses it with an error naming the file and the limit (64 levels), through the library and
// through every command that reaches it (import, tokenize, train, inspect, sample,
// hidden-states, export, train --resume auto); none crashes (nlohmann's dump() recursing once
// per level overflowed the stack when an error message quoted the value).
#include <gtest/gtest.h>

#include <H5Cpp.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "src/io/hdf5_util.h"
#include "wte/data.h"
#include "src/io/hf_gpt2.h"
#include "src/io/safetensors.h"
#include "tests/test_util.h"
#include "wte/error.h"
#include "wte/tokenizer.h"

namespace fs = std::filesystem;
using wte::test::error_of;
using wte::test::run;
using wte::test::slurp;
using wte::test::temp_dir;
using wte::test::write;

namespace {

constexpr size_t kDeep = 100000;
const char* const kLimit = "nested deeper than 64";

// [[[...]]] nested kDeep deep: 200 KB.
std::string deep_array() { return std::string(kDeep, '[') + std::string(kDeep, ']'); }

std::string cli() { return WTE_CLI; }

// A tiny trained run in `dir`/run (checkpoints at steps 2 and 4) and its config.
void train_tiny(const fs::path& dir) {
  std::string out;
  ASSERT_EQ(wte::test::train_tiny_run(cli(), dir, &out), 0) << out;
}

// Replaces the checkpoint's /tokenizer/encoder_json by `text`.
void replace_encoder_json(const fs::path& ckpt, const std::string& text) {
  H5::H5File f(ckpt.string(), H5F_ACC_RDWR);
  H5::Group tok = f.openGroup("tokenizer");
  tok.unlink("encoder_json");
  wte::hdf5::write_string(tok, "encoder_json", text);
  // The checkpoint's hash of the text, kept right: the reader's JSON checks are reached, not its
  // hash check.
  if (tok.attrExists("encoder_json_fnv1a64")) {
    tok.removeAttr("encoder_json_fnv1a64");
    const uint64_t hash = wte::fnv1a64(text.data(), text.size());
    tok.createAttribute("encoder_json_fnv1a64", H5::PredType::STD_U64LE, H5::DataSpace(H5S_SCALAR))
        .write(H5::PredType::NATIVE_UINT64, &hash);
  }
}

// `cmd` exits 1 (not a crash) and says why, naming `file`.
void expect_refused(const std::string& cmd, const std::string& file) {
  std::string out;
  const int code = run(cmd, &out);
  EXPECT_EQ(code, 1) << cmd << "\n" << out.substr(0, 2000);
  EXPECT_NE(out.find(kLimit), std::string::npos) << cmd << "\n" << out.substr(0, 2000);
  EXPECT_NE(out.find(file), std::string::npos) << cmd << "\n" << out.substr(0, 2000);
}

}  // namespace

TEST(DeepJson, SafetensorsHeader) {
  const std::string json = "{\"t\":" + deep_array() + "}";
  std::string bytes(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += json;
  const std::string msg = error_of([&] {
    wte::safetensors::View v(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "deep");
  });
  EXPECT_NE(msg.find(kLimit), std::string::npos) << msg.substr(0, 300);
  EXPECT_EQ(msg.rfind("deep: ", 0), 0u) << msg.substr(0, 300);
  EXPECT_LT(msg.size(), 400u) << "the message quotes the whole value";
}

TEST(DeepJson, ConfigJson) {
  for (const std::string& text : {"{\"model_type\":" + deep_array() + "}",
                                  "{\"architectures\":[" + deep_array() + "]}", deep_array()}) {
    const std::string msg =
        error_of([&] { wte::hf::parse_config_json(text, "config.json 'x/config.json'"); });
    EXPECT_NE(msg.find(kLimit), std::string::npos) << msg.substr(0, 300);
    EXPECT_NE(msg.find("x/config.json"), std::string::npos) << msg.substr(0, 300);
  }
}

TEST(DeepJson, EncoderJson) {
  const std::string msg = error_of([&] {
    wte::Tokenizer::from_strings("{\"a\":" + deep_array() + "}", "#version: 0.2\n", "dirZ");
  });
  EXPECT_NE(msg.find(kLimit), std::string::npos) << msg.substr(0, 300);
  EXPECT_NE(msg.find("dirZ/encoder.json"), std::string::npos) << msg.substr(0, 300);
}

// Shallow values are still quoted in messages as before.
TEST(DeepJson, ShallowValuesAreQuoted) {
  std::string msg = error_of([&] {
    wte::Tokenizer::from_strings("{\"a\": [[1, 2], {\"b\": null}]}", "#version: 0.2\n", "d");
  });
  EXPECT_NE(msg.find("[[1,2],{\"b\":null}]"), std::string::npos) << msg;
  // Nested 64 deep is allowed (then refused for what it is, a list where an id belongs).
  msg = error_of([&] {
    wte::Tokenizer::from_strings("{\"a\":" + std::string(63, '[') + std::string(63, ']') + "}",
                                 "#version: 0.2\n", "d");
  });
  EXPECT_EQ(msg.find(kLimit), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected an integer id"), std::string::npos) << msg;
}

// Through the commands: import (config.json, vocab.json, the safetensors header), tokenize and
// train (a tokenizer directory).
TEST(DeepJson, ImportTokenizeTrain) {
  const fs::path dir = temp_dir("hostile_json_import");
  train_tiny(dir);
  std::string out;
  ASSERT_EQ(run(cli() + " export --checkpoint " + (dir / "run/checkpoint_00000004.h5").string() +
                    " --out " + (dir / "hf").string(),
                &out),
            0)
      << out;
  const std::string config = slurp(dir / "hf/config.json"), vocab = slurp(dir / "hf/vocab.json");
  const std::string import = cli() + " import --from " + (dir / "hf").string() + " --out " +
                             (dir / "imported.h5").string();
  write(dir / "hf/config.json", "{\"model_type\":" + deep_array() + "}");
  expect_refused(import, "hf/config.json");
  write(dir / "hf/config.json", config);
  write(dir / "hf/vocab.json", "{\"a\":" + deep_array() + "}");
  expect_refused(import, "hf/vocab.json");
  write(dir / "hf/vocab.json", vocab);
  const std::string good = slurp(dir / "hf/model.safetensors");
  {
    const std::string json = "{\"t\":" + deep_array() + "}";
    std::string bytes(8, '\0');
    const uint64_t n = json.size();
    std::memcpy(bytes.data(), &n, 8);
    write(dir / "hf/model.safetensors", bytes + json);
  }
  expect_refused(import, "hf/model.safetensors");
  EXPECT_FALSE(fs::exists(dir / "imported.h5"));
  write(dir / "hf/model.safetensors", good);
  ASSERT_EQ(run(import, &out), 0) << out;  // the files restored import again

  fs::create_directories(dir / "tok");
  write(dir / "tok/encoder.json", "{\"a\":" + deep_array() + "}");
  write(dir / "tok/vocab.bpe", "#version: 0.2\n");
  expect_refused(cli() + " tokenize --tokenizer " + (dir / "tok").string() + " hello",
                 "tok/encoder.json");
  expect_refused(cli() + " train --quiet --config " + (dir / "tiny.ini").string() +
                     " --data.tokenizer=" + (dir / "tok").string() + " --out " +
                     (dir / "run2").string(),
                 "tok/encoder.json");
}

// A checkpoint whose stored tokenizer nests too deep: every command that reads it refuses it,
// and train --resume auto skips it (naming why) and resumes from the checkpoint before.
TEST(DeepJson, TokenizerInCheckpoint) {
  const fs::path dir = temp_dir("hostile_json_checkpoint");
  train_tiny(dir);
  const fs::path ckpt = dir / "run/checkpoint_00000004.h5";
  replace_encoder_json(ckpt, "{\"a\":" + deep_array() + "}");
  const std::string c = " --checkpoint " + ckpt.string();
  expect_refused(cli() + " inspect " + ckpt.string(), ckpt.string());
  expect_refused(cli() + " sample" + c + " --prompt the --max-new-tokens 2", ckpt.string());
  expect_refused(cli() + " hidden-states" + c + " --text the", ckpt.string());
  expect_refused(cli() + " export" + c + " --out " + (dir / "hf").string(), ckpt.string());
  std::string out;
  // --overwrite: resuming from step 2 replaces the later (refused) checkpoint of step 4.
  EXPECT_EQ(run(cli() + " train --quiet --resume auto --overwrite --out " + (dir / "run").string(),
                &out),
            0)
      << out.substr(0, 2000);
  EXPECT_NE(out.find("--resume auto: skipping"), std::string::npos) << out.substr(0, 2000);
  EXPECT_NE(out.find(kLimit), std::string::npos) << out.substr(0, 2000);
}
