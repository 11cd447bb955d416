// `wte train --init-from CHECKPOINT`: a fresh run (step 0, new AdamW, new data order) from a
// checkpoint's weights, through the built binary as a user runs it. The imported-GPT-2 case on KJV
// is in tests/io/test_hf_gpt2_interop.py.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/model.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using wte::test::run;
using wte::test::temp_dir;
using wte::test::write;

namespace {

const std::string kCli = WTE_CLI;

std::string config_text(const fs::path& corpus) {
  return "[model]\nvocab_size = 300\nd_model = 16\nn_ctx = 16\nn_layer = 1\nn_head = 2\n"
         "[data]\ntext = " + corpus.string() + "\nseq_len = 16\n"
         "[train]\nbatch_size = 4\nsteps = 40\neval_interval = 0\nlog_interval = 10\n"
         "[optim]\nlr = 0.01\nmin_lr = 0.001\nwarmup_steps = 5\n";
}

// train_loss of every row of DIR/metrics.csv, in step order.
std::vector<double> train_losses(const fs::path& dir) {
  std::ifstream in(dir / "metrics.csv");
  std::string line;
  std::getline(in, line);  // header
  std::vector<double> out;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string step, loss;
    std::getline(row, step, ',');
    std::getline(row, loss, ',');
    out.push_back(std::stod(loss));
  }
  return out;
}

double mean(const std::vector<double>& v, size_t first, size_t n) {
  double s = 0;
  for (size_t i = first; i < first + n; ++i) s += v[i];
  return s / static_cast<double>(n);
}

class InitFrom : public ::testing::Test {
 protected:
  // One trained run shared by the tests of this file (each ctest process trains its own).
  void SetUp() override {
    dir_ = temp_dir("init_from_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    write(dir_ / "corpus.txt", wte::test::tiny_corpus());
    write(dir_ / "c.ini", config_text(dir_ / "corpus.txt"));
    std::string out;
    ASSERT_EQ(run(kCli + " train --config " + (dir_ / "c.ini").string() + " --out " +
                      (dir_ / "first").string() + " --quiet",
                  &out),
              0)
        << out;
    ckpt_ = wte::checkpoint_path((dir_ / "first").string(), 40);
    ASSERT_TRUE(fs::exists(ckpt_)) << out;
  }
  fs::path dir_;
  std::string ckpt_;
};

}  // namespace

// The second run starts from the first run's weights: its first steps' losses are near where the
// first run ended, far below the first run's start from noise; its step counter, schedule and
// optimizer start at 0 (it writes checkpoint_00000010.h5 after 10 steps, resumable on its own).
TEST_F(InitFrom, StartsFromTheCheckpointsWeightsAtStepZero) {
  std::string out;
  ASSERT_EQ(run(kCli + " train --config " + (dir_ / "c.ini").string() + " --init-from " + ckpt_ +
                    " --train.steps=10 --out " + (dir_ / "second").string(),
                &out),
            0)
      << out;
  EXPECT_NE(out.find("init-from: " + ckpt_ + " (its step 40): its weights, a new optimizer, step 0"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("step      1/10"), std::string::npos) << out;
  const std::vector<double> first = train_losses(dir_ / "first");
  const std::vector<double> second = train_losses(dir_ / "second");
  ASSERT_EQ(first.size(), 40u);
  ASSERT_EQ(second.size(), 10u);
  const double first_start = mean(first, 0, 3), first_end = mean(first, 37, 3),
               second_start = mean(second, 0, 3);
  std::printf("first run: loss %.4f at steps 1-3, %.4f at steps 38-40; second run (init-from): "
              "%.4f at steps 1-3\n", first_start, first_end, second_start);
  EXPECT_LT(second_start, first_end + 0.3 * (first_start - first_end));
  const wte::CheckpointInfo info =
      wte::read_checkpoint_info(wte::checkpoint_path((dir_ / "second").string(), 10));
  EXPECT_EQ(info.step, 10);
  EXPECT_EQ(info.optimizer_step, 10);
  EXPECT_TRUE(info.resumable());
  // The run with init_weights instead (same config and seed) starts where the first run started.
  ASSERT_EQ(run(kCli + " train --config " + (dir_ / "c.ini").string() +
                    " --train.steps=3 --quiet --out " + (dir_ / "noise").string(),
                &out),
            0)
      << out;
  EXPECT_NEAR(mean(train_losses(dir_ / "noise"), 0, 3), first_start, 1e-3);
}

// Without --config the checkpoint's own config is used; the checkpoint's tokenizer is kept.
TEST_F(InitFrom, WithoutConfigUsesTheCheckpointsConfig) {
  std::string out;
  ASSERT_EQ(run(kCli + " train --init-from " + ckpt_ + " --train.steps=2 --out " +
                    (dir_ / "own").string(),
                &out),
            0)
      << out;
  EXPECT_NE(out.find("tokenizer: the checkpoint's (300 tokens)"), std::string::npos) << out;
  EXPECT_EQ(wte::test::slurp(dir_ / "own" / "tokenizer" / "vocab.bpe"),
            wte::test::slurp(dir_ / "first" / "tokenizer" / "vocab.bpe"));
}

// A run directory names its newest checkpoint, as --checkpoint does everywhere: the run starts
// from the same weights as from the file itself.
TEST_F(InitFrom, ARunDirectoryStartsFromItsNewestCheckpoint) {
  std::string out;
  ASSERT_EQ(run(kCli + " train --init-from " + (dir_ / "first").string() +
                    " --train.steps=2 --out " + (dir_ / "from_dir").string(),
                &out),
            0)
      << out;
  EXPECT_NE(out.find("init-from: " + ckpt_ + " (its step 40)"), std::string::npos) << out;
  ASSERT_EQ(run(kCli + " train --init-from " + ckpt_ + " --train.steps=2 --out " +
                    (dir_ / "from_file").string(),
                &out),
            0)
      << out;
  EXPECT_EQ(train_losses(dir_ / "from_dir"), train_losses(dir_ / "from_file"));
}

// Every model key that differs is named with both values; nothing is trained or written.
TEST_F(InitFrom, ModelDifferencesAreNamedAndNothingIsWritten) {
  std::string out;
  const fs::path run_dir = dir_ / "bad";
  EXPECT_EQ(run(kCli + " train --config " + (dir_ / "c.ini").string() + " --init-from " + ckpt_ +
                    " --model.d_model=32 --model.n_layer=2 --model.tie_embeddings=false --out " +
                    run_dir.string(),
                &out),
            2)  // values that cannot be combined with the checkpoint's: bad usage
      << out;
  EXPECT_NE(out.find("3 model setting(s) of the config differ from the checkpoint's"),
            std::string::npos) << out;
  // Each with where the new value came from, so the user knows which setting to change.
  EXPECT_NE(out.find("model.d_model: checkpoint 16, now 32 (from the command line: "
                     "--model.d_model=32)"), std::string::npos) << out;
  EXPECT_NE(out.find("model.n_layer: checkpoint 1, now 2 (from the command line: "
                     "--model.n_layer=2)"), std::string::npos) << out;
  EXPECT_NE(out.find("model.tie_embeddings: checkpoint true, now false (from the command line: "
                     "--model.tie_embeddings=false)"), std::string::npos) << out;
  // The hint names exactly the differing keys with the checkpoint's values; all came from the
  // command line, so leaving out --config would not help and is not suggested.
  EXPECT_NE(out.find("(set them to the checkpoint's values: --model.d_model=16 --model.n_layer=1 "
                     "--model.tie_embeddings=true; each was set on the command line)"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("leave out --config"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(run_dir / "metrics.csv"));
  // Without --config only a command-line key can differ; the hint names it and no --config.
  EXPECT_EQ(run(kCli + " train --init-from " + ckpt_ + " --model.d_model=8 --out " +
                    (dir_ / "bad2").string(),
                &out),
            2)
      << out;
  EXPECT_NE(out.find("model.d_model: checkpoint 16, now 8 (from the command line: "
                     "--model.d_model=8)\n(set them to the checkpoint's "
                     "values: --model.d_model=16; without --config"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("n_layer"), std::string::npos) << out;
  EXPECT_EQ(out.find("leave out --config"), std::string::npos) << out;
  EXPECT_TRUE(wte::list_checkpoints(run_dir.string()).empty());
}

TEST_F(InitFrom, ExcludesResumeAndNeedsAFile) {
  std::string out;
  EXPECT_EQ(run(kCli + " train --init-from " + ckpt_ + " --resume " + ckpt_, &out), 2) << out;
  EXPECT_NE(out.find("--init-from and --resume exclude each other"), std::string::npos) << out;
  EXPECT_EQ(run(kCli + " train --config " + (dir_ / "c.ini").string() + " --init-from " +
                    (dir_ / "missing.h5").string() + " --out " + (dir_ / "m").string(),
                &out),
            1)
      << out;
  EXPECT_NE(out.find("missing.h5"), std::string::npos) << out;
}
