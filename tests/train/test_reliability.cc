// Faults, hostile files, signals and busy machines: one test (or more) per behaviour,
// each run against the built `wte` (WTE_CLI) as a user would, with a tiny model so each takes
// seconds. Covered: no command destroys its input; a locked file is named locked, not corrupt;
// bad values and files are refused, never silently accepted; no half-made run directories; the
// busy-machine OpenMP default; Ctrl-C and SIGTERM at every stage; hostile checkpoints (also
// fuzz/); runs that cannot be resumed or that fight over a directory. A full disk:
// tests/train/test_disk_full.sh. Threads pinned to 2 where results are compared bit for bit.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/error.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using wte::test::error_of;
using wte::test::run;
using wte::test::slurp;
using wte::test::temp_dir;
using wte::test::tiny_corpus;
using wte::test::write;

namespace {

const std::string kCli = WTE_CLI;

std::string q(const fs::path& p) {
  return "'" + p.string() + "'";
}

bool have(const char* tool) {
  return std::system((std::string("command -v ") + tool + " > /dev/null 2>&1").c_str()) == 0;
}

// A tiny run: vocab 300, d_model 16, T 16, B 4; `steps` steps, checkpoint every `interval`.
std::string tiny_config(const fs::path& corpus, size_t steps, size_t interval) {
  return "[model]\nvocab_size = 300\nd_model = 16\nn_ctx = 16\nn_layer = 0\n"
         "[data]\ntext = " + corpus.string() + "\nseq_len = 16\nval_fraction = 0.1\n"
         "[train]\nbatch_size = 4\nsteps = " + std::to_string(steps) +
         "\neval_interval = 0\neval_tokens = 256\nlog_interval = 1\nthreads = 2\nsnapshot_steps =\n"
         "[optim]\nlr = 0.01\nmin_lr = 0.001\nwarmup_steps = 2\n"
         "[checkpoint]\ninterval = " + std::to_string(interval) + "\nkeep_last = 0\n";
}

class Reliability : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = temp_dir(std::string("reliability_") + info->name());
    write(dir_ / "corpus.txt", tiny_corpus());
  }
  // Writes dir_/NAME.ini for `steps` and `interval`.
  fs::path config(const std::string& name, size_t steps, size_t interval) {
    const fs::path p = dir_ / (name + ".ini");
    write(p, tiny_config(dir_ / "corpus.txt", steps, interval));
    return p;
  }
  // Trains `steps` steps into dir_/out_name; returns the final checkpoint's path.
  fs::path train(const std::string& out_name, size_t steps, size_t interval = 0,
                 const std::string& extra = "") {
    std::string out;
    const fs::path cfg = config(out_name, steps, interval);
    EXPECT_EQ(run(kCli + " train --quiet --config " + q(cfg) + " --out " + q(dir_ / out_name) +
                      " " + extra, &out),
              0)
        << out;
    return wte::checkpoint_path((dir_ / out_name).string(), steps);
  }
  fs::path dir_;
};

// A copy of `src` at dst, opened read-write with HDF5's C API (the caller closes it).
hid_t open_copy(const fs::path& src, const fs::path& dst) {
  fs::copy_file(src, dst, fs::copy_options::overwrite_existing);
  return H5Fopen(dst.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
}

// Sets element `index` of the float32 dataset `name` in the open file to `value`.
void poke_float(hid_t file, const char* name, size_t index, float value) {
  hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
  hid_t space = H5Dget_space(ds);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  std::vector<float> v(static_cast<size_t>(n));
  H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  v[index] = value;
  H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Sclose(space);
  H5Dclose(ds);
}

// h5diff's verdict on two files: true if every dataset and attribute is equal.
bool same_files(const fs::path& a, const fs::path& b, std::string* out) {
  return run("h5diff " + q(a) + " " + q(b), out) == 0;
}

// ---- 2. A command destroys its own input ------------------------------------------------------

TEST_F(Reliability, GradRefusesAnOutputThatIsItsInput) {
  const fs::path ckpt = train("run", 2);
  write(dir_ / "batch.txt", "1 2 3 4 5\n6 7 8 9 10\n");
  const std::string before = slurp(ckpt);
  fs::create_directories(dir_ / "sub");
  fs::create_symlink(ckpt, dir_ / "link.h5");
  for (const fs::path& out : {ckpt, dir_ / "sub" / ".." / "run" / ckpt.filename(), dir_ / "link.h5"}) {
    std::string msg;
    EXPECT_EQ(run(kCli + " grad --checkpoint " + q(ckpt) + " --tokens " + q(dir_ / "batch.txt") +
                      " --out " + q(out), &msg),
              2)
        << msg;
    EXPECT_NE(msg.find("is the same file as --checkpoint"), std::string::npos) << msg;
    EXPECT_EQ(slurp(ckpt), before) << "the checkpoint was changed by --out " << out;
  }
  // The batch is named by the option's name, --batch, also when typed as its old alias --tokens.
  std::string msg;
  EXPECT_EQ(run(kCli + " grad --checkpoint " + q(ckpt) + " --tokens " + q(dir_ / "batch.txt") +
                    " --out " + q(dir_ / "batch.txt"), &msg), 2) << msg;
  EXPECT_NE(msg.find("is the same file as --batch"), std::string::npos) << msg;
  // The temporary file of --out must not be the input either.
  fs::copy_file(ckpt, dir_ / "c.h5.tmp");
  EXPECT_EQ(run(kCli + " grad --checkpoint " + q(dir_ / "c.h5.tmp") + " --batch " +
                    q(dir_ / "batch.txt") + " --out " + q(dir_ / "c.h5"), &msg), 2) << msg;
  EXPECT_EQ(slurp(dir_ / "c.h5.tmp"), before);
}

// `hidden-states --data F -o F` replaced its token file with its output.
// Every command with an input file and an output refuses (exit 2, naming both options) an output
// that is one of its inputs: hidden-states (--data, the val.bin it reads by default), export and
// geometry (a file they would write into their --out directory).
TEST_F(Reliability, NoCommandWritesOverItsOwnInput) {
  const fs::path ckpt = train("run", 2);
  const fs::path val = dir_ / "run" / "val.bin";
  fs::copy_file(val, dir_ / "vcopy.bin");
  const std::string tokens = slurp(dir_ / "vcopy.bin");
  const std::string hs = kCli + " hidden-states --checkpoint " + q(ckpt) + " --text 'ab' ";
  std::string msg;
  EXPECT_EQ(run(hs + "--data " + q(dir_ / "vcopy.bin") + " -o " + q(dir_ / "vcopy.bin"), &msg), 2) << msg;
  EXPECT_NE(msg.find("--out " + (dir_ / "vcopy.bin").string() + " is the same file as --data"),
            std::string::npos) << msg;
  EXPECT_EQ(slurp(dir_ / "vcopy.bin"), tokens);
  // Another spelling of the same file.
  EXPECT_EQ(run(hs + "--data " + q(dir_ / "vcopy.bin") + " -o " + q(dir_ / "run" / ".." / "vcopy.bin"), &msg), 2) << msg;
  EXPECT_EQ(slurp(dir_ / "vcopy.bin"), tokens);
  // Without --data the baseline reads val.bin beside the checkpoint: that is an input too.
  EXPECT_EQ(run(hs + "-o " + q(val), &msg), 2) << msg;
  EXPECT_NE(msg.find("is the same file as the default --data (val.bin beside --checkpoint)"),
            std::string::npos) << msg;
  EXPECT_EQ(slurp(val), tokens);
  // An output elsewhere still works.
  EXPECT_EQ(run(hs + "--data " + q(dir_ / "vcopy.bin") + " -o " + q(dir_ / "hs.h5"), &msg), 0) << msg;

  // export --out DIR writes config.json, vocab.json, merges.txt and model.safetensors there.
  fs::create_directories(dir_ / "exp");
  fs::copy_file(ckpt, dir_ / "exp" / "config.json");
  const std::string ck = slurp(ckpt);
  EXPECT_EQ(run(kCli + " export --checkpoint " + q(dir_ / "exp" / "config.json") + " --out " +
                    q(dir_ / "exp"), &msg), 2) << msg;
  EXPECT_NE(msg.find("--checkpoint " + (dir_ / "exp" / "config.json").string() + " is in --out " +
                     (dir_ / "exp").string() + ", where this command writes 'config.json'"),
            std::string::npos) << msg;
  EXPECT_EQ(slurp(dir_ / "exp" / "config.json"), ck);
  // ... and with --format npy, NAME.npy: a checkpoint named wte.npy is an input, not an output.
  fs::copy_file(ckpt, dir_ / "exp" / "wte.npy");
  EXPECT_EQ(run(kCli + " export --format npy --checkpoint " + q(dir_ / "exp" / "wte.npy") +
                    " --out " + q(dir_ / "exp"), &msg), 2) << msg;
  EXPECT_EQ(slurp(dir_ / "exp" / "wte.npy"), ck);

  // geometry --out DIR writes geometry.csv, index.html and *.svg there.
  fs::create_directories(dir_ / "geo");
  write(dir_ / "geo" / "geometry.csv", "a\tb\n");
  EXPECT_EQ(run(kCli + " geometry --checkpoint " + q(ckpt) + " --labels " +
                    q(dir_ / "geo" / "geometry.csv") + " --out " + q(dir_ / "geo"), &msg), 2) << msg;
  EXPECT_NE(msg.find("--labels " + (dir_ / "geo" / "geometry.csv").string() + " is in --out"),
            std::string::npos) << msg;
  EXPECT_EQ(slurp(dir_ / "geo" / "geometry.csv"), "a\tb\n");
}

// `wte import --from DIR -o DIR/merges.txt` (or vocab.json, or a file of
// --tokenizer) replaced the tokenizer file it reads with the HDF5 output. The tokenizer's files
// are inputs: exit 2 naming --tokenizer, the file unchanged.
TEST_F(Reliability, ImportRefusesAnOutputThatIsOneOfItsTokenizerFiles) {
  const fs::path ckpt = train("run", 2);
  const fs::path hf = dir_ / "hf";
  std::string msg;
  ASSERT_EQ(run(kCli + " export --checkpoint " + q(ckpt) + " --out " + q(hf), &msg), 0) << msg;
  for (const char* name : {"merges.txt", "vocab.json"}) {
    const std::string before = slurp(hf / name);
    EXPECT_EQ(run(kCli + " import --from " + q(hf) + " -o " + q(hf / name), &msg), 2) << msg;
    EXPECT_NE(msg.find("is the same file as --tokenizer " + (hf / name).string()),
              std::string::npos) << msg;
    EXPECT_EQ(slurp(hf / name), before) << name;
  }
  // A tokenizer directory of its own (GPT-2's names), given with --tokenizer.
  fs::create_directories(dir_ / "tok");
  fs::copy_file(hf / "vocab.json", dir_ / "tok" / "encoder.json");
  fs::copy_file(hf / "merges.txt", dir_ / "tok" / "vocab.bpe");
  const std::string bpe = slurp(dir_ / "tok" / "vocab.bpe");
  EXPECT_EQ(run(kCli + " import --safetensors " + q(hf / "model.safetensors") + " --tokenizer " +
                    q(dir_ / "tok") + " -o " + q(dir_ / "tok" / "vocab.bpe"), &msg), 2) << msg;
  EXPECT_EQ(slurp(dir_ / "tok" / "vocab.bpe"), bpe);
  // An output elsewhere still works.
  EXPECT_EQ(run(kCli + " import --from " + q(hf) + " -o " + q(dir_ / "imported.h5"), &msg), 0) << msg;
}

// ---- 3. A locked file is called corrupt --------------------------------------------------------

TEST_F(Reliability, LockedCheckpointIsNamedLockedNotCorrupt) {
  const char* env = std::getenv("HDF5_USE_FILE_LOCKING");
  if (env != nullptr && std::string(env) == "FALSE") GTEST_SKIP() << "HDF5_USE_FILE_LOCKING=FALSE";
  train("run", 4, 2, "--stop-at 3");  // leaves checkpoints 2 and 3 (steps = 4)
  const fs::path newest = wte::checkpoint_path((dir_ / "run").string(), 3);
  ASSERT_TRUE(fs::exists(newest));
  hid_t held = H5Fopen(newest.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);  // another writer holds it
  ASSERT_GE(held, 0);
  std::string out;
  EXPECT_EQ(run(kCli + " inspect " + q(newest), &out), 1) << out;
  EXPECT_NE(out.find("locked"), std::string::npos) << out;
  EXPECT_NE(out.find("HDF5_USE_FILE_LOCKING"), std::string::npos) << out;
  EXPECT_EQ(out.find("corrupt"), std::string::npos) << out;
  // --resume auto must not fall back to the older checkpoint 2 silently.
  EXPECT_EQ(run(kCli + " train --resume auto --out " + q(dir_ / "run"), &out), 1) << out;
  EXPECT_NE(out.find("locked"), std::string::npos) << out;
  EXPECT_EQ(out.find("resumed:"), std::string::npos) << out;
  H5Fclose(held);
  EXPECT_EQ(run(kCli + " train --resume auto --out " + q(dir_ / "run"), &out), 0) << out;
  EXPECT_NE(out.find("checkpoint_00000003.h5 at step 3"), std::string::npos) << out;
}

// ---- 4. Silent acceptance ---------------------------------------------------------------------

TEST_F(Reliability, AbbreviatedOptionsAreUnknown) {
  const fs::path cfg = config("c", 2, 0);
  for (const std::string opt : {"--train.step=3", "--optim.l=0.5", "--res=auto"}) {
    std::string out;
    EXPECT_NE(run(kCli + " train --config " + q(cfg) + " --out " + q(dir_ / "o") + " " + opt, &out), 0)
        << opt << "\n" << out;
    // "unknown option '--train.step'" (a config key: the config loader) or "unknown option
    // '--res=auto'" (any other option: the command-line parser), by the same words.
    EXPECT_NE(out.find("option '" + opt.substr(0, opt.find('='))), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(dir_ / "o")) << opt;
  }
  // The same rule in every command.
  std::string out;
  EXPECT_EQ(run(kCli + " tokenize --voc x hello", &out), 2) << out;
  EXPECT_EQ(run(kCli + " grad --check x --tokens y --out z", &out), 2) << out;
  // Config parser: exact names only.
  EXPECT_NE(error_of([] { wte::load_config("", {"--train.step=3"}); }).find("unknown option"),
            std::string::npos);
  // ... with the key meant.
  EXPECT_NE(error_of([] { wte::load_config("", {"--train.step=3"}); })
                .find("did you mean '--train.steps'?"),
            std::string::npos);
}

TEST_F(Reliability, TiedCheckpointWithAnotherLmHeadIsAnError) {
  const fs::path ckpt = train("run", 2);
  // An lm_head that differs from wte: named, with the difference.
  hid_t f = open_copy(ckpt, dir_ / "head.h5");
  ASSERT_EQ(H5Ocopy(f, "wte", f, "lm_head", H5P_DEFAULT, H5P_DEFAULT), 0);
  poke_float(f, "lm_head", 17, 0.75f);
  H5Fclose(f);
  std::string out;
  EXPECT_EQ(run(kCli + " inspect " + q(dir_ / "head.h5"), &out), 1) << out;
  EXPECT_NE(out.find("'lm_head' that differs from 'wte' in 1 of"), std::string::npos) << out;
  EXPECT_NE(out.find("[1, 1]"), std::string::npos) << out;
  write(dir_ / "batch.txt", "1 2 3\n");
  EXPECT_EQ(run(kCli + " grad --checkpoint " + q(dir_ / "head.h5") + " --tokens " +
                    q(dir_ / "batch.txt") + " --out " + q(dir_ / "g.h5"), &out), 1) << out;
  EXPECT_NE(out.find("lm_head"), std::string::npos) << out;
  // A copy equal to wte (exporters write both) is accepted.
  f = open_copy(ckpt, dir_ / "same.h5");
  ASSERT_EQ(H5Ocopy(f, "wte", f, "lm_head", H5P_DEFAULT, H5P_DEFAULT), 0);
  H5Fclose(f);
  EXPECT_EQ(run(kCli + " inspect " + q(dir_ / "same.h5"), &out), 0) << out;
  // Any other unexplained dataset is an error naming it.
  f = open_copy(ckpt, dir_ / "extra.h5");
  ASSERT_EQ(H5Ocopy(f, "wpe", f, "h0_wpe", H5P_DEFAULT, H5P_DEFAULT), 0);
  H5Fclose(f);
  EXPECT_EQ(run(kCli + " inspect " + q(dir_ / "extra.h5"), &out), 1) << out;
  EXPECT_NE(out.find("dataset 'h0_wpe'"), std::string::npos) << out;
}

TEST_F(Reliability, GradRefusesANaNCheckpoint) {
  const fs::path ckpt = train("run", 2);
  hid_t f = open_copy(ckpt, dir_ / "nan.h5");
  poke_float(f, "wte", 5, std::nanf(""));
  H5Fclose(f);
  write(dir_ / "batch.txt", "1 2 3\n");
  std::string out;
  EXPECT_EQ(run(kCli + " grad --checkpoint " + q(dir_ / "nan.h5") + " --tokens " +
                    q(dir_ / "batch.txt") + " --out " + q(dir_ / "g.h5"), &out), 1) << out;
  EXPECT_NE(out.find("dataset 'wte' holds nan at [0, 5]"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "g.h5"));
}

TEST_F(Reliability, NegativeSecondMomentIsCorruption) {
  const fs::path ckpt = train("run", 2);
  hid_t f = open_copy(ckpt, dir_ / "v.h5");
  poke_float(f, "optimizer/v/wpe", 3, -0.5f);
  H5Fclose(f);
  std::string out;
  EXPECT_EQ(run(kCli + " inspect " + q(dir_ / "v.h5"), &out), 1) << out;
  EXPECT_NE(out.find("dataset 'optimizer/v/wpe' holds -0.500000 at [0, 3]; AdamW's second moment"),
            std::string::npos) << out;
}

TEST_F(Reliability, BatchLargerThanTheTrainingSetIsAnError) {
  std::string out;
  EXPECT_EQ(run(kCli + " train --config " + q(config("c", 2, 0)) + " --out " + q(dir_ / "o") +
                    " --train.batch_size=5000", &out), 1) << out;
  EXPECT_NE(out.find("train.batch_size = 5000 but the train split has only"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "o"));
}

// ---- 5. Half-made run directories -------------------------------------------------------------

TEST_F(Reliability, OutOfMemoryIsRefusedBeforeAnyFileIsWritten) {
  std::string out;
  // logits of one step: 2^20 * 1024 * 300 floats = 1.2 TB.
  EXPECT_EQ(run(kCli + " train --config " + q(config("c", 2, 0)) + " --out " + q(dir_ / "o") +
                    " --train.batch_size=1048576 --data.seq_len=1024 --model.n_ctx=1024", &out), 1)
      << out;
  EXPECT_NE(out.find("the largest part is logits of one step"), std::string::npos) << out;
  EXPECT_NE(out.find("lower train.batch_size or data.seq_len"), std::string::npos) << out;
  EXPECT_EQ(out.find("bad_alloc"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "o")) << "a failed start-up left a run directory";
  // Parameters too large: names the table and its settings.
  EXPECT_EQ(run(kCli + " train --config " + q(config("c", 2, 0)) + " --out " + q(dir_ / "o") +
                    " --model.vocab_size=16000000 --model.d_model=65536", &out), 1) << out;
  EXPECT_NE(out.find("the largest part is AdamW m and v"), std::string::npos) << out;
  EXPECT_NE(out.find("lower model.vocab_size or model.d_model"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "o"));
}

// ---- 6. The busy-machine default ---------------------------------------------------------------

TEST_F(Reliability, PassiveWaitPolicyIsTheDefault) {
  std::string out;
  ASSERT_EQ(run("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + kCli + " train --config " +
                    q(config("c", 1, 0)) + " --out " + q(dir_ / "o"), &out), 0) << out;
  EXPECT_NE(out.find("OMP_WAIT_POLICY=passive (wte's default)"), std::string::npos) << out;
  // The user's choice wins.
  ASSERT_EQ(run("env OMP_WAIT_POLICY=active " + kCli + " train --config " + q(config("c", 1, 0)) +
                    " --out " + q(dir_ / "o2"), &out), 0) << out;
  EXPECT_NE(out.find("OMP_WAIT_POLICY=active (from the environment)"), std::string::npos) << out;
}

// ---- 7. Ctrl-C loses work ----------------------------------------------------------------------

// Starts `wte train` in the background; returns its pid.
pid_t spawn_train(const std::string& args, const fs::path& log, const std::string& env = "") {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = env + " exec " + kCli + " train " + args + " > '" + log.string() + "' 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Waits until metrics.csv in `run_dir` has at least `rows` rows (or 60 s pass).
void wait_for_rows(const fs::path& run_dir, size_t rows) {
  for (int i = 0; i < 6000; ++i) {
    const std::string m = slurp(run_dir / "metrics.csv");
    if (static_cast<size_t>(std::count(m.begin(), m.end(), '\n')) >= rows + 1) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void stop_and_resume(const fs::path& dir, int sig, int want_code) {
  if (!have("h5diff")) GTEST_SKIP() << "h5diff (hdf5-tools) not installed";
  const size_t steps = 3000;  // long enough that the signal arrives mid-run
  const fs::path cfg = dir / "long.ini";
  write(cfg, tiny_config(dir / "corpus.txt", steps, 0));
  std::string out;
  ASSERT_EQ(run(kCli + " train --quiet --config " + q(cfg) + " --out " + q(dir / "whole"), &out), 0)
      << out;
  const pid_t pid = spawn_train("--config " + q(cfg) + " --out " + q(dir / "cut"), dir / "cut.log");
  wait_for_rows(dir / "cut", 3);
  kill(pid, sig);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string log = slurp(dir / "cut.log");
  ASSERT_TRUE(WIFEXITED(status)) << "ended by a signal, not by wte: " << log;
  EXPECT_EQ(WEXITSTATUS(status), want_code) << log;
  EXPECT_NE(log.find(std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + " received: finished step"),
            std::string::npos) << log;
  // The hint names the binary as it was run (here by its path, perhaps quoted), then the command.
  const size_t hint = log.find("continue with: ");
  EXPECT_NE(hint, std::string::npos) << log;
  EXPECT_NE(log.find(" train --resume auto", hint), std::string::npos) << log;
  const auto found = wte::list_checkpoints((dir / "cut").string());
  ASSERT_EQ(found.size(), 1u) << log;
  EXPECT_GE(found[0].first, 3u);
  EXPECT_LT(found[0].first, steps);
  ASSERT_EQ(run(kCli + " train --quiet --resume auto --out " + q(dir / "cut"), &out), 0) << out;
  EXPECT_TRUE(same_files(wte::checkpoint_path((dir / "whole").string(), steps),
                         wte::checkpoint_path((dir / "cut").string(), steps), &out))
      << out;
}

TEST_F(Reliability, SigintFinishesTheStepCheckpointsAndResumesExactly) {
  stop_and_resume(dir_, SIGINT, 130);
}

TEST_F(Reliability, SigtermFinishesTheStepCheckpointsAndResumesExactly) {
  stop_and_resume(dir_, SIGTERM, 143);
}

// Waits (up to 60 s) for the child `pid` to stop itself at a test hook (state T), sends `sig`
// (pending while it is stopped, delivered on SIGCONT) and SIGCONT, and reaps it into *status.
// Returns whether it was seen stopped.
bool signal_when_paused(pid_t pid, int sig, int* status) {
  bool paused = false;
  for (int i = 0; i < 6000 && !paused; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_s, comm, state;
    stat >> pid_s >> comm >> state;
    paused = state == "T";
    if (!paused) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, sig);
  kill(pid, SIGCONT);
  waitpid(pid, status, 0);
  return paused;
}

// Runs `wte train ARGS` (spawn_train, output to log_path) paused at the test hook `hook`, sends
// `sig` once it has stopped there, and returns its output in *log. Fails the test (fatally)
// unless it paused and ended by exiting, and expects exit status 128 + sig.
void train_signalled_at_hook(const std::string& args, const fs::path& log_path,
                             const std::string& hook, int sig, std::string* log) {
  const pid_t pid = spawn_train(args, log_path, hook);
  int status = 0;
  const bool paused = signal_when_paused(pid, sig, &status);
  *log = slurp(log_path);
  ASSERT_TRUE(paused) << "the run never paused at " << hook << ": " << *log;
  ASSERT_TRUE(WIFEXITED(status)) << "ended by a signal, not by wte: " << *log;
  EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << *log;
}

// SIGINT/SIGTERM before step 1 (data preparation, BPE training): a failed start-up that says it
// was interrupted, exit 128 + signal; the run directory is removed if the run created it (kept,
// untouched by training, if it existed). The run pauses itself (SIGSTOP, a test hook) at the named
// stage, so the signal arrives there and nowhere else.
void stop_before_step_1(const fs::path& dir, const std::string& stage, int sig, bool existed) {
  const fs::path cfg = dir / "long.ini", out_dir = dir / "cut";
  write(cfg, tiny_config(dir / "corpus.txt", 3000, 0));
  if (existed) fs::create_directories(out_dir);
  std::string log;
  train_signalled_at_hook("--config " + q(cfg) + " --out " + q(out_dir), dir / "cut.log",
                          "WTE_TEST_PAUSE_AT_STAGE='" + stage + "'", sig, &log);
  if (::testing::Test::HasFatalFailure()) return;
  const std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
  EXPECT_NE(log.find("wte train: " + name + " received during " + stage +
                     ", before step 1: nothing was trained; "),
            std::string::npos) << log;
  if (existed) {
    EXPECT_NE(log.find("the run directory '" + out_dir.string() + "' existed before and is kept"),
              std::string::npos) << log;
    EXPECT_TRUE(fs::is_directory(out_dir)) << log;
    EXPECT_TRUE(wte::list_checkpoints(out_dir.string()).empty()) << log;
  } else {
    EXPECT_NE(log.find("removed the run directory '" + out_dir.string() + "' it had created"),
              std::string::npos) << log;
    EXPECT_FALSE(fs::exists(out_dir)) << log;
  }
}

TEST_F(Reliability, SigintDuringBpeTrainingRemovesTheRunDirectoryItCreated) {
  stop_before_step_1(dir_, "data preparation (training the BPE tokenizer)", SIGINT, false);
}

TEST_F(Reliability, SigtermAfterTheRunFilesKeepsADirectoryThatExisted) {
  stop_before_step_1(dir_, "start-up (writing the run files)", SIGTERM, true);
}

// a SIGTERM during an --overwrite start-up, after the earlier run's
// checkpoints were deleted, said only that the directory "existed before and is kept".
TEST_F(Reliability, AnInterruptedOverwriteSaysTheEarlierRunIsGone) {
  train("cut", 2, 1);
  const fs::path cfg = config("long", 3000, 0), out_dir = dir_ / "cut";
  std::string log;
  train_signalled_at_hook("--overwrite --config " + q(cfg) + " --out " + q(out_dir),
                          dir_ / "cut.log",
                          "WTE_TEST_PAUSE_AT_STAGE='start-up (writing the run files)'", SIGTERM,
                          &log);
  if (HasFatalFailure()) return;
  EXPECT_NE(log.find("the run directory '" + out_dir.string() + "' existed before and is kept, "
                     "but --overwrite had already deleted the earlier run's checkpoints"),
            std::string::npos) << log;
  EXPECT_TRUE(wte::list_checkpoints(out_dir.string()).empty()) << log;
}

// SIGINT/SIGTERM in the last step (before its stop check: the step
// finishes) or after it (during its final checkpoint write): the run is complete; it ends with the
// summary, says the run is complete (no "continue with"), exits 128 + signal, and --resume auto
// then has nothing to train. The run pauses itself in a checkpoint write (a test hook) where the
// signal is sent.
void signal_in_the_last_step(const fs::path& dir, int sig, const std::string& hook) {
  const size_t steps = 4;
  const fs::path cfg = dir / "short.ini", out_dir = dir / "run";
  write(cfg, tiny_config(dir / "corpus.txt", steps, 0));
  std::string log;
  train_signalled_at_hook("--config " + q(cfg) + " --out " + q(out_dir), dir / "run.log", hook,
                          sig, &log);
  if (::testing::Test::HasFatalFailure()) return;
  const std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
  EXPECT_NE(log.find("final validation loss"), std::string::npos) << log;
  EXPECT_NE(log.find("wte train: " + name + " received in the last step: the run is complete "
                     "(step 4 of 4, final checkpoint " +
                     wte::checkpoint_path(out_dir.string(), steps) + "); nothing to continue"),
            std::string::npos) << log;
  EXPECT_EQ(log.find("continue with"), std::string::npos) << log;
  std::string out;
  ASSERT_EQ(run(kCli + " train --resume auto --out " + q(out_dir), &out), 0) << out;
  EXPECT_NE(out.find("is complete"), std::string::npos) << out;
}

TEST_F(Reliability, SigtermBeforeTheLastStepsStopCheckCompletesTheRunAndSaysSo) {
  // Sent during the last step's evaluation, before its stop check.
  signal_in_the_last_step(dir_, SIGTERM, "WTE_TEST_PAUSE_AT_STAGE='evaluation after step 4'");
}

TEST_F(Reliability, SigintDuringTheFinalCheckpointCompletesTheRunAndSaysSo) {
  // Sent during the final checkpoint write.
  signal_in_the_last_step(dir_, SIGINT, "WTE_TEST_PAUSE_IN_CHECKPOINT_WRITE=4");
}

// a SIGINT/SIGTERM during a periodic evaluation, or during a periodic
// checkpoint's write, trained one more step before it stopped. Now the run stops after the step
// it was in: its checkpoint is that step's, and metrics.csv ends with that step.
void signal_after_step_2(const fs::path& dir, int sig, const std::string& hook, size_t interval) {
  const size_t steps = 6;
  const fs::path cfg = dir / "eval.ini", out_dir = dir / "run";
  std::string text = tiny_config(dir / "corpus.txt", steps, interval);
  const std::string no_eval = "eval_interval = 0";
  text.replace(text.find(no_eval), no_eval.size(), "eval_interval = 2");
  write(cfg, text);
  std::string log;
  train_signalled_at_hook("--config " + q(cfg) + " --out " + q(out_dir), dir / "run.log", hook,
                          sig, &log);
  if (::testing::Test::HasFatalFailure()) return;
  const std::string ckpt = wte::checkpoint_path(out_dir.string(), 2);
  EXPECT_NE(log.find(std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") +
                     " received: finished step 2 of 6 and wrote checkpoint " + ckpt),
            std::string::npos) << log;
  const auto found = wte::list_checkpoints(out_dir.string());
  ASSERT_EQ(found.size(), 1u) << log;
  EXPECT_EQ(found[0].first, 2u) << log;
  const std::string metrics = slurp(out_dir / "metrics.csv");
  EXPECT_EQ(metrics.find("\n3,"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\n2,"), std::string::npos) << metrics;
}

TEST_F(Reliability, SigtermDuringAPeriodicEvaluationStopsAfterThatStep) {
  signal_after_step_2(dir_, SIGTERM, "WTE_TEST_PAUSE_AT_STAGE='evaluation after step 2'", 0);
}

TEST_F(Reliability, SigintDuringAPeriodicCheckpointStopsAfterThatStep) {
  signal_after_step_2(dir_, SIGINT, "WTE_TEST_PAUSE_IN_CHECKPOINT_WRITE=2", 2);
}

// a second SIGINT during the start-up ends the process at once, and says
// what it leaves and what to do. The run pauses itself at a stage, then once more after the first
// signal was recorded (test hooks), so the second signal is a second request.
TEST_F(Reliability, ASecondSigintDuringStartUpSaysWhatItLeaves) {
  const fs::path cfg = config("long", 3000, 0), out_dir = dir_ / "cut";
  const pid_t pid = spawn_train("--config " + q(cfg) + " --out " + q(out_dir), dir_ / "cut.log",
                                "WTE_TEST_PAUSE_AT_STAGE='data preparation' "
                                "WTE_TEST_SECOND_SIGNAL_PAUSE=1");
  // Waits until the process is stopped and its log holds `text` (or 60 s pass).
  auto wait_paused = [&](const std::string& text) {
    for (int i = 0; i < 6000; ++i) {
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string pid_s, comm, state;
      stat >> pid_s >> comm >> state;
      if (state == "T" && slurp(dir_ / "cut.log").find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  const bool first = wait_paused("test pause before the stop check");
  kill(pid, SIGINT);
  kill(pid, SIGCONT);
  const bool second = first && wait_paused("test pause after the first signal");
  kill(pid, SIGINT);
  kill(pid, SIGCONT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string log = slurp(dir_ / "cut.log");
  ASSERT_TRUE(first && second) << "the run did not pause twice: " << log;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << "a second SIGINT ends it: " << log;
  EXPECT_NE(log.find("wte train: stopped at once by a second signal, before step 1: nothing was "
                     "trained; '" + out_dir.string() + "' may hold files the start-up wrote"),
            std::string::npos) << log;
  EXPECT_NE(log.find("this run created it; remove it"), std::string::npos) << log;
}

// SIGPIPE (`wte train | head -3`) stops the run as SIGTERM does, with a
// message on stderr and exit 141: in the start-up, the run directory it created is removed; later,
// after a step and a checkpoint.
TEST_F(Reliability, SigpipeStopsTheRunAsSigtermDoes) {
  const fs::path cfg = config("long", 3000, 0), out_dir = dir_ / "cut";
  write(dir_ / "pipe.sh", "\"$1\" train --config \"$2\" --out \"$3\" 2> \"$4\" | head -3 > /dev/null\n"
                          "echo \"rc=${PIPESTATUS[0]}\"\n");
  std::string out;
  run("bash " + q(dir_ / "pipe.sh") + " " + kCli + " " + q(cfg) + " " + q(out_dir) + " " +
          q(dir_ / "err.log"), &out);
  const std::string err = slurp(dir_ / "err.log");
  EXPECT_NE(out.find("rc=141"), std::string::npos) << out << err;
  ASSERT_NE(err.find("wte train: SIGPIPE received"), std::string::npos) << err;
  if (err.find("before step 1: nothing was trained") != std::string::npos) {
    EXPECT_NE(err.find("removed the run directory '" + out_dir.string() + "'"), std::string::npos)
        << err;
    EXPECT_FALSE(fs::exists(out_dir)) << err;
  } else {
    const size_t hint = err.find("continue with: ");
    EXPECT_NE(hint, std::string::npos) << err;
    EXPECT_NE(err.find(" train --resume auto", hint), std::string::npos) << err;
    EXPECT_EQ(wte::list_checkpoints(out_dir.string()).size(), 1u) << err;
  }
}

// a --config that blocks (a FIFO nobody writes to) is read before the run
// directory and the stop handlers exist: the first SIGTERM ends wte, and nothing is left behind.
TEST_F(Reliability, AConfigThatBlocksEndsAtTheFirstSignalAndLeavesNothing) {
  const fs::path fifo = dir_ / "fifo.ini", out_dir = dir_ / "d";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const pid_t pid = spawn_train("--config " + q(fifo) + " --out " + q(out_dir), dir_ / "d.log");
  // Blocked in open(2) of the FIFO, waiting for a writer.
  bool blocked = false;
  for (int i = 0; i < 6000 && !blocked; ++i) {
    std::ifstream wchan("/proc/" + std::to_string(pid) + "/wchan");
    std::string w;
    wchan >> w;
    blocked = w.find("fifo") != std::string::npos || w.find("partner") != std::string::npos ||
              w.find("pipe") != std::string::npos;
    if (!blocked) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGTERM);
  int status = 0;
  bool ended = false;
  for (int i = 0; i < 2000 && !ended; ++i) {
    ended = waitpid(pid, &status, WNOHANG) == pid;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!ended) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  EXPECT_TRUE(blocked) << "never saw wte blocked on the FIFO: " << slurp(dir_ / "d.log");
  EXPECT_TRUE(ended) << "the first SIGTERM was swallowed: " << slurp(dir_ / "d.log");
  EXPECT_FALSE(fs::exists(out_dir)) << slurp(dir_ / "d.log");
}

// ---- 8. Hostile checkpoints (each kind the fuzzer found; fuzz/ explores the rest) ---------------

// Replaces attribute `name` of `obj` in `file` by one of `type` and `dims` (rank 0 = scalar)
// holding `data`.
void replace_attr(hid_t file, const char* obj, const char* name, hid_t type,
                  std::vector<hsize_t> dims, const void* data) {
  hid_t o = H5Oopen(file, obj, H5P_DEFAULT);
  H5Adelete(o, name);
  hid_t space = dims.empty() ? H5Screate(H5S_SCALAR)
                             : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t a = H5Acreate2(o, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, type, data);
  H5Aclose(a);
  H5Sclose(space);
  H5Oclose(o);
}

TEST_F(Reliability, HostileCheckpointsGiveErrorsNamingTheObject) {
  const fs::path ckpt = train("run", 2);
  struct Case {
    std::string name, want;
    std::function<void(hid_t)> edit;
  };
  const int64_t four[4] = {1, 2, 3, 4};
  const std::vector<Case> cases = {
      {"step_array", "attribute 'step' has shape (4,), expected a scalar",
       [&](hid_t f) { replace_attr(f, "/", "step", H5T_STD_I64LE, {4}, four); }},
      {"epoch_array", "/data attribute 'epoch' has shape (4,), expected a scalar",
       [&](hid_t f) { replace_attr(f, "data", "epoch", H5T_STD_I64LE, {4}, four); }},
      {"hash_array", "attribute 'config_fnv1a64' has shape (4,)",
       [&](hid_t f) { replace_attr(f, "/", "config_fnv1a64", H5T_STD_U64LE, {4}, four); }},
      {"lr_string", "/schedule attribute 'lr' is not a float",
       [&](hid_t f) {
         hid_t t = H5Tcopy(H5T_C_S1);
         H5Tset_size(t, 4);
         replace_attr(f, "schedule", "lr", t, {}, "abcd");
         H5Tclose(t);
       }},
      {"format_fixed_string_array", "attribute 'format' has shape (2,)",
       [&](hid_t f) {
         hid_t t = H5Tcopy(H5T_C_S1);
         H5Tset_size(t, 3);
         replace_attr(f, "/", "format", t, {2}, "abcdef");
         H5Tclose(t);
       }},
      {"config_not_string", "dataset 'config/ini' is not a string",
       [&](hid_t f) {
         H5Ldelete(f, "config/ini", H5P_DEFAULT);
         hsize_t d[1] = {3};
         hid_t s = H5Screate_simple(1, d, nullptr);
         hid_t ds = H5Dcreate2(f, "config/ini", H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
         H5Dclose(ds);
         H5Sclose(s);
       }},
      {"config_string_array", "dataset 'config/ini' has shape (2,), expected a scalar string",
       [&](hid_t f) {
         H5Ldelete(f, "config/ini", H5P_DEFAULT);
         hsize_t d[1] = {2};
         hid_t s = H5Screate_simple(1, d, nullptr);
         hid_t t = H5Tcopy(H5T_C_S1);
         H5Tset_size(t, H5T_VARIABLE);
         hid_t ds = H5Dcreate2(f, "config/ini", t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
         H5Dclose(ds);
         H5Tclose(t);
         H5Sclose(s);
       }},
      {"soft_link", "'wpe' is a soft link",
       [&](hid_t f) {
         H5Ldelete(f, "wpe", H5P_DEFAULT);
         H5Lcreate_soft("/wte", f, "wpe", H5P_DEFAULT, H5P_DEFAULT);
       }},
      {"external_link", "'wpe' is an external link",
       [&](hid_t f) {
         H5Ldelete(f, "wpe", H5P_DEFAULT);
         H5Lcreate_external("elsewhere.h5", "/wpe", f, "wpe", H5P_DEFAULT, H5P_DEFAULT);
       }},
      {"forged_order", "dataset 'order' has shape (1099511627776,)",
       [&](hid_t f) {
         H5Ldelete(f, "data/order", H5P_DEFAULT);
         hsize_t d[1] = {hsize_t{1} << 40};
         hid_t s = H5Screate_simple(1, d, nullptr);
         hid_t ds = H5Dcreate2(f, "data/order", H5T_STD_U32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
         H5Dclose(ds);
         H5Sclose(s);
       }},
      {"num_samples_huge", "/data attribute 'num_samples' is 4611686018427387904, more than",
       [&](hid_t f) {
         const int64_t v = int64_t{1} << 62;
         replace_attr(f, "data", "num_samples", H5T_STD_I64LE, {}, &v);
       }},
      {"wte_without_storage", "dataset 'wte' claims 0 bytes of storage",
       [&](hid_t f) {
         H5Ldelete(f, "wte", H5P_DEFAULT);
         hsize_t d[2] = {300, 16};
         hid_t s = H5Screate_simple(2, d, nullptr);
         hid_t ds = H5Dcreate2(f, "wte", H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
         H5Dclose(ds);
         H5Sclose(s);
       }},
      {"group_is_dataset", "'optimizer' is a dataset, expected a group",
       [&](hid_t f) {
         H5Ldelete(f, "optimizer", H5P_DEFAULT);
         H5Lcreate_hard(f, "wpe", f, "optimizer", H5P_DEFAULT, H5P_DEFAULT);
       }},
  };
  for (const Case& c : cases) {
    const fs::path p = dir_ / (c.name + ".h5");
    hid_t f = open_copy(ckpt, p);
    ASSERT_GE(f, 0);
    c.edit(f);
    H5Fclose(f);
    std::string what = error_of([&] { wte::read_checkpoint_info(p.string()); });
    EXPECT_NE(what.find(c.want), std::string::npos) << c.name << ": " << what;
    std::string out;
    EXPECT_EQ(run(kCli + " inspect " + q(p), &out), 1) << c.name << ": " << out;
  }
}

// ---- 9. Runs that cannot be resumed or that fight ----------------------------------------------

TEST_F(Reliability, ValuesThatRoundToZeroOrInfinityInFloat32AreOutOfRange) {
  auto err = [](const std::string& o) { return error_of([&] { wte::load_config("", {o}); }); };
  EXPECT_NE(err("--optim.eps=1e-50").find("optim.eps = '1e-50' from the command line (--optim.eps) "
                                          "is out of range (it rounds to 0 in float32"),
            std::string::npos)
      << err("--optim.eps=1e-50");
  EXPECT_NE(err("--model.ln_eps=1e-40").find("it is subnormal in float32"), std::string::npos);
  EXPECT_NE(err("--optim.lr=1e-39").find("subnormal"), std::string::npos);
  EXPECT_NE(err("--optim.grad_clip=1e300").find("out of range"), std::string::npos);
  EXPECT_EQ(err("--optim.eps=1e-30"), "");
  EXPECT_EQ(err("--optim.weight_decay=0"), "");
  EXPECT_NE(err("--train.steps=9223372036854775807").find("out of range"), std::string::npos);
}

TEST_F(Reliability, ADirectoryWithOnlySnapshotsResumesCleanly) {
  if (!have("h5diff")) GTEST_SKIP() << "h5diff (hdf5-tools) not installed";
  const fs::path whole = train("whole", 4, 0, "--train.snapshot_steps=0");
  const fs::path cut = train("cut", 4, 0, "--train.snapshot_steps=0");
  // As if killed between the step-0 snapshot and the first checkpoint.
  fs::remove(cut);
  ASSERT_TRUE(fs::exists(dir_ / "cut" / "snapshot_00000000.h5"));
  std::string out;
  // Without --config the run directory's own config.ini is the run's config.
  ASSERT_EQ(run(kCli + " train --resume auto --out " + q(dir_ / "cut"), &out), 0) << out;
  EXPECT_NE(out.find("starting from step 0"), std::string::npos) << out;
  EXPECT_TRUE(same_files(whole, cut, &out)) << out;
  // --resume auto of a finished run is success, with nothing to do.
  ASSERT_EQ(run(kCli + " train --resume auto --out " + q(dir_ / "cut"), &out), 0) << out;
  EXPECT_NE(out.find("is complete"), std::string::npos) << out;
}

TEST_F(Reliability, ASecondRunOnALockedDirectoryFailsAndTheFirstIsUnharmed) {
  const size_t steps = 300;
  const fs::path cfg = config("long", steps, 100);
  // The first run stops itself (SIGSTOP, a test hook) while it writes checkpoint 100: it holds
  // the lock for as long as the test needs.
  const pid_t pid = spawn_train("--config " + q(cfg) + " --out " + q(dir_ / "run"), dir_ / "first.log",
                                "WTE_TEST_PAUSE_IN_CHECKPOINT_WRITE=100");
  for (int i = 0; i < 6000; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_s, comm, state;
    stat >> pid_s >> comm >> state;
    if (state == "T") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string out;
  EXPECT_EQ(run(kCli + " train --resume auto --config " + q(cfg) + " --out " + q(dir_ / "run"), &out), 1)
      << out;
  EXPECT_NE(out.find("is in use"), std::string::npos) << out;
  EXPECT_EQ(run(kCli + " train --config " + q(cfg) + " --out " + q(dir_ / "run") + " --overwrite", &out), 1)
      << out;
  kill(pid, SIGCONT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << slurp(dir_ / "first.log");
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(dir_ / "first.log");
  // metrics.csv: the header, then steps 1..steps once each, in order.
  std::istringstream m(slurp(dir_ / "run" / "metrics.csv"));
  std::string line;
  std::getline(m, line);
  size_t expect = 1;
  while (std::getline(m, line)) {
    ASSERT_EQ(std::stoul(line.substr(0, line.find(','))), expect) << line;
    ++expect;
  }
  EXPECT_EQ(expect, steps + 1);
}

// a directory, /dev/null or a FIFO where a file is read is named as
// what it is, with the option; a run directory given for a checkpoint says what to give instead.
TEST_F(Reliability, ADirectoryOrDeviceWhereAFileIsReadIsNamedWithItsOption) {
  const fs::path ckpt = train("run", 2);
  const std::string run_dir = (dir_ / "run").string();
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  std::string out;
  const std::string hs = kCli + " hidden-states --checkpoint " + q(ckpt) + " --text hi --data ";
  EXPECT_EQ(run(hs + "/etc", &out), 1) << out;
  EXPECT_NE(out.find("--data '/etc' is a directory, not a file"), std::string::npos) << out;
  EXPECT_EQ(run(hs + "/dev/null", &out), 1) << out;
  EXPECT_NE(out.find("--data '/dev/null' is not a regular file (a character device)"),
            std::string::npos) << out;
  EXPECT_EQ(run(hs + q(dir_ / "fifo"), &out), 1) << out;
  EXPECT_NE(out.find("is not a regular file (a FIFO)"), std::string::npos) << out;
  // A run directory for --resume: continue it with --resume auto. (--init-from takes a run
  // directory: its newest checkpoint, tests/train/test_init_from.cc.)
  EXPECT_EQ(run(kCli + " train --resume " + q(run_dir), &out), 1) << out;
  EXPECT_NE(out.find("--resume '" + run_dir + "' is a directory, not a file; to continue the run "
                     "in that directory, give --resume auto --out " + run_dir),
            std::string::npos) << out;
  const std::string empty_dir = (dir_ / "empty").string();
  fs::create_directories(empty_dir);
  EXPECT_EQ(run(kCli + " train --init-from " + q(empty_dir) + " --out " + q(dir_ / "new"), &out), 1)
      << out;
  EXPECT_NE(out.find("--init-from '" + empty_dir + "' is a directory that holds no "
                     "checkpoint_<step>.h5"),
            std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "new"));
}

TEST_F(Reliability, AFailingMetricsWriteStopsTheRun) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  fs::create_directories(dir_ / "o");
  fs::create_symlink("/dev/full", dir_ / "o" / "metrics.csv");
  std::string out;
  // --overwrite: a metrics.csv that no wte run wrote is refused without it.
  EXPECT_EQ(run(kCli + " train --config " + q(config("c", 3, 0)) + " --out " + q(dir_ / "o") +
                    " --overwrite", &out), 1)
      << out;
  EXPECT_NE(out.find("metrics.csv' failed: No space left on device (the disk is full)"),
            std::string::npos) << out;
}

}  // namespace
