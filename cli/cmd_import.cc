// `wte import --from DIR --out FILE.h5` (or --safetensors/--hf-config/--tokenizer one by one):
// a Hugging Face GPT-2 into a wte checkpoint. Option parsing only; the work is
// import_hf_gpt2 (include/wte/interop.h).
#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cli/options.h"
#include "cli/progress.h"
#include "cli/commands.h"
#include "wte/error.h"
#include "wte/interop.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace wte::cli {

int cmd_import(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("from", po::value<std::string>(),
       "a Hugging Face GPT-2 directory: model.safetensors, config.json, vocab.json, merges.txt")
      ("safetensors", po::value<std::string>(), "the model.safetensors file (default: DIR/model.safetensors)")
      ("hf-config", po::value<std::string>(),
       "the model's config.json (default: beside the safetensors file)")
      ("tokenizer", po::value<std::string>(),
       "directory with vocab.json + merges.txt, or encoder.json + vocab.bpe (default: beside "
       "the safetensors file)")
      ("out,o", po::value<std::string>(), "the wte checkpoint to write (.h5)");
  // clang-format on
  CommandSpec spec;
  spec.usage =
      "Usage: wte import --from DIR --out FILE.h5\n"
      "       wte import --safetensors FILE [--hf-config FILE] [--tokenizer DIR] --out FILE.h5\n\n"
      "Reads a Hugging Face GPT-2 (transformers' GPT2LMHeadModel or GPT2Model: model.safetensors\n"
      "with F32, F16 or BF16 tensors, named with or without \"transformer.\"; config.json; the\n"
      "tokenizer's vocab.json + merges.txt) and writes a weights-only wte checkpoint (step 0) that\n"
      "wte hidden-states, geometry, sample, export and train --init-from read. Every tensor, shape,\n"
      "dtype and offset is checked before anything is written; an error names the file and the\n"
      "tensor or offset, and leaves no output. Name map and layouts: docs/interop.md.\n\n";
  spec.example =
      "Example (GPT-2 small from huggingface.co/gpt2: model.safetensors, config.json,\n"
      "vocab.json and merges.txt in models/gpt2):\n"
      "  wte import --from models/gpt2 --out models/gpt2.h5\n";
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  if (!vm.count("out")) throw UsageError("--out FILE.h5 is required: the checkpoint to write");
  if (!vm.count("from") && !vm.count("safetensors"))
    throw UsageError("give --from DIR (a Hugging Face model directory) or --safetensors FILE");
  HfImportSource src;
  const std::string from = vm.count("from") ? vm["from"].as<std::string>() : "";
  if (!from.empty() && !fs::is_directory(from))
    throw Error("--from " + from + ": " + (fs::exists(from) ? "not a directory" : "does not exist") +
                " (give the directory of a Hugging Face GPT-2: model.safetensors, config.json, "
                "vocab.json and merges.txt)");
  src.safetensors = vm.count("safetensors") ? vm["safetensors"].as<std::string>()
                                            : (fs::path(from) / "model.safetensors").string();
  const fs::path beside = from.empty() ? fs::path(src.safetensors).parent_path() : fs::path(from);
  src.config_json = vm.count("hf-config") ? vm["hf-config"].as<std::string>()
                                          : (beside / "config.json").string();
  src.tokenizer = vm.count("tokenizer") ? vm["tokenizer"].as<std::string>()
                                        : (beside.empty() ? fs::path(".") : beside).string();
  const std::string out = vm["out"].as<std::string>();
  for (const auto& [option, path] : {std::pair<const char*, std::string>{"--safetensors", src.safetensors},
                                     {"--hf-config", src.config_json}})
    io::require_input_file(std::string(option) + " ", path,
                           from.empty() ? "" : " (in --from " + from + ")");
  const OutputParentDirs out_dirs("--out", out);  // created like export's --out, removed on error
  check_output_file("--out", out);
  // The tokenizer's files are inputs too: -o DIR/merges.txt must not overwrite the merges being read.
  std::vector<std::pair<std::string, std::string>> inputs = {{"--safetensors", src.safetensors},
                                                             {"--hf-config", src.config_json}};
  for (const char* name : {"vocab.json", "merges.txt", "encoder.json", "vocab.bpe"})
    inputs.emplace_back("--tokenizer", (fs::path(src.tokenizer) / name).string());
  check_output_not_input("--out", out, inputs);

  std::error_code ec;
  const uintmax_t bytes = fs::file_size(src.safetensors, ec);
  progress_note("wte import", "reading and checking " + src.safetensors +
                                  (ec ? std::string() : " (" + std::to_string(bytes) + " bytes)") +
                                  ", then writing " + out);
  const HfImportSummary s = import_hf_gpt2(src, out);
  std::string ignored;
  if (!s.ignored.empty())
    ignored = "; ignored " + std::to_string(s.ignored.size()) + " buffer(s) (" + s.ignored.front() +
              (s.ignored.size() > 1 ? ", ..." : "") + ")";
  std::printf("wte import: %s (%llu bytes): GPT-2 with vocab_size %zu, d_model %zu, n_ctx %zu, "
              "n_layer %zu, n_head %zu, ln_eps %g, %s lm_head\n",
              src.safetensors.c_str(), static_cast<unsigned long long>(s.safetensors_bytes),
              s.model.vocab_size, s.model.d_model, s.model.n_ctx, s.model.n_layer, s.model.n_head,
              static_cast<double>(s.model.ln_eps), s.model.tie_embeddings ? "tied" : "untied");
  std::printf("wte import: %zu tensors (%zu F32, %zu F16, %zu BF16; names %s \"transformer.\"%s%s), "
              "%zu parameters; tokenizer %s\n",
              s.tensors, s.f32, s.f16, s.bf16, s.prefixed ? "with" : "without",
              s.lm_head_in_file ? (s.model.tie_embeddings ? "; lm_head.weight equals wte" : "") : "",
              ignored.c_str(), s.parameters, src.tokenizer.c_str());
  std::printf("wte import: wrote %s (%llu bytes) in %.2f s (read and checked %.2f s, written %.2f s)\n",
              out.c_str(), static_cast<unsigned long long>(fs::file_size(out)),
              s.read_seconds + s.write_seconds, s.read_seconds, s.write_seconds);
  return 0;
}

}  // namespace wte::cli
