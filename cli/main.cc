// `wte`: the command-line tool. Dispatches to one subcommand per verb (see cli/commands.h).
#include <dnnl.h>
#include <hwy/targets.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "wte/error.h"
#include "wte/kernels.h"
#include "wte/simd_target.h"
#include "src/model/onednn_isa.h"
#include "cli/build_info.h"
#include "cli/options.h"
#include "cli/commands.h"
#include "src/io/suggest.h"
#include "src/io/invocation.h"
#include "train/omp_env.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"train", wte::cli::cmd_train, "train a GPT-2-style model from an INI config"},
    {"eval", wte::cli::cmd_eval,
     "loss, perplexity and unigram baseline of a checkpoint on its validation split or a file"},
    {"tokenize", wte::cli::cmd_tokenize, "print the BPE token ids and pieces of texts"},
    {"prepare", wte::cli::cmd_prepare,
     "tokenize text files, directories, globs (plain or .gz) on many threads into llm.c shards"},
    {"inspect", wte::cli::cmd_inspect,
     "validate a checkpoint and print its step, shapes and config"},
    {"profile", wte::cli::cmd_profile, "time the embedding gather, scatter strategies and a training step"},
    {"gradcheck", wte::cli::cmd_gradcheck,
     "check every gradient: finite differences in double, and the float32 model vs the reference"},
    {"grad", wte::cli::cmd_grad, "one forward/backward on a token batch; loss, logits, gradients to HDF5"},
    {"geometry", wte::cli::cmd_geometry,
     "measure and draw wte's geometry (neighbours, anisotropy, rank, purity, PCA) over snapshots"},
    {"hidden-states", wte::cli::cmd_hidden_states,
     "print the hidden states of texts; same token, same index: same bits at layer 0"},
    {"sample", wte::cli::cmd_sample, "generate text from a checkpoint (KV cache, temperature, top-k, seed)"},
    {"import", wte::cli::cmd_import,
     "read a Hugging Face GPT-2 (model.safetensors, config.json, vocab.json, merges.txt) into a checkpoint"},
    {"export", wte::cli::cmd_export,
     "write a checkpoint as Hugging Face GPT-2 (safetensors or npy, config.json, vocab.json, merges.txt)"},
};

void print_usage(FILE* out) {
  std::fprintf(out,
               "wte: trains GPT-2-style models on the CPU, with the token embedding (wte) at their\n"
               "centre, and measures what they learn.\n\n"
               "Usage: wte <command> [options]\n"
               "       wte help <command> [<subcommand>]   its options (wte <command> --help)\n"
               "       wte --version           version, git commit, oneDNN and Highway versions, SIMD target\n\n"
               "Commands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-13s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\nOptions mean the same in every command: -c/--config FILE (an INI config),\n"
               "--checkpoint FILE (an .h5 written by wte train), -o/--out PATH (where results go),\n"
               "--batch FILE (token ids, a sequence per line), --tokenizer DIR (encoder.json +\n"
               "vocab.bpe), --text TEXT; sizes are named after their config keys with '-' for '_'\n"
               "(--vocab-size, --d-model, --n-ctx, --batch-size, --seq-len); config keys themselves\n"
               "are --section.key=value. Exit status: 0 success, 1 a run-time failure (a bad file, a\n"
               "failed check), 2 bad usage (an unknown option or a bad value).\n");
}

void print_version() {
  const dnnl_version_t* dnnl = dnnl_version();
  std::printf("wte %s (git %s)\n", wte::build::kVersion, wte::build::kGitCommit);
  std::printf("oneDNN %d.%d.%d (runtime library; CPU ISA %s)\n", dnnl->major, dnnl->minor,
              dnnl->patch, wte::onednn_isa().c_str());
  const std::string cap = wte::simd_target_cap();
  std::printf("Highway %s (SIMD target in force: %s; WTE_MAX_SIMD cap: %s)\n",
              wte::build::kHighwayVersion, wte::simd_target_name().c_str(),
              cap.empty() ? "none" : cap.c_str());
}

// "; did you mean 'train'?" for the command closest to a mistyped `name`, or "".
std::string command_suggestion(const std::string& name) {
  std::vector<std::string> names;
  for (const Command& c : kCommands) names.push_back(c.name);
  return wte::io::did_you_mean(name, names);
}

const Command* find_command(const std::string& name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

int run_command(const Command& c, int argc, char** argv) {
  return wte::cli::run_reporting_errors(c.name, [&] { return c.run(argc, argv); });
}

// Exit status `code` of `who` ("wte train", "wte"), checked against standard output: a command
// whose output could not be written (a full disk, /dev/full, a closed descriptor) has not done
// its work, so it fails (status 1, or its own failure status) with a message on stderr. Both
// streams are flushed: std::cout (synchronised with stdio, so its writes are stdout's) and stdout.
int checked_exit(const char* who, int code) {
  errno = 0;
  const bool flush_failed = std::fflush(stdout) != 0;
  int err = flush_failed ? errno : 0;
  std::cout.flush();  // nothing left to write (synchronised): a failure set before shows here
  const bool failed = flush_failed || std::ferror(stdout) || !std::cout;
  if (!failed) return code;
  std::fprintf(stderr, "%s: error: cannot write standard output: %s\n", who,
               err != 0 ? std::strerror(err) : "a write failed (the output is incomplete)");
  return code == 0 ? 1 : code;
}

int main_unchecked(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string verb = argv[1];
  if (verb == "help" && argc >= 3) {  // wte help CMD [SUB]: CMD's (or CMD SUB's) --help
    const Command* c = find_command(argv[2]);
    if (c == nullptr) {
      std::fprintf(stderr, "wte help: unknown command '%s'%s\n\n", argv[2],
                   command_suggestion(argv[2]).c_str());
      print_usage(stderr);
      return 2;
    }
    char help_flag[] = "--help";
    if (argc >= 4) {  // a subcommand (wte help profile comm): CMD SUB --help
      char* args[] = {argv[2], argv[3], help_flag, nullptr};
      return run_command(*c, 3, args);
    }
    char* args[] = {argv[2], help_flag, nullptr};
    return run_command(*c, 2, args);
  }
  if (verb == "--help" || verb == "-h" || verb == "help") {
    print_usage(stdout);
    return 0;
  }
  if (verb == "--version" || verb == "version") {
    print_version();
    return 0;
  }
  if (const Command* c = find_command(verb)) {
    // Every command but profile (which measures kernels as configured) runs with wte's
    // busy-machine OpenMP default unless the environment chooses (train/omp_env.h).
    if (verb != "profile") wte::apply_default_wait_policy(argv);
    return run_command(*c, argc - 1, argv + 1);
  }
  std::fprintf(stderr, "wte: unknown command '%s'%s\n\n", verb.c_str(),
               command_suggestion(verb).c_str());
  print_usage(stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  wte::io::set_invoked_program(argc > 0 ? argv[0] : nullptr);  // hints name the binary as run
  const int code = main_unchecked(argc, argv);
  std::string who = "wte";
  if (argc >= 2) {
    const std::string verb = argv[1];
    const char* named = verb == "help" && argc >= 3 ? argv[2] : argv[1];
    if (find_command(named) != nullptr) who += std::string(" ") + named;
  }
  return checked_exit(who.c_str(), code);
}
