// wte::load_model and wte::resolve_checkpoint (include/wte/checkpoint.h): a model, its config and
// its tokenizer in one call, from a checkpoint file or a run directory (its newest checkpoint),
// and errors that name the path and where it came from.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "wte/checkpoint.h"
#include "wte/error.h"

namespace fs = std::filesystem;

namespace {

std::string cli() { return WTE_CLI; }

// A tiny trained run in test_tmp/<name>/run (checkpoints at steps 2 and 4); one per test, as ctest
// runs the tests of this file as parallel processes.
fs::path tiny_run(const std::string& name) {
  const fs::path d = wte::test::temp_dir(name);
  std::string out;
  EXPECT_EQ(wte::test::train_tiny_run(cli(), d, &out), 0) << out;
  return d / "run";
}

std::string error_of(const std::string& path, const std::string& what = "") {
  try {
    wte::load_model(path, what);
  } catch (const wte::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(LoadModel, RunDirectoryMeansItsNewestCheckpoint) {
  const fs::path run = tiny_run("load_model_run_dir");
  const wte::LoadedModel m = wte::load_model(run.string());
  EXPECT_EQ(m.path, (run / "checkpoint_00000004.h5").string());
  EXPECT_EQ(m.info.step, 4);
  EXPECT_EQ(wte::resolve_checkpoint(run.string()), m.path);
}

TEST(LoadModel, FileGivesConfigModelAndTokenizer) {
  const std::string file = (tiny_run("load_model_file") / "checkpoint_00000002.h5").string();
  wte::LoadedModel m = wte::load_model(file);
  EXPECT_EQ(m.path, file);
  EXPECT_EQ(m.info.step, 2);
  EXPECT_EQ(m.config.model.vocab_size, 300u);
  EXPECT_EQ(m.config.model.n_layer, 1u);
  EXPECT_EQ(m.tokenizer.size(), 300u);
  // The same parameters as the five-call way (read_checkpoint_info, parse_config, Model,
  // load_checkpoint), and a forward that runs.
  wte::Model ref(m.config.model);
  wte::load_checkpoint(file, ref, nullptr);
  ASSERT_EQ(m.model->num_parameters(), ref.num_parameters());
  for (size_t i = 0; i < ref.num_parameters(); ++i)
    ASSERT_EQ(m.model->param_data()[i], ref.param_data()[i]) << "parameter " << i;
  const std::vector<int32_t> ids = m.tokenizer.encode("the king said");
  ASSERT_FALSE(ids.empty());
  const float* logits = m.model->forward_logits(ids.data(), 1, ids.size());
  EXPECT_TRUE(std::isfinite(logits[0]));
}

TEST(LoadModel, ErrorsNameThePathAndWhereItCameFrom) {
  const fs::path dir = wte::test::temp_dir("load_model_errors");
  EXPECT_EQ(error_of((dir / "missing.h5").string(), "--checkpoint "),
            "--checkpoint '" + (dir / "missing.h5").string() +
                "' does not exist (give a checkpoint .h5 or a run directory)");
  EXPECT_EQ(error_of(dir.string()),
            "'" + dir.string() + "' is a directory that holds no checkpoint_<step>.h5; give a "
            "checkpoint file or a run directory of wte train");
  wte::test::write(dir / "text.h5", "not HDF5\n");
  EXPECT_NE(error_of((dir / "text.h5").string()).find("text.h5"), std::string::npos);
}
