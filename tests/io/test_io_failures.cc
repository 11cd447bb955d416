// Inputs and outputs that fail under wte: a read error (EIO) names the file; a safetensors file
// truncated by another process after import read it cannot crash wte; a file that shrinks while
// it is read, or is cut short and written back meanwhile, is an error; export puts all its files in place or none; a command whose standard
// output cannot be written fails; import's config.json layer_norm_epsilon passes the config
// parser's own range check; import's tokenizer errors name the files given; --temperature
// accepts every number of its stated range.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "src/io/hf_gpt2.h"
#include "src/io/safetensors.h"
#include "tests/test_util.h"
#include "wte/error.h"

namespace fs = std::filesystem;
using wte::test::error_of;
using wte::test::run;
using wte::test::slurp;
using wte::test::temp_dir;
using wte::test::write;

namespace {

std::string cli() { return WTE_CLI; }

// A tiny trained run in `dir`/run (checkpoints at steps 2 and 4), exported to `dir`/hf.
void train_tiny(const fs::path& dir) {
  std::string out;
  ASSERT_EQ(wte::test::train_tiny_run(cli(), dir, &out), 0) << out;
  ASSERT_EQ(run(cli() + " export --checkpoint " + (dir / "run/checkpoint_00000004.h5").string() +
                    " --out " + (dir / "hf").string(),
                &out),
            0)
      << out;
}

std::string config_json(const std::string& eps) {
  return "{\"model_type\": \"gpt2\", \"vocab_size\": 300, \"n_embd\": 16, \"n_layer\": 1, "
         "\"n_head\": 2, \"n_positions\": 16, \"layer_norm_epsilon\": " + eps + "}";
}

}  // namespace

// config.json's layer_norm_epsilon is checked as model.ln_eps is: a value that is 0 or
// subnormal in float32 (so every command would refuse the imported checkpoint) is refused.
TEST(ImportChecks, LayerNormEpsilonHasTheConfigRange) {
  for (const char* eps : {"1e-45", "1e-50", "1e-39", "0", "-1e-5", "2"}) {
    const std::string msg =
        error_of([&] { wte::hf::parse_config_json(config_json(eps), "config.json 'c'"); });
    EXPECT_NE(msg.find("layer_norm_epsilon"), std::string::npos) << eps << ": " << msg;
    EXPECT_NE(msg.find("allowed: a number in (0, 1]"), std::string::npos) << eps << ": " << msg;
  }
  EXPECT_NE(error_of([&] { wte::hf::parse_config_json(config_json("1e-45"), "c"); }).find("float32"),
            std::string::npos);
  for (const char* eps : {"1e-5", "1", "1e-30"})
    EXPECT_EQ(error_of([&] { wte::hf::parse_config_json(config_json(eps), "c"); }), "") << eps;
  EXPECT_EQ(wte::hf::parse_config_json(config_json("1e-30"), "c").ln_eps, 1e-30f);
}

// A read error (EIO: /proc/self/mem read at offset 0 gives one) names the file it happened in.
TEST(ReadErrors, NameTheFile) {
  {
    std::ifstream probe("/proc/self/mem", std::ios::binary);
    char c;
    if (!probe || probe.read(&c, 1) || ::access("/proc/self/mem", R_OK) != 0)
      GTEST_SKIP() << "/proc/self/mem does not give a read error here";
  }
  const fs::path dir = temp_dir("io_failures_eio");
  train_tiny(dir);
  const auto eio = [&](const fs::path& link, const std::string& cmd) {
    fs::remove(link);
    fs::create_symlink("/proc/self/mem", link);
    std::string out;
    EXPECT_EQ(run(cmd, &out), 1) << cmd << "\n" << out;
    EXPECT_NE(out.find("Input/output error"), std::string::npos) << cmd << "\n" << out;
    EXPECT_NE(out.find(link.string()), std::string::npos) << cmd << "\n" << out;
  };
  // The config file of train.
  eio(dir / "mem.ini", cli() + " train --config " + (dir / "mem.ini").string() + " --out " +
                           (dir / "run_eio").string());
  // A tokenizer directory's encoder.json.
  fs::create_directories(dir / "tok");
  write(dir / "tok/vocab.bpe", "#version: 0.2\n");
  eio(dir / "tok/encoder.json", cli() + " tokenize --tokenizer " + (dir / "tok").string() + " hi");
  // Import's config.json and vocab.json.
  const std::string import = cli() + " import --from " + (dir / "hf").string() + " --out " +
                             (dir / "imported.h5").string();
  const std::string config = slurp(dir / "hf/config.json"), vocab = slurp(dir / "hf/vocab.json");
  eio(dir / "hf/config.json", import);
  fs::remove(dir / "hf/config.json");
  write(dir / "hf/config.json", config);
  eio(dir / "hf/vocab.json", import);
  fs::remove(dir / "hf/vocab.json");
  write(dir / "hf/vocab.json", vocab);
  // A token file (hidden-states --data).
  eio(dir / "val.bin", cli() + " hidden-states --checkpoint " +
                           (dir / "run/checkpoint_00000004.h5").string() + " --text the --data " +
                           (dir / "val.bin").string());
}

// Import's tokenizer errors name the files read, as given (not "(vocab.json + merges.txt)/...").
TEST(ImportChecks, TokenizerErrorsNameTheFiles) {
  const fs::path dir = temp_dir("io_failures_tokenizer_names");
  train_tiny(dir);
  const std::string import = cli() + " import --from " + (dir / "hf").string() + " --out " +
                             (dir / "imported.h5").string();
  const std::string vocab = slurp(dir / "hf/vocab.json");
  std::string out;
  write(dir / "hf/vocab.json", "{\"a\": \"x\"}");
  EXPECT_EQ(run(import, &out), 1) << out;
  EXPECT_NE(out.find("'" + (dir / "hf/vocab.json").string() + "'"), std::string::npos) << out;
  EXPECT_EQ(out.find("encoder.json"), std::string::npos) << out;
  EXPECT_EQ(out.find(" + "), std::string::npos) << out;
  write(dir / "hf/vocab.json", vocab);
  write(dir / "hf/merges.txt", "#version: 0.2\nzz q\n");
  EXPECT_EQ(run(import, &out), 1) << out;
  EXPECT_NE(out.find("'" + (dir / "hf/merges.txt").string() + "' line 2"), std::string::npos) << out;
  EXPECT_EQ(out.find("vocab.bpe"), std::string::npos) << out;
}

// --temperature: every number of the stated range [0, 1e6] is allowed, 4.9e-324 (the smallest
// double, subnormal) and 1e-400 (below it: 0) included.
TEST(SampleChecks, TemperatureRangeAsStated) {
  const fs::path dir = temp_dir("io_failures_temperature");
  train_tiny(dir);
  const std::string sample = cli() + " sample --checkpoint " +
                             (dir / "run/checkpoint_00000004.h5").string() +
                             " --prompt the --max-new-tokens 2 --temperature ";
  std::string out;
  for (const char* t : {"4.9e-324", "1e-320", "1e-400", "0", "1e6"})
    EXPECT_EQ(run(sample + t, &out), 0) << t << "\n" << out;
  for (const char* t : {"-1e-300", "1.000001e6", "inf", "nan", "x"}) {
    EXPECT_EQ(run(sample + t, &out), 2) << t << "\n" << out;
    EXPECT_NE(out.find("allowed: a number in [0, 1e6]"), std::string::npos) << t << "\n" << out;
  }
}

// Import reads the safetensors file into memory: another process truncating it afterwards does
// not touch what was read (a mapped file gave SIGBUS at the next access).
TEST(SafetensorsRead, TruncatedAfterOpenIsNoCrash) {
  const fs::path dir = temp_dir("io_failures_truncate");
  std::vector<float> a(4096), b(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0.25f * static_cast<float>(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = -1.0f * static_cast<float>(i);
  const std::string path = (dir / "m.safetensors").string();
  wte::safetensors::write_file(path, {{"a", {64, 64}, a.data()}, {"b", {1000}, b.data()}}, {},
                               /*commit=*/true);
  const wte::safetensors::MappedFile file(path);
  ASSERT_EQ(::truncate(path.c_str(), 0), 0) << std::strerror(errno);
  std::vector<float> got(4096);
  file.view().to_f32(*file.view().find("a"), got.data());
  EXPECT_EQ(std::memcmp(got.data(), a.data(), a.size() * 4), 0);
  file.view().to_f32(*file.view().find("b"), got.data());
  EXPECT_EQ(std::memcmp(got.data(), b.data(), b.size() * 4), 0);
}

// Another process cutting the file short (and writing it back to its size) while it is read:
// each read either fails naming the change or holds the file's original bytes, never the zeros
// of a cut file. 64 MiB, so the cuts land inside the read.
TEST(SafetensorsRead, CutWhileReadIsAnErrorOrTheOriginalBytes) {
  const fs::path dir = temp_dir("io_failures_cut");
  std::vector<float> a(size_t{16} << 20);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 1.0f + static_cast<float>(i % 1000);
  const std::string path = (dir / "m.safetensors").string();
  wte::safetensors::write_file(path, {{"a", {a.size()}, a.data()}}, {}, /*commit=*/true);
  const std::string original = slurp(path);
  int errors = 0, whole = 0;
  const int trials = 16;
  for (int trial = 0; trial < trials; ++trial) {
    std::atomic<bool> done{false}, cutting{false};
    std::thread cutter([&] {
      // Odd trials cut from before the read starts, even ones a little later (inside the read of
      // 64 MiB).
      if (trial % 2 == 0) ::usleep(static_cast<useconds_t>(trial * 1000));
      while (!done.load()) {
        if (::truncate(path.c_str(), 4096) != 0 ||
            ::truncate(path.c_str(), static_cast<off_t>(original.size())) != 0)
          break;
        cutting = true;
      }
    });
    while (trial % 2 == 1 && !cutting.load()) std::this_thread::yield();
    try {
      const wte::safetensors::MappedFile file(path);
      done = true;
      std::vector<float> got(a.size());
      file.view().to_f32(*file.view().find("a"), got.data());
      EXPECT_EQ(std::memcmp(got.data(), a.data(), a.size() * 4), 0) << "trial " << trial;
      ++whole;
    } catch (const wte::Error& e) {
      done = true;
      const std::string msg = e.what();
      EXPECT_TRUE(msg.find("while it was read") != std::string::npos ||
                  msg.find("safetensors '" + path + "'") != std::string::npos)
          << msg;
      ++errors;
    }
    cutter.join();
    std::ofstream(path, std::ios::binary) << original;  // whole again for the next trial
  }
  std::printf("%d reads under concurrent cuts: %d errors naming the change, %d whole\n", trials,
              errors, whole);
}

// A file whose size changes while it is read is an error naming it. A sysfs attribute is such
// a file: stat says 4096 bytes, a read gives the few bytes of its value.
TEST(SafetensorsRead, ShrinkingFileIsAnError) {
  const std::string path = "/sys/kernel/mm/transparent_hugepage/enabled";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) != 4096 ||
      ::access(path.c_str(), R_OK) != 0)
    GTEST_SKIP() << path << " is not a readable 4096-byte sysfs file here";
  const std::string msg = error_of([&] { wte::safetensors::MappedFile f(path); });
  EXPECT_NE(msg.find("safetensors '" + path + "': the file shrank while it was read (4096 bytes"),
            std::string::npos)
      << msg;
}

// Export puts its files in place all together or not at all: when one of them cannot be put in
// place, the directory's earlier export is left whole.
TEST(ExportCommit, AllOrNone) {
  const fs::path dir = temp_dir("io_failures_export");
  train_tiny(dir);
  const std::string before = slurp(dir / "hf/model.safetensors");
  const std::string config_before = slurp(dir / "hf/config.json");
  // merges.txt, the last file export writes, cannot be replaced: it is a directory now.
  fs::remove(dir / "hf/merges.txt");
  fs::create_directories(dir / "hf/merges.txt");
  std::string out;
  EXPECT_EQ(run(cli() + " export --checkpoint " + (dir / "run/checkpoint_00000002.h5").string() +
                    " --out " + (dir / "hf").string(),
                &out),
            1)
      << out;
  EXPECT_NE(out.find("merges.txt"), std::string::npos) << out;
  EXPECT_EQ(slurp(dir / "hf/model.safetensors"), before) << "an old and a new file are mixed";
  EXPECT_EQ(slurp(dir / "hf/config.json"), config_before);
  for (const auto& e : fs::directory_iterator(dir / "hf"))
    EXPECT_NE(e.path().extension(), ".tmp") << "left behind: " << e.path();

  // A rename that fails after others succeeded: merges.txt cannot be moved aside (its backup
  // name is taken by a non-empty directory), so the files renamed before it are put back.
  fs::remove_all(dir / "hf/merges.txt");
  write(dir / "hf/merges.txt", "old merges");
  fs::create_directories(dir / "hf/merges.txt.old.tmp/x");
  EXPECT_EQ(run(cli() + " export --checkpoint " + (dir / "run/checkpoint_00000002.h5").string() +
                    " --out " + (dir / "hf").string(),
                &out),
            1)
      << out;
  EXPECT_NE(out.find("every file in the directory is as it was"), std::string::npos) << out;
  EXPECT_EQ(slurp(dir / "hf/model.safetensors"), before) << "a renamed file was not put back";
  EXPECT_EQ(slurp(dir / "hf/config.json"), config_before);
  EXPECT_EQ(slurp(dir / "hf/merges.txt"), "old merges");
  for (const auto& e : fs::directory_iterator(dir / "hf"))
    if (e.path().filename() != "merges.txt.old.tmp")
      EXPECT_NE(e.path().extension(), ".tmp") << "left behind: " << e.path();
}

// A command whose standard output cannot be written (/dev/full: ENOSPC) fails, exit 1, saying so
// on stderr.
TEST(StandardOutput, FullIsAnError) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const fs::path dir = temp_dir("io_failures_stdout");
  train_tiny(dir);
  const std::string ckpt = (dir / "run/checkpoint_00000004.h5").string();
  fs::create_directories(dir / "tok");
  fs::copy_file(dir / "hf/vocab.json", dir / "tok/encoder.json");
  fs::copy_file(dir / "hf/merges.txt", dir / "tok/vocab.bpe");
  const std::vector<std::string> commands = {
      cli() + " --version",
      cli() + " --help",
      cli() + " train --help",
      cli() + " inspect " + ckpt,
      cli() + " tokenize --tokenizer " + (dir / "tok").string() + " hello",
      cli() + " sample --checkpoint " + ckpt + " --prompt the --max-new-tokens 2",
      cli() + " hidden-states --checkpoint " + ckpt + " --text the",
      cli() + " export --checkpoint " + ckpt + " --out " + (dir / "hf2").string(),
      cli() + " import --from " + (dir / "hf").string() + " --out " + (dir / "i.h5").string(),
      cli() + " train --config " + (dir / "tiny.ini").string() + " --train.steps=2 --out " +
          (dir / "run2").string(),
  };
  for (const std::string& cmd : commands) {
    std::string out;
    EXPECT_EQ(run("(" + cmd + " > /dev/full)", &out), 1) << cmd << "\n" << out;
    EXPECT_NE(out.find("error: cannot write standard output"), std::string::npos)
        << cmd << "\n" << out;
  }
  // A failed command keeps its own status and message.
  std::string out;
  EXPECT_EQ(run("(" + cli() + " sample --checkpoint " + ckpt + " --temperature -1 > /dev/full)",
                &out),
            2)
      << out;
}
