// Exact resume from HDF5 checkpoints: stop-and-resume equals an uninterrupted run bit for
// bit, a SIGKILL during a checkpoint write loses nothing, and every kind of bad file is refused with
// its own error and nothing written. Runs the built `wte` (WTE_CLI) as a user does; threads pinned
// to 2 (oneDNN's results are bit-identical for a fixed thread count).
#include <H5Cpp.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "wte/rng.h"
#include "wte/tokenizer.h"
#include "src/model/matmul.h"
#include "tests/test_util.h"

extern char** environ;

namespace fs = std::filesystem;
using wte::Config;
using wte::Error;
using wte::test::run;
using wte::test::slurp;
using wte::test::temp_dir;
using wte::test::tiny_corpus;
using wte::test::write;

namespace {

const std::string kCli = WTE_CLI;

bool have(const char* tool) {
  return std::system((std::string("command -v ") + tool + " > /dev/null 2>&1").c_str()) == 0;
}

constexpr size_t kT = 16;

// n_layer > 0 adds transformer blocks (2 heads of 8 channels): the block tensors and their AdamW
// moments must round-trip through checkpoints bit for bit too.
std::string tiny_config(const fs::path& corpus, size_t batch_size, size_t warmup,
                        size_t n_layer = 0, bool bf16 = false, bool tiled = false) {
  return "[model]\nvocab_size = 300\nd_model = 16\nn_ctx = 16\nn_layer = " +
         std::to_string(n_layer) + "\n" + (n_layer > 0 ? "n_head = 2\n" : std::string()) +
         (bf16 ? "matmul_precision = bf16\n" : "") + (tiled ? "attention = tiled\n" : "") +
         "[data]\ntext = " + corpus.string() + "\nseq_len = 16\nval_fraction = 0.1\n"
         "[train]\nbatch_size = " + std::to_string(batch_size) +
         "\nsteps = 8\neval_interval = 4\neval_tokens = 256\nlog_interval = 1\nsnapshot_steps =\n"
         "[optim]\nlr = 0.01\nmin_lr = 0.001\nwarmup_steps = " + std::to_string(warmup) +
         "\nweight_decay = 0.1\n[checkpoint]\ninterval = 0\n";
}

// metrics.csv's data rows (the header skipped), each split at its commas.
std::vector<std::vector<std::string>> metrics_csv_rows(const fs::path& path) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(slurp(path));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ',')) cols.push_back(c);
    rows.push_back(std::move(cols));
  }
  return rows;
}

// Rows of metrics.csv as step -> "train_loss,val_loss,lr,grad_norm" (timings dropped).
std::map<int, std::string> metric_rows(const fs::path& path) {
  std::map<int, std::string> rows;
  for (const auto& cols : metrics_csv_rows(path)) {
    if (cols.size() < 5) continue;
    rows[std::stoi(cols[0])] = cols[1] + "," + cols[2] + "," + cols[3] + "," + cols[4];
  }
  return rows;
}

// metrics.csv's elapsed_s column (the 7th) as step -> seconds.
std::map<int, double> elapsed_column(const fs::path& path) {
  std::map<int, double> rows;
  for (const auto& cols : metrics_csv_rows(path)) {
    if (cols.size() < 7) continue;
    rows[std::stoi(cols[0])] = std::stod(cols[6]);
  }
  return rows;
}

// elapsed_s is the run's wall time across resumes: a resumed process goes on from the last kept
// row's value, so the column never decreases, at a resume included. `steps`: the rows expected.
void expect_elapsed_non_decreasing(const fs::path& metrics, size_t steps) {
  const std::map<int, double> elapsed = elapsed_column(metrics);
  ASSERT_EQ(elapsed.size(), steps) << slurp(metrics);
  double before = 0;
  for (const auto& [step, seconds] : elapsed) {
    EXPECT_GE(seconds, before) << "elapsed_s decreases at step " << step << ":\n" << slurp(metrics);
    before = seconds;
  }
  EXPECT_GT(before, 0.0) << slurp(metrics);
}

// Parameters, AdamW m and v and step of a checkpoint, loaded through wte.
struct Loaded {
  std::vector<float> params, m, v;
  int64_t opt_step = 0;
  wte::CheckpointInfo info;
};
Loaded load(const std::string& path) {
  const wte::CheckpointInfo info = wte::read_checkpoint_info(path);
  const Config cfg = wte::parse_config(info.config_ini, path);
  wte::Model model(cfg.model);
  wte::AdamW opt(model);
  Loaded out;
  out.info = wte::load_checkpoint(path, model, &opt);
  out.params.assign(model.param_data(), model.param_data() + model.num_parameters());
  out.m.assign(opt.m(), opt.m() + opt.size());
  out.v.assign(opt.v(), opt.v() + opt.size());
  out.opt_step = opt.step();
  return out;
}

// Every parameter and optimizer dataset bit-identical, through wte and (if installed) h5diff.
void expect_same_training_state(const std::string& a, const std::string& b) {
  const Loaded la = load(a), lb = load(b);
  ASSERT_EQ(la.params.size(), lb.params.size());
  EXPECT_EQ(0, std::memcmp(la.params.data(), lb.params.data(), la.params.size() * sizeof(float)))
      << a << " vs " << b << ": parameters differ";
  EXPECT_EQ(0, std::memcmp(la.m.data(), lb.m.data(), la.m.size() * sizeof(float))) << "AdamW m";
  EXPECT_EQ(0, std::memcmp(la.v.data(), lb.v.data(), la.v.size() * sizeof(float))) << "AdamW v";
  EXPECT_EQ(la.opt_step, lb.opt_step);
  EXPECT_EQ(la.info.step, lb.info.step);
  EXPECT_EQ(la.info.resume.data.order, lb.info.resume.data.order);
  EXPECT_EQ(la.info.resume.data.rng_state, lb.info.resume.data.rng_state);
  EXPECT_EQ(la.info.resume.data.cursor, lb.info.resume.data.cursor);
  EXPECT_EQ(la.info.resume.data.epoch, lb.info.resume.data.epoch);
  if (!have("h5diff")) return;
  for (const wte::TensorSpec& t : la.info.tensors) {
    for (const std::string& obj : {"/" + t.name, "/optimizer/m/" + t.name, "/optimizer/v/" + t.name}) {
      std::string out;
      // h5diff without -d/-p compares values exactly; exit 0 = identical.
      EXPECT_EQ(run("h5diff '" + a + "' '" + b + "' '" + obj + "'", &out), 0) << obj << ": " << out;
    }
  }
  for (const char* obj : {"/data/order", "/data/rng_state"}) {
    std::string out;
    EXPECT_EQ(run("h5diff '" + a + "' '" + b + "' " + obj, &out), 0) << obj << ": " << out;
  }
}

class Resume : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir(std::string("resume_") +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    corpus_ = dir_ / "corpus.txt";
    write(corpus_, tiny_corpus());
  }
  void config(size_t batch_size, size_t warmup = 3) {
    write(dir_ / "tiny.ini", tiny_config(corpus_, batch_size, warmup, n_layer_, bf16_, tiled_));
  }
  // wte train with the tiny config, 2 threads, into dir_/out. Returns the exit code.
  int train(const std::string& out, const std::string& extra, std::string* output,
            const std::string& env = "") {
    return run(env + " " + kCli + " train --config '" + (dir_ / "tiny.ini").string() +
                   "' --out '" + (dir_ / out).string() + "' --train.threads=2 " + extra,
               output);
  }
  std::string ckpt(const std::string& out, int step) {
    return wte::checkpoint_path((dir_ / out).string(), static_cast<uint64_t>(step));
  }
  fs::path dir_, corpus_;
  size_t n_layer_ = 0;
  bool bf16_ = false;  // model.matmul_precision = bf16
  bool tiled_ = false;  // model.attention = tiled
};

// The exact-resume cases, for the zero-block model, with two transformer blocks (resume stays
// bit-exact with blocks), and with two blocks and bf16 GEMMs (a bf16 run resumes bit-exactly;
// float32 GEMMs where this CPU has no native bf16 matmul); the block cases also with the tiled
// attention.
struct ResumeCase {
  size_t n_layer;
  bool bf16;
  bool tiled = false;  // model.attention = tiled (else auto: dense at these 16 tokens)
};
class ResumeExact : public Resume, public ::testing::WithParamInterface<ResumeCase> {
 protected:
  void SetUp() override {
    Resume::SetUp();
    n_layer_ = GetParam().n_layer;
    bf16_ = GetParam().bf16;
    tiled_ = GetParam().tiled;
  }
};

// The number of training samples (windows of T+1 tokens) the trainer will see for this corpus.
size_t num_train_samples(const std::string& corpus) {
  const wte::TextSplit split = wte::split_documents(corpus, 0.1);
  const wte::Tokenizer tok = wte::Tokenizer::train(split.train, 300);
  return (tok.encode(split.train).size() - 1) / kT;
}

// Parses a WTE_TEST_TRACE_SAMPLES file: step -> [(epoch, sample)].
std::map<int, std::vector<std::pair<uint64_t, uint64_t>>> read_trace(const fs::path& path) {
  std::map<int, std::vector<std::pair<uint64_t, uint64_t>>> steps;
  std::istringstream in(slurp(path));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    int step = 0;
    ls >> step;
    std::string item;
    auto& v = steps[step];
    EXPECT_TRUE(v.empty()) << "step " << step << " traced twice";
    while (ls >> item) {
      const size_t colon = item.find(':');
      v.emplace_back(std::stoull(item.substr(0, colon)), std::stoull(item.substr(colon + 1)));
    }
  }
  return steps;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST_P(ResumeExact, EightStepsStraightEqualThreeThenFiveInANewProcess) {
  config(4);
  std::string out;
  ASSERT_EQ(train("straight", "", &out), 0) << out;
  if (GetParam().bf16 && wte::bf16_gemm_support().native) {  // the bf16 GEMMs really ran
    EXPECT_NE(out.find("gemms: bf16 inputs"), std::string::npos) << out;
  }
  // Stopped after step 3 of 8 (--stop-at: a checkpoint, then exit, as a pre-empted job).
  ASSERT_EQ(train("stopped", "--stop-at=3", &out), 0) << out;
  EXPECT_NE(out.find("stopped at step 3 of 8"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(ckpt("stopped", 8)));
  // A new process, without --config: the checkpoint's own config, with the log interval changed
  // (a key that may change on resume).
  ASSERT_EQ(run(kCli + " train --resume '" + ckpt("stopped", 3) + "' --train.log_interval=3", &out),
            0)
      << out;
  EXPECT_NE(out.find("resumed: " + ckpt("stopped", 3) + " at step 3"), std::string::npos) << out;
  expect_same_training_state(ckpt("straight", 8), ckpt("stopped", 8));
  if (GetParam().n_layer > 0) {  // the blocks really are in the checkpoint, with moments that moved
    const Loaded l = load(ckpt("stopped", 8));
    const auto& t = l.info.tensors;
    const auto it = std::find_if(t.begin(), t.end(), [](const wte::TensorSpec& s) {
      return s.name == "h1/mlp/c_proj/w";
    });
    ASSERT_NE(it, t.end());
    // GPT-2's order: the last block's last tensor, then ln_f (and an untied lm_head).
    EXPECT_EQ(std::next(it)->name, "h1/mlp/c_proj/b");
    EXPECT_EQ(std::next(it, 2)->name, "ln_f/g");
    EXPECT_NE(l.v[it->offset], 0.0f);
  }
  // The same loss (9 significant digits: float32 exactly), lr and grad norm at every step.
  const auto a = metric_rows(dir_ / "straight" / "metrics.csv");
  const auto b = metric_rows(dir_ / "stopped" / "metrics.csv");
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(a, b);
  // Resumed after step 3: steps 4..8 continue the clock of steps 1..3.
  expect_elapsed_non_decreasing(dir_ / "stopped" / "metrics.csv", 8);
}

TEST_P(ResumeExact, TwoInterruptionsMidEpochKeepTheShuffledOrderAndEachSampleOncePerEpoch) {
  // B chosen so an epoch is 3.5 steps: steps 3 and 5 stop in mid-epoch, step 4 straddles epochs.
  const size_t n = num_train_samples(tiny_corpus());
  const size_t B = (2 * n + 6) / 7;
  config(B);
  const fs::path trace_a = dir_ / "trace_straight.txt", trace_b = dir_ / "trace_stopped.txt";
  std::string out;
  ASSERT_EQ(train("straight", "", &out, "WTE_TEST_TRACE_SAMPLES='" + trace_a.string() + "'"), 0)
      << out;
  const std::string env_b = "WTE_TEST_TRACE_SAMPLES='" + trace_b.string() + "'";
  ASSERT_EQ(train("stopped", "--stop-at=3", &out, env_b), 0) << out;
  ASSERT_EQ(train("stopped", "--stop-at=5 --resume '" + ckpt("stopped", 3) + "'", &out, env_b),
            0)
      << out;
  ASSERT_EQ(train("stopped", "--resume auto", &out, env_b), 0) << out;
  EXPECT_NE(out.find("resumed: " + ckpt("stopped", 5) + " at step 5"), std::string::npos) << out;

  // The stops really were in mid-epoch, with shuffling on.
  for (int step : {3, 5}) {
    const wte::CheckpointInfo info = wte::read_checkpoint_info(ckpt("stopped", step));
    EXPECT_TRUE(info.resume.data.shuffle);
    EXPECT_GT(info.resume.data.cursor, 0u) << step;
    EXPECT_LT(info.resume.data.cursor, info.resume.data.num_samples) << step;
    EXPECT_EQ(info.resume.data.num_samples, n);
  }
  const auto a = read_trace(trace_a), b = read_trace(trace_b);
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(a, b) << "the batch order differs";
  // Each sample exactly once per epoch: epochs 0 and 1 complete, epoch 2 partial.
  std::map<uint64_t, std::vector<uint64_t>> per_epoch;
  for (const auto& [step, samples] : b)
    for (const auto& [epoch, sample] : samples) per_epoch[epoch].push_back(sample);
  ASSERT_EQ(per_epoch.size(), 3u);
  for (auto& [epoch, samples] : per_epoch) {
    const std::set<uint64_t> unique(samples.begin(), samples.end());
    EXPECT_EQ(unique.size(), samples.size()) << "a sample repeats in epoch " << epoch;
    if (epoch < 2) {
      EXPECT_EQ(samples.size(), n) << "epoch " << epoch;
    }
    EXPECT_LT(*unique.rbegin(), n);
  }
  EXPECT_NE(per_epoch[0], per_epoch[1]) << "shuffle is on: epochs differ in order";
  expect_same_training_state(ckpt("straight", 8), ckpt("stopped", 8));
  EXPECT_EQ(metric_rows(dir_ / "straight" / "metrics.csv"),
            metric_rows(dir_ / "stopped" / "metrics.csv"));
  // Two resumes (after steps 3 and 5): the clock goes on at both.
  expect_elapsed_non_decreasing(dir_ / "stopped" / "metrics.csv", 8);
}

TEST_P(ResumeExact, WarmupTwoPlusTwoEqualsFourStraight) {
  config(4, /*warmup=*/4);
  std::string out;
  ASSERT_EQ(train("straight", "--train.steps=4", &out), 0) << out;
  ASSERT_EQ(train("stopped", "--train.steps=4 --stop-at=2", &out), 0) << out;
  ASSERT_EQ(train("stopped", "--train.steps=4 --resume auto", &out), 0) << out;
  expect_same_training_state(ckpt("straight", 4), ckpt("stopped", 4));
  const auto a = metric_rows(dir_ / "straight" / "metrics.csv");
  const auto b = metric_rows(dir_ / "stopped" / "metrics.csv");
  EXPECT_EQ(a, b);
  // The schedule continued from the restored step: warmup lr·(step)/4 at steps 3 and 4.
  ASSERT_EQ(b.size(), 4u);
  for (int step : {3, 4}) {
    const std::string lr_col = b.at(step).substr(b.at(step).find(',', b.at(step).find(',') + 1) + 1);
    EXPECT_FLOAT_EQ(std::stof(lr_col), 0.01f * static_cast<float>(step) / 4.0f) << b.at(step);
  }
  EXPECT_EQ(load(ckpt("stopped", 4)).opt_step, 4);
}

TEST_P(ResumeExact, SigkillDuringACheckpointWriteLosesNothing) {
  config(4);
  std::string out;
  ASSERT_EQ(train("straight", "--checkpoint.interval=1", &out), 0) << out;
  // Keep-last: with keep_last 3 only the newest three checkpoints remain.
  for (int step = 1; step <= 8; ++step)
    EXPECT_EQ(fs::exists(ckpt("straight", step)), step >= 6) << step;

  // The killed run: stops itself (SIGSTOP) in the middle of writing checkpoint 5.
  const std::string out_dir = (dir_ / "killed").string();
  const std::string log = (dir_ / "killed.log").string();
  std::vector<std::string> args = {kCli, "train", "--config", (dir_ / "tiny.ini").string(),
                                   "--out", out_dir, "--train.threads=2",
                                   "--checkpoint.interval=1", "--quiet"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = {"WTE_TEST_PAUSE_IN_CHECKPOINT_WRITE=5"};
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, kCli.c_str(), &actions, nullptr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, WUNTRACED), pid);
  ASSERT_TRUE(WIFSTOPPED(status)) << "the writer did not pause: " << slurp(log);
  // Mid-write: the temporary file exists with the parameters only; no file under the name.
  const std::string tmp = ckpt("killed", 5) + ".tmp";
  EXPECT_TRUE(fs::exists(tmp));
  EXPECT_FALSE(fs::exists(ckpt("killed", 5)));
  EXPECT_GT(fs::file_size(tmp), 0u);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // The partial file is not a checkpoint; the previous one is whole.
  EXPECT_NE(wte::read_checkpoint_info(ckpt("killed", 4)).step, 0);
  EXPECT_FALSE(fs::exists(ckpt("killed", 5)));

  // --resume auto finds checkpoint 4 (the .tmp is ignored, then removed) and finishes.
  ASSERT_EQ(run(kCli + " train --resume auto --out '" + out_dir + "'", &out), 0) << out;
  EXPECT_NE(out.find("resumed: " + ckpt("killed", 4) + " at step 4"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(tmp));
  expect_same_training_state(ckpt("straight", 8), ckpt("killed", 8));
  EXPECT_EQ(metric_rows(dir_ / "straight" / "metrics.csv"),
            metric_rows(dir_ / "killed" / "metrics.csv"));
  // The rows after checkpoint 4 were dropped on resume; the clock goes on from step 4's.
  expect_elapsed_non_decreasing(dir_ / "killed" / "metrics.csv", 8);
}

INSTANTIATE_TEST_SUITE_P(NLayer, ResumeExact,
                         ::testing::Values(ResumeCase{0, false}, ResumeCase{2, false},
                                           ResumeCase{2, true}, ResumeCase{2, false, true},
                                           ResumeCase{2, true, true}),
                         [](const ::testing::TestParamInfo<ResumeCase>& info) {
                           return "n_layer" + std::to_string(info.param.n_layer) +
                                  (info.param.bf16 ? "_bf16" : "") +
                                  (info.param.tiled ? "_tiled" : "");
                         });

TEST_F(Resume, ChangedSettingsNameEachKeyWithBothValuesAndWriteNothing) {
  config(4);
  std::string out;
  ASSERT_EQ(train("run", "--stop-at=3", &out), 0) << out;
  const std::string metrics_before = slurp(dir_ / "run" / "metrics.csv");
  const std::string c3 = ckpt("run", 3);
  // Keys that may not change: each named, with the checkpoint's and the new value.
  EXPECT_EQ(train("run", "--resume '" + c3 + "' --model.d_model=8 --train.seed=5 --model.n_ctx=32 "
                         "--optim.warmup_steps=5",
                  &out),
            2)  // values that cannot be combined with the checkpoint's: bad usage
      << out;
  for (const char* line : {"model.d_model: checkpoint 16, now 8", "train.seed: checkpoint 1337, now 5",
                           "model.n_ctx: checkpoint 16, now 32", "optim.warmup_steps: checkpoint 3, now 5",
                           "4 setting(s) differ"})
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  EXPECT_NE(out.find(c3), std::string::npos) << out;
  // Not said before the checkpoint was compared.
  EXPECT_EQ(out.find("resuming with config"), std::string::npos) << out;
  // Where each new value came from.
  EXPECT_NE(out.find("model.d_model: checkpoint 16, now 8 (from the command line: --model.d_model=8)"),
            std::string::npos) << out;
  // vocab_size (its own message would come from the tokenizer otherwise: the key is named first).
  EXPECT_EQ(train("run", "--resume '" + c3 + "' --model.vocab_size=512", &out), 2) << out;
  EXPECT_NE(out.find("model.vocab_size: checkpoint 300, now 512"), std::string::npos) << out;
  // The block structure: n_layer and n_head may not change on resume.
  EXPECT_EQ(train("run", "--resume '" + c3 + "' --model.n_layer=2 --model.n_head=8", &out), 2)
      << out;
  for (const char* line : {"model.n_layer: checkpoint 0, now 2", "model.n_head: checkpoint 4, now 8"})
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  // Another dataset: the token streams' lengths and hashes, both values.
  write(dir_ / "other.txt", tiny_corpus(8));
  EXPECT_EQ(train("run", "--resume '" + c3 + "' --data.text='" + (dir_ / "other.txt").string() + "'",
                  &out),
            1)
      << out;
  EXPECT_NE(out.find("dataset (train tokens): checkpoint "), std::string::npos) << out;
  EXPECT_NE(out.find(", now "), std::string::npos) << out;
  // Another tokenizer: a directory instead of the checkpoint's trained one.
  EXPECT_EQ(train("run", "--resume '" + c3 + "' --data.tokenizer='" +
                             (dir_ / "run" / "tokenizer").string() + "'",
                  &out),
            2)
      << out;
  EXPECT_NE(out.find("data.tokenizer: checkpoint train, now "), std::string::npos) << out;
  // --stop-at must lie between the checkpoint's step and train.steps.
  EXPECT_EQ(train("run", "--resume '" + c3 + "' --stop-at=2", &out), 2) << out;  // bad usage
  EXPECT_NE(out.find("--stop-at 2 must be after the start step 3"), std::string::npos) << out;
  // Nothing to train: already at train.steps.
  EXPECT_EQ(train("run", "--resume '" + c3 + "' --train.steps=3", &out), 2) << out;
  EXPECT_NE(out.find("train.steps = 3 (from the command line: --train.steps=3): nothing left to "
                     "train"), std::string::npos) << out;
  // None of the refusals touched the run.
  EXPECT_EQ(slurp(dir_ / "run" / "metrics.csv"), metrics_before);
  EXPECT_EQ(wte::list_checkpoints((dir_ / "run").string()).size(), 1u);
  // A moved corpus with the same content resumes (paths may change, data may not).
  fs::copy_file(corpus_, dir_ / "moved.txt");
  EXPECT_EQ(train("run", "--resume '" + c3 + "' --train.steps=10 --data.text='" +
                             (dir_ / "moved.txt").string() + "'",
                  &out),
            0)
      << out;
}

// A resume whose changeable keys differ from the checkpoint's (a --config
// file's train.steps replacing the run's) names each in a note, with both values and where the new
// one came from, and says how to keep the checkpoint's.
TEST_F(Resume, ChangedResumableSettingsAreNotedWithWhereEachCameFrom) {
  config(4);
  const std::string ini = (dir_ / "tiny.ini").string();
  std::string out;
  ASSERT_EQ(train("run", "--train.steps=20 --checkpoint.keep_last=5 --stop-at=5", &out), 0) << out;
  // From the command line: named as such; no hint to keep (the user typed them).
  ASSERT_EQ(train("run", "--resume auto --train.steps=30 --train.log_interval=2 --stop-at=6", &out), 0)
      << out;
  EXPECT_NE(out.find("note: resuming from '" + ckpt("run", 5) + "' with 3 setting(s) that differ "
                     "from the checkpoint's (allowed on resume):"), std::string::npos) << out;
  EXPECT_NE(out.find("  train.steps: checkpoint 20, now 30 (from the command line: "
                     "--train.steps=30)"), std::string::npos) << out;
  EXPECT_NE(out.find("  train.log_interval: checkpoint 1, now 2 (from the command line: "
                     "--train.log_interval=2)"), std::string::npos) << out;
  EXPECT_NE(out.find("  checkpoint.keep_last: checkpoint 5, now 3 (from the built-in default; "
                     "config file '" + ini + "' does not set it)"), std::string::npos) << out;
  EXPECT_NE(out.find("(train.steps also sets the length of the learning-rate schedule)"),
            std::string::npos) << out;
  EXPECT_NE(out.find("(to keep the checkpoint's values, pass --checkpoint.keep_last=5, or leave "
                     "out --config"), std::string::npos) << out;
  // The report's case: the config file's train.steps replaces the run's.
  ASSERT_EQ(train("run", "--resume auto", &out), 0) << out;
  EXPECT_NE(out.find("  train.steps: checkpoint 30, now 8 (from config file '" + ini + "')"),
            std::string::npos) << out;
  EXPECT_NE(out.find("resuming with config " + ini + " (checked against the checkpoint's)"),
            std::string::npos) << out;
  EXPECT_NE(out.find("pass --train.steps=30 --train.log_interval=2, or leave out --config"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("keep_last: checkpoint"), std::string::npos) << out;  // 3 since step 6
  EXPECT_NE(out.find("with 2 setting(s) that differ"), std::string::npos) << out;
  // Without --config the checkpoint's own config is used: nothing differs, no note.
  ASSERT_EQ(run(kCli + " train --resume '" + ckpt("run", 8) + "' --train.steps=9 --train.threads=2",
                &out), 0) << out;
  EXPECT_NE(out.find("train.steps: checkpoint 8, now 9 (from the command line: --train.steps=9)"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("to keep the checkpoint's values"), std::string::npos) << out;
}

// ---------------------------------------------------------------------------------------------
// Bad files

namespace {

// Rewrites dataset `name` of an HDF5 file with another dtype or shape (for the bad-file cases).
void replace_dataset(const std::string& path, const std::string& name, const H5::PredType& type,
                     std::vector<hsize_t> dims) {
  H5::H5File file(path, H5F_ACC_RDWR);
  file.unlink(name);
  H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
  size_t n = 1;
  for (hsize_t d : dims) n *= d;
  std::vector<double> zeros(n, 0.0);
  H5::DataSet ds = file.createDataSet(name, type, space);
  ds.write(zeros.data(), H5::PredType::NATIVE_DOUBLE);
}

void set_int_attr(const std::string& path, const std::string& obj, const std::string& name,
                  int64_t value) {
  H5::H5File file(path, H5F_ACC_RDWR);
  H5::Group g = file.openGroup(obj);
  H5::Attribute a = g.openAttribute(name);
  a.write(H5::PredType::NATIVE_INT64, &value);
}

}  // namespace

TEST_F(Resume, EachBadFileGivesItsOwnErrorAndNothingIsOverwritten) {
  config(4);
  std::string out;
  ASSERT_EQ(train("run", "--train.steps=3", &out), 0) << out;
  const std::string good = ckpt("run", 3);
  const std::string good_bytes = slurp(good);
  H5::Exception::dontPrint();
  auto copy_good = [&](const std::string& name) {
    const std::string p = (dir_ / name).string();
    write(p, good_bytes);
    return p;
  };
  struct Case {
    std::string path, expect;
  };
  std::vector<Case> cases;
  cases.push_back({(dir_ / "missing.h5").string(), "does not exist"});
  write(dir_ / "text.h5", "this is not HDF5\n");
  cases.push_back({(dir_ / "text.h5").string(), "is not an HDF5 file"});
  write(dir_ / "truncated.h5", good_bytes.substr(0, good_bytes.size() / 2));
  cases.push_back({(dir_ / "truncated.h5").string(), "truncated or corrupt"});
  {
    const std::string p = (dir_ / "other.h5").string();
    H5::H5File f(p, H5F_ACC_TRUNC);
    const hsize_t dims[1] = {3};
    f.createDataSet("x", H5::PredType::IEEE_F32LE, H5::DataSpace(1, dims));
    cases.push_back({p, "is not a wte checkpoint: it has no attribute 'format'"});
  }
  {
    const std::string p = copy_good("shape.h5");
    replace_dataset(p, "wte", H5::PredType::IEEE_F32LE, {300, 15});
    cases.push_back({p, "dataset 'wte' has shape (300, 15), expected (300, 16)"});
  }
  {
    const std::string p = copy_good("dtype.h5");
    replace_dataset(p, "wpe", H5::PredType::IEEE_F64LE, {16, 16});
    cases.push_back({p, "dataset 'wpe' is not float32"});
  }
  {
    const std::string p = copy_good("moment.h5");
    replace_dataset(p, "optimizer/v/ln_f/g", H5::PredType::IEEE_F32LE, {17});
    cases.push_back({p, "dataset 'optimizer/v/ln_f/g' has shape (17,), expected (16,)"});
  }
  {
    const std::string p = copy_good("order.h5");
    const wte::CheckpointInfo info = wte::read_checkpoint_info(good);
    H5::H5File f(p, H5F_ACC_RDWR);
    std::vector<uint32_t> order = info.resume.data.order;
    order[1] = order[0];
    f.openDataSet("data/order").write(order.data(), H5::PredType::NATIVE_UINT32);
    cases.push_back({p, "data order is not a permutation"});
  }
  {
    const std::string p = copy_good("rng.h5");
    replace_dataset(p, "data/rng_state", H5::PredType::STD_U64LE, {3});
    cases.push_back({p, "dataset 'rng_state' has shape (3,), expected (4,)"});
  }
  {
    const std::string p = copy_good("config.h5");
    H5::H5File f(p, H5F_ACC_RDWR);
    H5::Attribute a = f.openGroup("/").openAttribute("config_fnv1a64");
    const uint64_t wrong = 12345;
    a.write(H5::PredType::NATIVE_UINT64, &wrong);
    cases.push_back({p, "is corrupt: config_fnv1a64 is 0000000000003039"});
  }
  {
    const std::string p = copy_good("version.h5");
    set_int_attr(p, "/", "format_version", 1);
    cases.push_back({p, "has format_version 1; this build reads versions 2 to 3"});
  }
  {
    const std::string p = copy_good("step.h5");
    set_int_attr(p, "/schedule", "step", 2);
    cases.push_back({p, "/schedule step 2 differs from the root step 3"});
  }
  {
    // A weights-only checkpoint (valid, but not resumable).
    const std::string p = (dir_ / "weights_only.h5").string();
    const Config cfg = wte::load_config((dir_ / "run" / "config.ini").string(), {});
    wte::Model model(cfg.model);
    model.init_weights(1);
    wte::save_checkpoint(p, model, nullptr,
                         wte::Tokenizer::load((dir_ / "run" / "tokenizer").string()), cfg, 3);
    cases.push_back({p, "cannot be resumed: it has no /optimizer"});
  }

  std::set<std::string> messages;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    const std::string before = fs::exists(c.path) ? slurp(c.path) : "";
    // wte train --resume: exit 1, the path and the reason named, no run directory created.
    const std::string fresh = "never_" + fs::path(c.path).stem().string();
    EXPECT_EQ(train(fresh, "--resume '" + c.path + "'", &out), 1) << out;
    EXPECT_NE(out.find(c.path), std::string::npos) << out;
    EXPECT_NE(out.find(c.expect), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(dir_ / fresh)) << out;
    // The reason, with the path taken out, is different for every case.
    std::string reason = out;
    for (size_t at; (at = reason.find(c.path)) != std::string::npos;)
      reason.replace(at, c.path.size(), "PATH");
    messages.insert(reason);
    // wte inspect applies the same checks (the weights-only file is valid to inspect).
    std::string iout;
    const int icode = run(kCli + " inspect '" + c.path + "'", &iout);
    if (c.expect.find("cannot be resumed") == std::string::npos) {
      EXPECT_EQ(icode, 1) << iout;
      EXPECT_NE(iout.find(c.expect), std::string::npos) << iout;
    } else {
      EXPECT_EQ(icode, 0) << iout;
      EXPECT_NE(iout.find("resumable: no"), std::string::npos) << iout;
    }
    // Every handle was closed on the error path: the same process can write the same path again.
    if (fs::exists(c.path)) {
      EXPECT_EQ(before, slurp(c.path)) << "a failed load changed the file";
      const std::string msg = [&] {
        try {
          wte::read_checkpoint_info(c.path);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }();
      const wte::CheckpointInfo info = wte::read_checkpoint_info(good);
      const Config cfg = wte::parse_config(info.config_ini, good);
      wte::Model model(cfg.model);
      wte::load_checkpoint(good, model, nullptr);
      wte::save_checkpoint(c.path, model, nullptr,
                           wte::Tokenizer::from_strings(info.encoder_json, info.vocab_bpe, good),
                           cfg, 3);
      EXPECT_EQ(wte::read_checkpoint_info(c.path).step, 3) << msg;
    }
  }
  EXPECT_EQ(messages.size(), cases.size()) << "each bad file has its own error";
  // The good run is untouched by all of this.
  EXPECT_EQ(slurp(good), good_bytes);

  // --resume auto over a run directory whose only checkpoint is broken: an error, never a fresh
  // start; over an empty directory: a fresh start, said so.
  fs::create_directories(dir_ / "broken");
  write(wte::checkpoint_path((dir_ / "broken").string(), 2), good_bytes.substr(0, 4096));
  EXPECT_EQ(train("broken", "--resume auto", &out), 1) << out;
  EXPECT_NE(out.find("none of the 1 checkpoint(s)"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "broken" / "metrics.csv"));
  EXPECT_EQ(train("empty", "--resume auto --train.steps=1", &out), 0) << out;
  EXPECT_NE(out.find("no checkpoint in"), std::string::npos) << out;
}

// ---------------------------------------------------------------------------------------------
// In-process pieces

TEST(ResumeUnits, TiedStaysTiedAfterLoading) {
  const fs::path dir = temp_dir("resume_tied");
  const Config cfg = wte::load_config("", {"--model.vocab_size=300", "--model.d_model=8",
                                           "--model.n_ctx=4", "--data.seq_len=4"});
  const std::string corpus = tiny_corpus();
  const wte::Tokenizer tok = wte::Tokenizer::train(corpus, 300);
  wte::Model model(cfg.model);
  model.init_weights(5);
  const std::string path = (dir / "c.h5").string();
  wte::save_checkpoint(path, model, nullptr, tok, cfg, 1);
  // wte is stored once: the root holds exactly the model's tensors, no separate lm_head.
  {
    H5::H5File f(path, H5F_ACC_RDONLY);
    EXPECT_FALSE(f.nameExists("lm_head"));
    EXPECT_TRUE(f.nameExists("wte"));
  }
  wte::Model loaded(cfg.model);
  wte::load_checkpoint(path, loaded, nullptr);
  ASSERT_EQ(loaded.params().wte, loaded.param_data());  // tensors()[0] is wte, at offset 0
  // Zero row r of the loaded wte: the lookup and the unembedding both see it, so the logit of r
  // is exactly 0 (h'·0) and the hidden state of input r is exactly wpe[t].
  const int32_t r = 7;
  std::fill(loaded.params().wte + r * 8, loaded.params().wte + (r + 1) * 8, 0.0f);
  const int32_t inputs[4] = {r, 1, r, 2};
  const float* logits = loaded.forward_logits(inputs, 1, 4);
  for (size_t t = 0; t < 4; ++t) EXPECT_EQ(logits[t * 300 + r], 0.0f) << t;
  const float* h = loaded.hidden_states();
  for (size_t c = 0; c < 8; ++c) {
    EXPECT_EQ(h[0 * 8 + c], loaded.params().wpe[0 * 8 + c]);
    EXPECT_EQ(h[2 * 8 + c], loaded.params().wpe[2 * 8 + c]);
  }
}

TEST(ResumeUnits, LoaderRestoredMidEpochServesTheSameBatches) {
  std::vector<int32_t> tokens(10 * 4 + 1);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i);
  wte::BatchLoader a(&tokens, 4, true, 99);
  std::vector<int32_t> in(3 * 4), tg(3 * 4), in2(3 * 4), tg2(3 * 4);
  a.next_batch(in.data(), tg.data(), 3);
  a.next_batch(in.data(), tg.data(), 3);  // cursor 6 of 10
  const wte::LoaderState s = a.state();
  EXPECT_EQ(s.cursor, 6u);
  wte::BatchLoader b(&tokens, 4, true, 12345);  // another seed: everything comes from the state
  b.restore(s, "test");
  for (int k = 0; k < 5; ++k) {  // crosses two epoch boundaries
    std::vector<std::array<uint64_t, 2>> sa, sb;
    a.next_batch(in.data(), tg.data(), 3, &sa);
    b.next_batch(in2.data(), tg2.data(), 3, &sb);
    EXPECT_EQ(in, in2) << k;
    EXPECT_EQ(tg, tg2) << k;
    EXPECT_EQ(sa, sb) << k;
  }
  // Invalid states are refused with the reason, and the loader is unchanged.
  const wte::LoaderState before = b.state();
  auto refuse = [&](wte::LoaderState bad, const std::string& expect) {
    try {
      b.restore(bad, "ckpt.h5");
      ADD_FAILURE() << "accepted: " << expect;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
    EXPECT_EQ(b.state().order, before.order);
    EXPECT_EQ(b.state().cursor, before.cursor);
  };
  wte::LoaderState bad = s;
  bad.cursor = 11;
  refuse(bad, "cursor 11 exceeds num_samples = 10");
  bad = s;
  bad.order[3] = bad.order[4];
  refuse(bad, "which occurs twice");
  bad = s;
  bad.order[0] = 10;
  refuse(bad, "entry 0 is 10");
  bad = s;
  bad.rng_state = {};
  refuse(bad, "all-zero");
  bad = s;
  bad.num_samples = 9;
  bad.order.resize(9);
  for (uint32_t i = 0; i < 9; ++i) bad.order[i] = i;
  refuse(bad, "over 9 samples but this token stream has 10");
  bad = s;
  bad.shuffle = false;
  refuse(bad, "not the identity although shuffle is off");
}

TEST(ResumeUnits, Fnv1a64MatchesPublishedValues) {
  // Test vectors of the FNV reference (isthe.com/chongo/tech/comp/fnv): "" and "a", "foobar".
  EXPECT_EQ(wte::fnv1a64("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(wte::fnv1a64("a", 1), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(wte::fnv1a64("foobar", 6), 0x85944171f73967e8ULL);
  // In pieces = at once.
  EXPECT_EQ(wte::fnv1a64("bar", 3, wte::fnv1a64("foo", 3)), 0x85944171f73967e8ULL);
}

TEST(ResumeUnits, InspectPrintsVersionStepShapesAndConfig) {
  const fs::path dir = temp_dir("resume_inspect");
  const Config cfg = wte::load_config("", {"--model.vocab_size=300", "--model.d_model=8",
                                           "--model.n_ctx=4", "--data.seq_len=4",
                                           "--model.n_layer=0"});
  wte::Model model(cfg.model);
  model.init_weights(5);
  wte::AdamW opt(model);
  opt.set_step(9);
  const std::string path = (dir / "c.h5").string();
  wte::save_checkpoint(path, model, &opt, wte::Tokenizer::train(tiny_corpus(), 300), cfg, 9);
  std::string out;
  ASSERT_EQ(run(kCli + " inspect '" + path + "'", &out), 0) << out;
  for (const char* expect :
       {"format: wte-checkpoint version 3", "step: 9", "wte      float32 (300, 8)",
        "wpe      float32 (4, 8)", "ln_f/g   float32 (8,)", "total    2448 parameters, 9792 bytes",
        "optimizer: AdamW, step 9", "[model]\nvocab_size = 300", "resumable: no"})
    EXPECT_NE(out.find(expect), std::string::npos) << expect << "\n" << out;
  EXPECT_EQ(run(kCli + " inspect", &out), 2) << out;
}
