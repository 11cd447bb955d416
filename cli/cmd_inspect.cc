// `wte inspect [--checkpoint] CHECKPOINT`: what a checkpoint holds, after validating it as loading does.
#include <boost/program_options.hpp>
#include <algorithm>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "wte/checkpoint.h"
#include "wte/error.h"
#include "cli/options.h"
#include "src/io/invocation.h"
#include "cli/commands.h"

namespace wte::cli {

int cmd_inspect(int argc, char** argv) {
  namespace po = boost::program_options;
  po::options_description opts("Options");
  opts.add_options()("help,h", "print this help")(
      "checkpoint", po::value<std::string>()->value_name("FILE"),
      "the checkpoint (or snapshot) .h5 to inspect, or a run directory (its newest checkpoint)");
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  CommandSpec spec;
  spec.usage =
      "Usage: wte inspect --checkpoint FILE   (or: wte inspect FILE)\n\n"
      "Validates an HDF5 checkpoint with the same checks as loading it (format and\n"
      "version, config hash, every dataset's dtype and shape, the tokenizer, the data\n"
      "order) and prints its format version, step, schedule and data position, the\n"
      "parameter shapes and sizes, and the resolved config. Exit 0 if valid, 1 with an\n"
      "error naming the file and the problem if not; 2 for bad usage.\n"
      "Layout: docs/checkpoint.md.\n\n";
  spec.example = "Example:\n  wte inspect runs/default/checkpoint_00000600.h5\n";
  spec.positional = &positional;
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  if (cl.help) return 0;
  require_options(cl.vm, {"checkpoint"});
  const std::string path = checkpoint_option("--checkpoint", cl.vm["checkpoint"].as<std::string>());
  const CheckpointInfo info = read_checkpoint_info(path);  // throws wte::Error: exit 1
  std::printf("checkpoint: %s\nformat: %s version %lld (valid: every dataset read and checked)\n",
              path.c_str(), kCheckpointFormat, static_cast<long long>(info.format_version));
  std::printf("step: %lld\n", static_cast<long long>(info.step));
  std::printf("config_fnv1a64: %016llx\n", static_cast<unsigned long long>(info.config_fnv1a64));
  size_t total = 0;
  std::printf("parameters:\n");
  // Columns as wide as the longest name ("h11/attn/c_attn/w") and shape.
  auto shape_of = [](const TensorSpec& t) {
    std::string shape = "(";
    for (size_t i = 0; i < t.shape.size(); ++i)
      shape += (i ? ", " : "") + std::to_string(t.shape[i]);
    return shape + (t.shape.size() == 1 ? ",)" : ")");
  };
  int name_w = 8, shape_w = 14;
  for (const TensorSpec& t : info.tensors) {
    name_w = std::max(name_w, static_cast<int>(t.name.size()));
    shape_w = std::max(shape_w, static_cast<int>(shape_of(t).size()));
  }
  for (const TensorSpec& t : info.tensors) {
    std::printf("  %-*s float32 %-*s %10zu values %12zu bytes\n", name_w, t.name.c_str(), shape_w,
                shape_of(t).c_str(), t.size, t.size * sizeof(float));
    total += t.size;
  }
  std::printf("  %-*s %zu parameters, %zu bytes\n", name_w, "total", total, total * sizeof(float));
  if (info.has_optimizer)
    std::printf("optimizer: AdamW, step %lld, m and v for every parameter (%zu bytes)\n",
                static_cast<long long>(info.optimizer_step), 2 * total * sizeof(float));
  else
    std::printf("optimizer: none (weights only)\n");
  if (info.has_resume) {
    const ResumeState& r = info.resume;
    std::printf("schedule: step %lld of train.steps %llu, last lr %.6g\n",
                static_cast<long long>(info.step), static_cast<unsigned long long>(r.total_steps),
                static_cast<double>(r.lr));
    std::printf("data: epoch %llu, cursor %llu of %llu samples, shuffle %s, rng_state %016llx "
                "%016llx %016llx %016llx\n",
                static_cast<unsigned long long>(r.data.epoch),
                static_cast<unsigned long long>(r.data.cursor),
                static_cast<unsigned long long>(r.data.num_samples), r.data.shuffle ? "on" : "off",
                static_cast<unsigned long long>(r.data.rng_state[0]),
                static_cast<unsigned long long>(r.data.rng_state[1]),
                static_cast<unsigned long long>(r.data.rng_state[2]),
                static_cast<unsigned long long>(r.data.rng_state[3]));
    std::printf("tokens: train %llu (fnv1a64 %016llx), validation %llu (fnv1a64 %016llx)\n",
                static_cast<unsigned long long>(r.train_tokens),
                static_cast<unsigned long long>(r.train_tokens_fnv1a64),
                static_cast<unsigned long long>(r.val_tokens),
                static_cast<unsigned long long>(r.val_tokens_fnv1a64));
    std::printf("resumable: yes (%s train --resume %s)\n", io::invoked_program().c_str(),
                path.c_str());
  } else {
    std::printf("resumable: no (no /data and /schedule)\n");
  }
  std::printf("tokenizer: encoder.json %zu bytes, vocab.bpe %zu bytes\n", info.encoder_json.size(),
              info.vocab_bpe.size());
  std::printf("config:\n%s", info.config_ini.c_str());
  return 0;
}

}  // namespace wte::cli
