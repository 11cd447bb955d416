// Checkpoint format version 3 and what reads checkpoints (docs/checkpoint.md): files are written
// in HDF5's checksummed format with Fletcher-32 datasets and fixed-length strings; version-2 files
// (HDF5's earliest format, tests/io/fixtures/checkpoint_v2_step2.h5, written by the version-2 writer)
// still load and resume; a damaged file that crashes or hangs HDF5 is an error, never a crash or a
// hang of wte; `--resume auto` resumes from the valid checkpoint of the highest stored step, says
// which broken ones it skipped and how to set them aside. Runs the built `wte` (WTE_CLI) as a user
// does, each command under `timeout` so a hang fails the test instead of stalling it.
#include <H5Cpp.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "wte/tokenizer.h"
#include "src/io/hdf5_util.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using wte::test::run;
using wte::test::slurp;
using wte::test::temp_dir;
using wte::test::tiny_corpus;
using wte::test::write;

namespace {

const std::string kCli = WTE_CLI;
// Written by the version-2 writer (wte at 9b0f170): `wte train` of the config below on
// tiny_corpus(), --train.threads=1 --stop-at 2; HDF5's earliest file format, variable-length strings.
const fs::path kV2 = fs::path(WTE_SOURCE_DIR) / "tests" / "io" / "fixtures" / "checkpoint_v2_step2.h5";

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

// The fixture's config (its data.text was another path: resumes pass --data.text).
std::string tiny_config(const fs::path& corpus) {
  return "[model]\nvocab_size = 264\nd_model = 8\nn_ctx = 8\n[data]\ntext = " + corpus.string() +
         "\nseq_len = 8\nval_fraction = 0.1\n[train]\nbatch_size = 2\nsteps = 4\neval_interval = 0\n"
         "log_interval = 1\n[optim]\nlr = 0.01\nwarmup_steps = 1\n[checkpoint]\ninterval = 1\n";
}

// The version-2 fixture with byte `offset` XORed with 0xff: at these offsets HDF5 1.10.8 crashes
// (SIGSEGV in H5HG_read, the global heap behind variable-length strings) or loops forever.
std::string damaged_v2(size_t offset) {
  std::string bytes = slurp(kV2);
  bytes.at(offset) = static_cast<char>(bytes[offset] ^ 0xff);
  return bytes;
}
constexpr size_t kCrashOffset = 893, kHangOffset = 838;

// Parameters, moments and data order of a checkpoint, loaded through wte.
struct Loaded {
  std::vector<float> params, m, v;
  wte::CheckpointInfo info;
};
Loaded load(const std::string& path) {
  const wte::CheckpointInfo info = wte::read_checkpoint_info(path);
  const wte::Config cfg = wte::parse_config(info.config_ini, path);
  wte::Model model(cfg.model);
  wte::AdamW opt(model);
  Loaded out;
  out.info = wte::load_checkpoint(path, model, &opt);
  out.params.assign(model.param_data(), model.param_data() + model.num_parameters());
  out.m.assign(opt.m(), opt.m() + opt.size());
  out.v.assign(opt.v(), opt.v() + opt.size());
  return out;
}

class CheckpointFormat : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir(std::string("ckptfmt_") +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    corpus_ = dir_ / "corpus.txt";
    write(corpus_, tiny_corpus());
    write(dir_ / "tiny.ini", tiny_config(corpus_));
  }
  // wte train with the tiny config into dir_/out, at most 120 s.
  int train(const std::string& out, const std::string& extra, std::string* output) {
    return run("timeout 120 " + kCli + " train --config " + q(dir_ / "tiny.ini") + " --out " +
                   q(dir_ / out) + " --train.threads=1 " + extra,
               output);
  }
  std::string ckpt(const std::string& out, uint64_t step) {
    return wte::checkpoint_path((dir_ / out).string(), step);
  }
  fs::path dir_, corpus_;
};

}  // namespace

TEST_F(CheckpointFormat, WrittenWithChecksummedMetadataFletcher32AndFixedLengthStrings) {
  std::string out;
  ASSERT_EQ(train("run", "--stop-at 1", &out), 0) << out;
  const std::string path = ckpt("run", 1);
  EXPECT_TRUE(wte::hdf5::checksummed_format(path));
  EXPECT_EQ(wte::read_checkpoint_info(path).format_version, 3);
  H5::Exception::dontPrint();
  H5::H5File file(path, H5F_ACC_RDONLY);
  H5F_info2_t finfo;
  ASSERT_GE(H5Fget_info2(file.getId(), &finfo), 0);
  EXPECT_GE(finfo.super.version, 2u);  // superblock with a checksum (1.10's format: 3)
  for (const char* name : {"wte", "wpe", "ln_f/g", "optimizer/m/wte", "optimizer/v/wpe",
                           "data/order", "data/rng_state"}) {
    SCOPED_TRACE(name);
    H5::DataSet ds = file.openDataSet(name);
    const H5::DSetCreatPropList dcpl = ds.getCreatePlist();
    EXPECT_EQ(dcpl.getLayout(), H5D_CHUNKED);
    EXPECT_TRUE(dcpl.allFiltersAvail());
    ASSERT_EQ(dcpl.getNfilters(), 1);
    unsigned flags = 0, config = 0;
    size_t n = 0;
    char fname[64];
    EXPECT_EQ(dcpl.getFilter(0, flags, n, nullptr, sizeof fname, fname, config), H5Z_FILTER_FLETCHER32);
  }
  for (const char* name : {"config/ini", "tokenizer/encoder_json", "tokenizer/vocab_bpe"}) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(file.openDataSet(name).getStrType().isVariableStr());
  }
  EXPECT_FALSE(file.openGroup("/").openAttribute("format").getStrType().isVariableStr());
  file.close();
  // A flipped byte in a tensor's data is a checksum error, not a wrong number: a byte of wte's
  // sixth value, found in the file by its bytes.
  std::string bytes = slurp(path);
  const std::string damaged = (dir_ / "damaged.h5").string();
  const Loaded good = load(path);
  float probe = good.params[good.info.tensors[0].offset + 5];
  const std::string needle(reinterpret_cast<const char*>(&probe), 4);
  const size_t at = bytes.find(needle);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1] = static_cast<char>(bytes[at + 1] ^ 0x10);
  write(damaged, bytes);
  std::string msg;
  EXPECT_EQ(run("timeout 60 " + kCli + " inspect " + q(damaged), &msg), 1) << msg;
  EXPECT_NE(msg.find("cannot be read"), std::string::npos) << msg;
}

TEST_F(CheckpointFormat, VersionTwoCheckpointStillLoadsAndResumesIntoVersionThree) {
  ASSERT_TRUE(fs::exists(kV2));
  EXPECT_FALSE(wte::hdf5::checksummed_format(kV2.string()));
  const Loaded v2 = load(kV2.string());
  EXPECT_EQ(v2.info.format_version, 2);
  EXPECT_EQ(v2.info.step, 2);
  EXPECT_TRUE(v2.info.resumable());
  // The values are the file's own, read directly through HDF5.
  {
    H5::H5File file(kV2.string(), H5F_ACC_RDONLY);
    const wte::TensorSpec& t = v2.info.tensors[0];
    ASSERT_EQ(t.name, "wte");
    std::vector<float> raw(t.size);
    file.openDataSet("wte").read(raw.data(), H5::PredType::NATIVE_FLOAT);
    EXPECT_EQ(0, std::memcmp(raw.data(), v2.params.data() + t.offset, 4 * t.size));
  }
  // Resumed in its run directory (a copy), on the same corpus at another path: to step 4, written
  // as version 3.
  fs::create_directories(dir_ / "old");
  fs::copy_file(kV2, ckpt("old", 2));
  std::string out;
  ASSERT_EQ(run("timeout 120 " + kCli + " train --resume auto --out " + q(dir_ / "old") +
                    " --data.text=" + q(corpus_) + " --train.threads=1",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("resumed: " + ckpt("old", 2) + " at step 2"), std::string::npos) << out;
  const Loaded v3 = load(ckpt("old", 4));
  EXPECT_EQ(v3.info.format_version, 3);
  EXPECT_EQ(v3.info.step, 4);
  // Saved again as version 3, a version-2 checkpoint loads back bit for bit.
  {
    const wte::Config cfg = wte::parse_config(v2.info.config_ini, "fixture");
    wte::Model model(cfg.model);
    wte::AdamW opt(model);
    wte::load_checkpoint(kV2.string(), model, &opt);
    const wte::Tokenizer tok = wte::Tokenizer::from_strings(v2.info.encoder_json, v2.info.vocab_bpe, "fixture");
    const std::string again = (dir_ / "again.h5").string();
    wte::save_checkpoint(again, model, &opt, tok, cfg, v2.info.step, &v2.info.resume);
    const Loaded back = load(again);
    EXPECT_EQ(back.info.format_version, 3);
    EXPECT_EQ(back.params, v2.params);
    EXPECT_EQ(back.m, v2.m);
    EXPECT_EQ(back.v, v2.v);
    EXPECT_EQ(back.info.resume.data.order, v2.info.resume.data.order);
    EXPECT_EQ(back.info.encoder_json, v2.info.encoder_json);
    // The same config, written with the keys of this version (a key added since, such as
    // model.attention, at the value a file without it means).
    EXPECT_EQ(back.info.config_ini, cfg.to_ini());
    EXPECT_EQ(wte::parse_config(back.info.config_ini, "again").to_ini(), cfg.to_ini());
  }
}

TEST_F(CheckpointFormat, DamagedVersionTwoFileThatCrashesOrHangsHdf5IsAnError) {
  for (const size_t offset : {kCrashOffset, kHangOffset}) {
    SCOPED_TRACE(offset);
    const fs::path p = dir_ / ("damaged_" + std::to_string(offset) + ".h5");
    write(p, damaged_v2(offset));
    std::string out;
    // Under `timeout`: a hang is exit 124, a crash 139; wte must give an error naming the file,
    // exit 1 ("is corrupt: reading it crashed HDF5's parser" or "... used more than 3 s of CPU
    // time"; HDF5's behaviour on these damaged bytes depends on memory contents, so it may also
    // be an error of HDF5's or wte's own checks).
    EXPECT_EQ(run("timeout 60 " + kCli + " inspect " + q(p), &out), 1) << out;
    EXPECT_NE(out.find(p.string()), std::string::npos) << out;
    if (offset == kCrashOffset) {
      EXPECT_NE(out.find("is corrupt: reading it crashed"), std::string::npos) << out;
    }
    // In-process too: an error, and this test process lives on.
    const std::string err = wte::test::error_of([&] { wte::read_checkpoint_info(p.string()); });
    EXPECT_NE(err.find(p.string()), std::string::npos) << err;
  }
}

TEST_F(CheckpointFormat, ResumeAutoSkipsVersionTwoFilesThatCrashOrHangHdf5) {
  fs::create_directories(dir_ / "run");
  fs::copy_file(kV2, ckpt("run", 2));
  write(ckpt("run", 3), damaged_v2(kCrashOffset));
  write(ckpt("run", 5), damaged_v2(kHangOffset));
  std::string out;
  ASSERT_EQ(run("timeout 120 " + kCli + " train --resume auto --out " + q(dir_ / "run") +
                    " --data.text=" + q(corpus_) + " --train.threads=1",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("skipping checkpoint '" + ckpt("run", 3) + "' is corrupt"), std::string::npos) << out;
  // Where HDF5 loops on this damage depends on what it reads first (the self-contained check
  // reads every object header before the datasets): skipped either way, with an error.
  EXPECT_TRUE(out.find("skipping checkpoint '" + ckpt("run", 5) + "'") != std::string::npos ||
              out.find("skipping '" + ckpt("run", 5) + "'") != std::string::npos)
      << out;
  EXPECT_NE(out.find("resumed: " + ckpt("run", 2) + " at step 2"), std::string::npos) << out;
  EXPECT_NE(out.find("mv '" + ckpt("run", 5) + "' '" + ckpt("run", 5) + ".corrupt'"), std::string::npos) << out;
  EXPECT_EQ(load(ckpt("run", 4)).info.step, 4);
  EXPECT_TRUE(fs::exists(ckpt("run", 5)));  // left where it was
}

TEST_F(CheckpointFormat, ResumeAutoSkipsATruncatedNewestCheckpointSaysSoAndStaysExact) {
  std::string out;
  ASSERT_EQ(train("straight", "", &out), 0) << out;
  ASSERT_EQ(train("cut", "--stop-at 3", &out), 0) << out;
  const std::string newest = ckpt("cut", 3);
  const std::string bytes = slurp(newest);
  write(newest, bytes.substr(0, bytes.size() / 2));
  ASSERT_EQ(run("timeout 120 " + kCli + " train --resume auto --out " + q(dir_ / "cut"), &out), 0)
      << out;
  EXPECT_NE(out.find("--resume auto: skipping"), std::string::npos) << out;
  EXPECT_NE(out.find("checkpoint_00000003.h5"), std::string::npos) << out;
  EXPECT_NE(out.find("resumed: " + ckpt("cut", 2) + " at step 2"), std::string::npos) << out;
  EXPECT_NE(out.find("mv '" + newest + "' '" + newest + ".corrupt'"), std::string::npos) << out;
  // The run wrote a whole checkpoint 3 over the cut one, and ends as one never stopped.
  const Loaded a = load(ckpt("straight", 4)), b = load(ckpt("cut", 4));
  EXPECT_EQ(load(newest).info.step, 3);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.m, b.m);
  EXPECT_EQ(a.v, b.v);
  EXPECT_EQ(a.info.resume.data.order, b.info.resume.data.order);
  EXPECT_EQ(a.info.resume.data.rng_state, b.info.resume.data.rng_state);
}

TEST_F(CheckpointFormat, FileNameStepDifferentFromStoredStepIsNotALaterCheckpointOfItself) {
  std::string out;
  ASSERT_EQ(train("straight", "", &out), 0) << out;
  ASSERT_EQ(train("run", "--stop-at 2", &out), 0) << out;
  // Step 2's checkpoint under the name of step 7 (stored step 2), beside checkpoint 1.
  fs::rename(ckpt("run", 2), ckpt("run", 7));
  ASSERT_EQ(run("timeout 120 " + kCli + " train --resume " + q(ckpt("run", 7)), &out), 0) << out;
  EXPECT_NE(out.find("resumed: " + ckpt("run", 7) + " at step 2"), std::string::npos) << out;
  EXPECT_EQ(load(ckpt("straight", 4)).params, load(ckpt("run", 4)).params);
  // Again with --resume auto: checkpoint_00000007.h5 holds step 2, below checkpoint 4's.
  ASSERT_EQ(train("auto", "--stop-at 2", &out), 0) << out;
  fs::rename(ckpt("auto", 2), ckpt("auto", 7));
  ASSERT_EQ(run("timeout 120 " + kCli + " train --resume auto --out " + q(dir_ / "auto"), &out), 0)
      << out;
  EXPECT_NE(out.find("resumed: " + ckpt("auto", 7) + " at step 2"), std::string::npos) << out;
  EXPECT_EQ(load(ckpt("straight", 4)).params, load(ckpt("auto", 4)).params);
}
