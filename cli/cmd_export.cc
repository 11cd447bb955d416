// `wte export --checkpoint C --format safetensors|npy --out DIR`: a wte model in Hugging Face's
// names and layouts. Option parsing only; the work is export_hf_gpt2 (include/wte/interop.h).
#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "cli/options.h"
#include "src/io/suggest.h"
#include "cli/progress.h"
#include "cli/commands.h"
#include "wte/error.h"
#include "wte/interop.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace wte::cli {

int cmd_export(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("checkpoint", po::value<std::string>(), "a checkpoint or snapshot .h5 (wte train, wte import), or a run directory (its newest checkpoint)")
      ("format", po::value<std::string>()->default_value("safetensors"),
       "safetensors (model.safetensors) or npy (one NAME.npy per tensor)")
      ("out,o", po::value<std::string>(), "the output directory (created if needed)");
  // clang-format on
  CommandSpec spec;
  spec.usage =
      "Usage: wte export --checkpoint C [--format safetensors|npy] --out DIR\n\n"
      "Writes the checkpoint's model with Hugging Face's GPT-2 names and layouts (GPT2LMHeadModel's\n"
      "state dict: transformer.wte.weight, transformer.h.0.attn.c_attn.weight (in, out) as Conv1D,\n"
      "...; lm_head.weight only when untied), float32, plus config.json, vocab.json and merges.txt,\n"
      "so transformers' GPT2LMHeadModel.from_pretrained(DIR) loads it and wte import reads it back\n"
      "bit for bit. Files are written as NAME.tmp and renamed only when all are complete, all or\n"
      "none (a failed rename puts back the files renamed before it): an error leaves no new file\n"
      "and the directory's earlier files as they were. Name map: docs/interop.md.\n\n";
  spec.example =
      "Example:\n  wte export --checkpoint runs/default --out exported/default\n"
      "  python3 -c 'import transformers as t; "
      "t.GPT2LMHeadModel.from_pretrained(\"exported/default\")'\n";
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  if (!vm.count("checkpoint") || !vm.count("out"))
    throw UsageError("needs --checkpoint C and --out DIR");
  const std::string fmt = vm["format"].as<std::string>();
  if (fmt != "safetensors" && fmt != "npy")
    throw UsageError("--format = '" + fmt + "' is not allowed; allowed: safetensors, npy" +
                     io::did_you_mean(fmt, {"safetensors", "npy"}));
  const std::string out = vm["out"].as<std::string>();
  const std::string ckpt = checkpoint_option("--checkpoint", vm["checkpoint"].as<std::string>());
  if (fs::exists(out) && !fs::is_directory(out))
    throw Error("--out " + out + " exists and is not a directory");
  // The files export_hf_gpt2 writes into --out, each through NAME.tmp.
  check_output_dir_not_input("--out", out, {{"--checkpoint", ckpt}}, [&](const std::string& n) {
    if (n == "config.json" || n == "vocab.json" || n == "merges.txt") return true;
    if (fmt == "npy") return n.size() > 4 && n.compare(n.size() - 4, 4, ".npy") == 0;
    return n == "model.safetensors";
  });
  progress_note("wte export", "reading " + ckpt + ", then writing " + fmt + " files into " + out);
  const ExportSummary s =
      export_hf_gpt2(ckpt, fmt == "npy" ? ExportFormat::kNpy : ExportFormat::kSafetensors, out);
  std::printf("wte export: %s -> %s: %zu tensors, %zu files, %llu bytes:\n", ckpt.c_str(),
              out.c_str(), s.tensors, s.files.size(), static_cast<unsigned long long>(s.bytes));
  for (size_t i = 0; i < s.files.size(); ++i) {
    if (s.files.size() > 8 && i == 3) {
      std::printf("  ... (%zu more)\n", s.files.size() - 6);
      i = s.files.size() - 4;
      continue;
    }
    std::printf("  %s\n", s.files[i].c_str());
  }
  return 0;
}

}  // namespace wte::cli
