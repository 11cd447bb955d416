// Helpers shared by the GoogleTest files that work with files and run the built `wte` as a user
// does (tests/train/test_train.cc, test_resume.cc, test_geometry.cc, test_gradcheck_cli.cc,
// test_tokenizer.cc): scratch directories under the build tree, whole-file read/write, a shell
// command with its output captured, the message of a thrown wte::Error, and the small synthetic
// corpus the training tests share. Needs WTE_BINARY_DIR (CMakeLists.txt defines it for every test).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "wte/error.h"
#include "wte/rng.h"

namespace wte::test {

// A fresh, empty directory WTE_BINARY_DIR/test_tmp/<name> for one test (removed first if it exists).
// Test files prefix their names ("resume_", "geometry_", ...) so that files run in parallel by
// ctest never share a directory; a run with WTE_GEMM set (the tests again with one GEMM library
// forced) gets "_gemm-<library>" appended, so it never shares one with the plain run.
inline std::filesystem::path temp_dir(const std::string& name) {
  const char* gemm = std::getenv("WTE_GEMM");
  const std::string suffix = gemm != nullptr && *gemm != '\0' ? std::string("_gemm-") + gemm : "";
  const std::filesystem::path dir = std::filesystem::path(WTE_BINARY_DIR) / "test_tmp" / (name + suffix);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes `text` to `path` byte for byte (replacing the file).
inline void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// The whole file's bytes ("" if it cannot be opened).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command (std::system); returns its exit code (-1 if it did not exit normally), with
// its stdout and stderr, interleaved, in *output. The output goes through a log file named by the
// process id and a per-process call counter, removed afterwards: ctest runs the cases of one test
// file as parallel processes, so two calls never share a log.
inline int run(const std::string& cmd, std::string* output) {
  static int calls = 0;
  const std::filesystem::path log =
      std::filesystem::path(WTE_BINARY_DIR) / "test_tmp" /
      ("command_" + std::to_string(::getpid()) + "_" + std::to_string(calls++) + ".log");
  std::filesystem::create_directories(log.parent_path());
  const int status = std::system((cmd + " > '" + log.string() + "' 2>&1").c_str());
  *output = slurp(log);
  std::filesystem::remove(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Message of the wte::Error that f() throws ("" if it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A small synthetic English-like corpus: 80 documents of 4 sentences of 12 words drawn (wte::Rng
// seeded with `seed`) from a fixed list of 20 words, documents separated by a blank line.
inline std::string tiny_corpus(uint64_t seed = 7) {
  const std::vector<std::string> words = {
      "the", "king", "said", "unto", "them", "and", "people", "went", "into", "city",
      "bank", "river", "money", "water", "land", "house", "of", "lord", "came", "day"};
  Rng rng(seed);
  std::string text;
  for (int doc = 0; doc < 80; ++doc) {
    if (doc) text += "\n\n";
    for (int line = 0; line < 4; ++line) {
      std::string s;
      for (int w = 0; w < 12; ++w) {
        std::string word = words[rng.below(words.size())];
        if (w == 0) word[0] = static_cast<char>(std::toupper(word[0]));
        s += (w ? " " : "") + word;
      }
      text += s + ".\n";
    }
  }
  return text;
}

// A tiny trained run of the built `wte` (WTE_CLI) in `dir`/run: a 1-block model on tiny_corpus()
// written to `dir`/corpus.txt, config `dir`/tiny.ini, checkpoints at steps 2 and 4. Returns the
// exit status; `output` gets what it printed.
inline int train_tiny_run(const std::string& cli, const std::filesystem::path& dir,
                          std::string* output) {
  write(dir / "corpus.txt", tiny_corpus());
  write(dir / "tiny.ini", "[model]\nvocab_size = 300\nd_model = 16\nn_ctx = 16\nn_layer = 1\n"
                          "n_head = 2\n[data]\ntext = " + (dir / "corpus.txt").string() +
                              "\nseq_len = 16\n[train]\nbatch_size = 4\nsteps = 4\n"
                              "eval_interval = 0\nthreads = 1\n[checkpoint]\ninterval = 2\n"
                              "keep_last = 0\n");
  return run(cli + " train --quiet --config " + (dir / "tiny.ini").string() + " --out " +
                 (dir / "run").string(),
             output);
}

}  // namespace wte::test
