// `wte train --config FILE [--out DIR] [--section.key=value ...]`
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "src/config.h"
#include "src/error.h"
#include "train/commands.h"
#include "train/trainer.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace wte::cli {

int cmd_train(int argc, char** argv) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "print this help")(
      "config,c", po::value<std::string>(), "INI config file (configs/default.ini is the default job)")(
      "out,o", po::value<std::string>(),
      "run directory for metrics.csv, checkpoints, tokenizer (default: runs/<config name>)")(
      "quiet,q", "no progress lines");
  po::variables_map vm;
  std::vector<std::string> overrides;
  try {
    po::parsed_options parsed = po::command_line_parser(argc, argv)  // skips argv[0], "train"
                                    .options(desc)
                                    .allow_unregistered()
                                    .run();
    overrides = po::collect_unrecognized(parsed.options, po::include_positional);
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "wte train: %s (see wte train --help)\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << "Usage: wte train --config FILE [--out DIR] [--section.key=value ...]\n\n"
                 "Trains a GPT-2-style embedding model (wte + wpe -> ln_f -> tied lm_head, no\n"
                 "transformer blocks yet) on a text corpus, on the CPU. Prints a progress line\n"
                 "(step, loss, tokens/s, ETA), writes DIR/metrics.csv, DIR/config.ini (resolved),\n"
                 "DIR/tokenizer/, int32 token files DIR/{train,val}.bin and HDF5 checkpoints\n"
                 "DIR/checkpoint_<step>.h5, and ends with the final validation loss beside the\n"
                 "unigram baseline.\n\n"
              << desc
              << "\nConfig keys: INI sections [model] [data] [train] [optim] [checkpoint]; any key\n"
                 "can be overridden on the command line as --section.key=value (the command line\n"
                 "wins). Keys, defaults and allowed values:\n"
              << config_help()
              << "\nExample:\n  wte train --config configs/default.ini --train.steps=200 "
                 "--out runs/short\n";
    return 0;
  }
  for (const std::string& o : overrides) {
    if (o.rfind("--", 0) != 0) {
      std::fprintf(stderr, "wte train: unexpected argument '%s' (see wte train --help)\n",
                   o.c_str());
      return 2;
    }
  }
  const std::string config_path = vm.count("config") ? vm["config"].as<std::string>() : "";
  const Config cfg = load_config(config_path, overrides);
  RunOptions opts;
  opts.quiet = vm.count("quiet") > 0;
  opts.out_dir = vm.count("out") ? vm["out"].as<std::string>()
                                 : (fs::path("runs") / (config_path.empty()
                                                            ? std::string("default")
                                                            : fs::path(config_path).stem().string()))
                                       .string();
  const RunSummary summary = run_training(cfg, opts);
  (void)summary;  // printed by run_training
  return 0;
}

}  // namespace wte::cli
