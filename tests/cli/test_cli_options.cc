// The option checks of cli/options.h, and the `wte` subcommands that use them as a user runs
// them: negative, zero, junk and out-of-range whole numbers, empty list items and unwritable output
// paths are rejected with an error naming the option, the value and the allowed range, before any
// work (no table printed, no checkpoint read); gradcheck warns at sizes where it cannot fail;
// defaults print as typed; token-file positions are 1-based; inspect names a directory.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "src/profile/profile.h"
#include "tests/test_util.h"
#include "wte/data.h"
#include "cli/options.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

using test::error_of;
using test::run;
using test::slurp;
using test::temp_dir;
using test::write;

const std::string kCli = WTE_CLI;

TEST(CliOptions, WholeNumberAcceptsDigitsInRange) {
  EXPECT_EQ(cli::parse_whole_number("--n", "0", 0, 10), 0u);
  EXPECT_EQ(cli::parse_whole_number("--n", "10", 0, 10), 10u);
  EXPECT_EQ(cli::parse_whole_number("--n", "007", 1, 10), 7u);
  EXPECT_EQ(cli::parse_whole_number("--n", "18446744073709551615", 0, UINT64_MAX), UINT64_MAX);
}

TEST(CliOptions, WholeNumberRejectsSignJunkAndRange) {
  EXPECT_EQ(error_of([] { cli::parse_whole_number("--vocab-size", "-3", 1, 16777216); }),
            "--vocab-size = '-3' is not a whole number; allowed: a whole number in [1, 16777216]");
  // The words of the config keys' errors (src/io/config.cc): not a whole number, out of range.
  for (const char* bad : {"-1", "+3", "", " 3", "3 ", "3x", "0x10", "1e3", "3.0"}) {
    const std::string msg = error_of([&] { cli::parse_whole_number("--n", bad, 1, 10); });
    EXPECT_EQ(msg, std::string("--n = '") + bad +
                       "' is not a whole number; allowed: a whole number in [1, 10]")
        << "'" << bad << "'";
  }
  for (const char* bad : {"11", "0", "18446744073709551616", "99999999999999999999999"}) {
    const std::string msg = error_of([&] { cli::parse_whole_number("--n", bad, 1, 10); });
    EXPECT_EQ(msg, std::string("--n = '") + bad + "' is out of range; allowed: a whole number in [1, 10]")
        << "'" << bad << "'";
  }
}

// A utilisation above 100% ("211.4% of that peak", seen on a busy machine) gets a note that the
// peak is unreliable; a utilisation up to 100% none.
TEST(Profile, AnMfuAboveOneHundredPercentSaysThePeakIsUnreliable) {
  EXPECT_EQ(profile::mfu_line(24.2, 0.924),
            "model FLOPs utilisation: 24.2 GFLOP/s = 92.4% of that peak");
  const std::string high = profile::mfu_line(112.9, 2.114);
  EXPECT_EQ(high.rfind("model FLOPs utilisation: 112.9 GFLOP/s = 211.4% of that peak (above 100%: "
                       "the peak is unreliable", 0), 0u) << high;
}

// The one median of the profile commands (profile loss and profile comm had a copy each): the
// middle measured value, the upper middle one for an even count, 0 for none.
TEST(CliOptions, ProfileMedianIsTheMiddleMeasuredValue) {
  EXPECT_EQ(profile::median({}), 0.0);
  EXPECT_EQ(profile::median({3.0}), 3.0);
  EXPECT_EQ(profile::median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(profile::median({4.0, 1.0, 3.0, 2.0}), 3.0);
}

TEST(CliOptions, ListItemsMustBeNonEmpty) {
  EXPECT_EQ(cli::split_list("--dist", "uniform,zipf:1.1"),
            (std::vector<std::string>{"uniform", "zipf:1.1"}));
  EXPECT_EQ(error_of([] { cli::split_list("--dist", ""); }),
            "--dist is empty; allowed: one or more comma-separated items");
  EXPECT_EQ(error_of([] { cli::split_list("--threads", "1,,2"); }),
            "--threads = '1,,2': item 2 is empty; allowed: comma-separated items, none empty");
  EXPECT_NE(error_of([] { cli::split_list("--threads", "1,"); }).find("item 2 is empty"),
            std::string::npos);
  EXPECT_NE(error_of([] { cli::split_list("--threads", ",1"); }).find("item 1 is empty"),
            std::string::npos);
}

// parse_command_line: the one parser of every command's options (exact names, aliases, positional
// arguments, config overrides, --help before any value is checked).
TEST(CliOptions, ParseCommandLineExactNamesAliasesOverridesAndHelp) {
  namespace po = boost::program_options;
  po::options_description opts("Options");
  opts.add_options()("help,h", "print this help")("steps", po::value<std::string>(), "steps")(
      "out", po::value<std::string>(), "out");
  po::options_description hidden;
  hidden.add_options()("texts", po::value<std::vector<std::string>>(), "texts");
  po::positional_options_description positional;
  positional.add("texts", -1);
  cli::CommandSpec spec;
  spec.usage = "Usage: wte x\n";
  spec.example = "Example: wte x --steps 3\n";
  spec.aliases = {{"--n", "--steps"}};
  spec.hidden = &hidden;
  spec.positional = &positional;
  auto parse = [&](std::vector<std::string> args, const cli::CommandSpec& sp) {
    args.insert(args.begin(), "x");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return cli::parse_command_line(static_cast<int>(argv.size()), argv.data(), opts, sp);
  };
  cli::CommandLine cl = parse({"--n=4", "a", "--out", "o", "b"}, spec);
  EXPECT_FALSE(cl.help);
  EXPECT_EQ(cl.vm["steps"].as<std::string>(), "4");
  EXPECT_EQ(cl.vm["out"].as<std::string>(), "o");
  EXPECT_EQ(cl.vm["texts"].as<std::vector<std::string>>(), (std::vector<std::string>{"a", "b"}));
  // Exact names only: "--step" is not "--steps", as in an INI file.
  EXPECT_NE(error_of([&] { parse({"--step=3"}, spec); }).find("--step"), std::string::npos);
  EXPECT_THROW(parse({"--steps"}, spec), UsageError);  // a missing value
  EXPECT_THROW(parse({"--train.steps=3"}, spec), UsageError);
  cli::CommandSpec with_overrides = spec;
  with_overrides.positional = nullptr;
  with_overrides.config_overrides = true;
  cl = parse({"--train.steps=3", "--steps", "2", "--model.d_model=8"}, with_overrides);
  EXPECT_EQ(cl.overrides, (std::vector<std::string>{"--train.steps=3", "--model.d_model=8"}));
  EXPECT_EQ(cl.vm["steps"].as<std::string>(), "2");
  // Config keys with an empty value reach the config loader (Boost rejects "--key="); an option
  // without a '.' is no config key, and a lone word is no option ("--train.steps 5" leaves "5").
  cl = parse({"--train.snapshot_steps=", "--steps", "2"}, with_overrides);
  EXPECT_EQ(cl.overrides, (std::vector<std::string>{"--train.snapshot_steps="}));
  EXPECT_EQ(error_of([&] { parse({"--no-such-option=3"}, with_overrides); }),
            "unknown option '--no-such-option=3'");
  // A close name is suggested, by the same words.
  EXPECT_EQ(error_of([&] { parse({"--stpes", "2"}, with_overrides); }),
            "unknown option '--stpes'; did you mean '--steps'?");
  EXPECT_EQ(error_of([&] { parse({"--train.steps", "5"}, with_overrides); }),
            "unexpected argument '5'; config keys are written --section.key=value, with '='");
  // With positional options the words are theirs, the config keys still collected.
  cli::CommandSpec positional_and_overrides = spec;
  positional_and_overrides.config_overrides = true;
  cl = parse({"a", "--train.steps=3", "b"}, positional_and_overrides);
  EXPECT_EQ(cl.vm["texts"].as<std::vector<std::string>>(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(cl.overrides, (std::vector<std::string>{"--train.steps=3"}));
  // --help is printed to spec.help_out before the command checks any value.
  std::ostringstream help_text;
  cli::CommandSpec to_string_stream = spec;
  to_string_stream.help_out = &help_text;
  cl = parse({"--steps", "-3", "--help"}, to_string_stream);
  EXPECT_TRUE(cl.help);
  EXPECT_EQ(help_text.str().rfind("Usage: wte x\nOptions:\n", 0), 0u) << help_text.str();
  EXPECT_NE(help_text.str().find("Example: wte x --steps 3"), std::string::npos);
  cl = parse({"--help"}, spec);
  EXPECT_TRUE(cl.help);
  EXPECT_THROW(cli::require_options(parse({"--steps", "1"}, spec).vm, {"steps", "out"}),
               UsageError);
  EXPECT_EQ(error_of([&] { cli::require_options(parse({}, spec).vm, {"steps"}); }),
            "--steps is required");
}

TEST(CliOptions, OutputFileCheckedAndNothingLeftBehind) {
  const fs::path dir = temp_dir("cli_options_outfile");
  const std::string missing = (dir / "nodir" / "x.json").string();
  EXPECT_NE(error_of([&] { cli::check_output_file("--json", missing); })
                .find("--json " + missing + ": cannot create the file: the directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] { cli::check_output_file("--json", dir.string()); }).find("is a directory"),
            std::string::npos);
  const std::string fresh = (dir / "new.json").string();
  EXPECT_EQ(error_of([&] { cli::check_output_file("--json", fresh); }), "");
  EXPECT_FALSE(fs::exists(fresh));  // probed, then removed
  write(dir / "old.json", "keep");
  EXPECT_EQ(error_of([&] { cli::check_output_file("--json", (dir / "old.json").string()); }), "");
  EXPECT_EQ(slurp(dir / "old.json"), "keep");  // not truncated
}

// A special file given as an output (/dev/null, a FIFO) is refused before any work: the atomic
// write renames a new file over the path, which as root would replace /dev/null itself.
// commit_file refuses too, for writers that skip the early check.
TEST(CliOptions, SpecialFileAsOutputIsRefusedNotReplaced) {
  const fs::path dir = temp_dir("cli_options_special_out");
  EXPECT_NE(error_of([&] { cli::check_output_file("--out", "/dev/null"); })
                .find("--out /dev/null: is not a regular file (a character device); wte writes its "
                      "outputs as new files renamed into place"),
            std::string::npos);
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { cli::check_output_file("--json", fifo.string()); })
                .find("is not a regular file (a FIFO)"),
            std::string::npos);
  write(dir / "x.tmp", "new");
  EXPECT_NE(error_of([&] { commit_file((dir / "x.tmp").string(), fifo.string()); })
                .find("exists and is not a regular file"),
            std::string::npos);
  EXPECT_TRUE(fs::is_fifo(fifo));  // still the FIFO
  std::string out;
  EXPECT_EQ(run(kCli + " profile gather --quick --threads 1 --dist uniform --json " + fifo.string(),
                &out),
            1)  // as for the other output-path errors (docs/cli.md, Exit status)
      << out;
  EXPECT_NE(out.find("is not a regular file (a FIFO)"), std::string::npos) << out;
  EXPECT_EQ(out.find("median"), std::string::npos) << out;  // refused before measuring
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST(CliOptions, OutputDirCreatedOrRejected) {
  const fs::path dir = temp_dir("cli_options_outdir");
  EXPECT_NE(error_of([] { cli::prepare_output_dir("--out", "/dev/null/x"); })
                .find("--out /dev/null/x: cannot create the directory"),
            std::string::npos);
  const fs::path nested = dir / "a" / "b";
  EXPECT_EQ(error_of([&] { cli::prepare_output_dir("--out", nested.string()); }), "");
  EXPECT_TRUE(fs::is_directory(nested));
  EXPECT_TRUE(fs::is_empty(nested));  // the write probe is removed
  write(dir / "file", "x");
  EXPECT_NE(error_of([&] { cli::prepare_output_dir("--out", (dir / "file").string()); }).find("--out"),
            std::string::npos);
}

// Every case: exit 2 (bad usage; 1 for an output path that cannot be created, a run-time
// failure), the expected message, and no sign of work done (a profile table, a gradcheck line, a
// checkpoint opened).
struct CliCase {
  std::string args, expected;
  int code = 2;
};

void expect_rejected(const std::vector<CliCase>& cases) {
  for (const CliCase& c : cases) {
    std::string out;
    EXPECT_EQ(run(kCli + " " + c.args, &out), c.code) << c.args << "\n" << out;
    EXPECT_NE(out.find(c.expected), std::string::npos) << c.args << "\n" << out;
    for (const char* work : {"median of", "finite differences", "gradcheck: vocab_size", "missing.h5"})
      EXPECT_EQ(out.find(work), std::string::npos) << c.args << " did work:\n" << out;
  }
}

TEST(CliOptions, GradcheckRejectsBadSizes) {
  const std::string g = "gradcheck --config " WTE_SOURCE_DIR "/configs/embedding_only.ini ";
  expect_rejected({
      {g + "--vocab-size -3",
       "--vocab-size = '-3' is not a whole number; allowed: a whole number in [1, 16777216]"},
      {g + "--n-ctx -1", "--n-ctx = '-1' is not a whole number; allowed: a whole number in [1, 1048576]"},
      {g + "--batch-size -1", "--batch-size = '-1' is not a whole number"},
      {g + "--d-model -1", "--d-model = '-1' is not a whole number; allowed: a whole number in [1, 65536]"},
      {g + "--seq-len -2", "--seq-len = '-2' is not a whole number"},
      {g + "--untouched-rows -1",
       "--untouched-rows = '-1' is not a whole number; allowed: a whole number in [0, 16777216]"},
      {g + "--vocab-size 0", "--vocab-size = '0' is out of range"},
      {g + "--d-model 4x", "--d-model = '4x' is not a whole number"},
  });
}

TEST(CliOptions, ProfileRejectsBadCountsListsAndOutputsBeforeMeasuring) {
  const fs::path dir = temp_dir("cli_options_profile");
  const std::string p = "profile scatter --quick --vocab-size 100 --d-model 8 --n-tokens 64 --threads 1 ";
  const std::string nodir = (dir / "nodir").string();
  expect_rejected({
      {p + "--repeat -1", "--repeat = '-1' is not a whole number; allowed: a whole number in [1, 100000]"},
      {p + "--repeat 0", "--repeat = '0' is out of range"},
      {"profile --n-tokens -5", "--n-tokens = '-5' is not a whole number; allowed: a whole number in [1, 2147483647]"},
      {"profile --vocab-size -1", "--vocab-size = '-1' is not a whole number"},
      // The old spellings are hidden aliases of the new names.
      {"profile --tokens -5", "--n-tokens = '-5' is not a whole number"},
      {"profile --vocab -1", "--vocab-size = '-1' is not a whole number"},
      {"profile --seed -1", "--seed = '-1' is not a whole number"},
      {p + "--dist ''", "--dist is empty"},
      {p + "--dist uniform,,zipf:1.1", "--dist = 'uniform,,zipf:1.1': item 2 is empty"},
      {"profile --threads 1,,2", "--threads = '1,,2': item 2 is empty"},
      {"profile --threads 2x", "--threads = '2x' is not a whole number; allowed: a whole number in [1, 1024]"},
      {p + "--json " + nodir + "/x.json", "--json " + nodir + "/x.json: cannot create the file", 1},
      {p + "--chart " + nodir + "/x.svg", "--chart " + nodir + "/x.svg: cannot create the file", 1},
  });
  EXPECT_FALSE(fs::exists(nodir));
}

TEST(CliOptions, ProfileWritesNoProgressLinesWhenStderrIsNotATerminal) {
  const fs::path dir = temp_dir("cli_options_progress");
  std::string out;
  ASSERT_EQ(run(kCli + " profile scatter --quick --vocab-size 100 --d-model 8 --n-tokens 64 --threads 1 "
                       "--dist uniform --strategy serial --json " + (dir / "p.json").string(), &out),
            0) << out;
  EXPECT_EQ(out.find("\x1b[K"), std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_NE(out.find("median of 3"), std::string::npos) << out;
  EXPECT_NE(slurp(dir / "p.json").find("\"kernels\""), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "p.json.tmp"));
}

TEST(CliOptions, GeometryAndHiddenStatesCheckOptionsBeforeReading) {
  const fs::path dir = temp_dir("cli_options_geometry");
  const std::string missing = (dir / "missing.h5").string();
  const std::string g = "geometry --checkpoint " + missing + " ";
  expect_rejected({
      {g + "--neighbours -1", "--neighbours = '-1' is not a whole number; allowed: a whole number in [1, 16777216]"},
      {g + "--neighbours 0", "--neighbours = '0' is out of range"},
      {g + "--frequent -1", "--frequent = '-1' is not a whole number; allowed: a whole number in [0, 16777216]"},
      {g + "--k -1", "--k = '-1' is not a whole number"},
      {g + "--max-points 0", "--max-points = '0' is out of range"},
      {g + "--out /dev/null/x", "--out /dev/null/x: cannot create the directory", 1},
      {"hidden-states --checkpoint " + missing + " --text a --dims -1",
       "--dims = '-1' is not a whole number; allowed: a whole number in [0, 65536]"},
  });
}

TEST(CliOptions, GradcheckWarnsWhereItCannotFail) {
  const std::string g = "gradcheck --config " WTE_SOURCE_DIR "/configs/embedding_only.ini ";
  std::string out;
  ASSERT_EQ(run(kCli + " " + g + "--vocab-size 1", &out), 0) << out;
  EXPECT_NE(out.find("warning: vocab_size 1: softmax over one logit is 1"), std::string::npos) << out;
  EXPECT_NE(out.find("this check cannot detect errors"), std::string::npos) << out;
  EXPECT_NE(out.find("gradcheck passed, but vacuously at this size"), std::string::npos) << out;
  // (--n-layer 0: blocks at d_model 1 are degenerate too, with their own warning.)
  ASSERT_EQ(run(kCli + " " + g + "--n-layer 0 --d-model 1 --model.ln_f=true", &out), 0) << out;
  EXPECT_NE(out.find("warning: d_model 1 with ln_f on"), std::string::npos) << out;
  // Neither size alone is degenerate: no warning.
  ASSERT_EQ(run(kCli + " " + g + "--n-layer 0 --d-model 1 --model.ln_f=false", &out), 0) << out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
  EXPECT_NE(out.find("gradcheck passed\n"), std::string::npos) << out;
  ASSERT_EQ(run(kCli + " " + g + "--n-layer 2 --d-model 1 --model.ln_f=false", &out), 0) << out;
  EXPECT_NE(out.find("warning: d_model 1 with blocks: every block's ln_1 and ln_2"),
            std::string::npos) << out;
}

// A bf16 config is checked with float32 GEMMs (its bf16 inputs would fail the float32 bounds)
// and says so; before, every tensor of the default config failed with bf16.
TEST(CliOptions, GradcheckOfABf16ConfigChecksTheFloat32Model) {
  std::string out;
  ASSERT_EQ(run(kCli + " gradcheck --config " WTE_SOURCE_DIR "/configs/default.ini --n-layer 1 "
                       "--model.matmul_precision=bf16",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("model.matmul_precision = bf16: checked with float32 GEMMs"), std::string::npos)
      << out;
  EXPECT_NE(out.find("gradcheck passed\n"), std::string::npos) << out;
}

// model.attention: a value that is not one of the three is refused before any work, naming the
// key, the value, where it came from and what is allowed.
TEST(CliOptions, UnknownAttentionIsRefusedNamingTheChoices) {
  std::string out;
  EXPECT_EQ(run(kCli + " gradcheck --model.attention=flash", &out), 2) << out;
  EXPECT_NE(out.find("model.attention = 'flash' from the command line (--model.attention) is not an "
                     "attention; allowed: dense, tiled or auto"),
            std::string::npos)
      << out;
}

TEST(CliOptions, GradcheckHelpShowsDefaultsAsTyped) {
  std::string out;
  ASSERT_EQ(run(kCli + " gradcheck --help", &out), 0) << out;
  EXPECT_NE(out.find("(=1e-06)"), std::string::npos) << out;
  EXPECT_NE(out.find("(=1e-05)"), std::string::npos) << out;
  EXPECT_EQ(out.find("9.9999"), std::string::npos) << out;
  EXPECT_EQ(out.find("1.0000000"), std::string::npos) << out;
}

TEST(CliOptions, InspectNamesADirectory) {
  const fs::path dir = temp_dir("cli_options_inspect");
  std::string out;
  EXPECT_EQ(run(kCli + " inspect " + dir.string(), &out), 1) << out;
  const std::string expected = "'" + dir.string() + "' is a directory that holds no checkpoint_<step>.h5";
  EXPECT_NE(out.find(expected), std::string::npos) << out;
  EXPECT_EQ(out.find("H5Fis_hdf5"), std::string::npos) << out;
}

}  // namespace
}  // namespace wte
