// `wte`: the command-line tool. Dispatches to one subcommand per verb (see train/commands.h).
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>

#include "wte/error.h"
#include "train/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"train", wte::cli::cmd_train, "train a GPT-2-style embedding model from an INI config"},
    {"tokenize", wte::cli::cmd_tokenize, "print the BPE token ids and pieces of texts"},
    {"inspect", wte::cli::cmd_inspect, "validate a checkpoint and print its step, shapes and config"},
    {"profile", wte::cli::cmd_profile, "time the embedding gather, scatter strategies and a training step"},
    {"gradcheck", wte::cli::cmd_gradcheck,
     "check every gradient: finite differences in double, and the float32 model vs the reference"},
    {"grad", wte::cli::cmd_grad, "one forward/backward on a token batch; loss, logits, gradients to HDF5"},
    {"geometry", wte::cli::cmd_geometry,
     "measure and draw wte's geometry (neighbours, anisotropy, rank, purity, PCA) over snapshots"},
    {"hidden-states", wte::cli::cmd_hidden_states,
     "print hidden_states[0] = wte[id] + wpe[pos] of texts; same token, same index: same bits"},
    {"sample", wte::cli::cmd_sample, "generate text from a checkpoint (KV cache, temperature, top-k, seed)"},
};

void print_usage(FILE* out) {
  std::fprintf(out,
               "wte: trains GPT-2-style token embeddings (wte, wpe, ln_f, tied lm_head) on the CPU.\n\n"
               "Usage: wte <command> [options]   (wte <command> --help for a command's options)\n\n"
               "Commands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string verb = argv[1];
  if (verb == "--help" || verb == "-h" || verb == "help") {
    print_usage(stdout);
    return 0;
  }
  if (verb == "--version") {
    std::printf("wte 0.1.0\n");
    return 0;
  }
  for (const Command& c : kCommands) {
    if (verb == c.name) {
      try {
        return c.run(argc - 1, argv + 1);
      } catch (const wte::Error& e) {
        std::fprintf(stderr, "wte %s: error: %s\n", c.name, e.what());
        return 1;
      } catch (const std::filesystem::filesystem_error& e) {
        std::fprintf(stderr, "wte %s: error: %s\n", c.name, e.what());
        return 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "wte %s: internal error: %s\n", c.name, e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "wte: unknown command '%s'\n\n", verb.c_str());
  print_usage(stderr);
  return 2;
}
