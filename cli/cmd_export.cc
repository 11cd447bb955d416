// `wte export --checkpoint C --format safetensors|npy|gguf [--gguf-type T] --out DIR`: a wte model
// in Hugging Face's names and layouts, or as llama.cpp's GPT-2. Option parsing only; the work is
// export_hf_gpt2 (include/wte/interop.h).
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
       "safetensors (model.safetensors), npy (one NAME.npy per tensor) or gguf (model.gguf, "
       "for llama.cpp, ollama, LM Studio, llamafile)")
      ("gguf-type", po::value<std::string>()->default_value("f32"),
       "with --format gguf, the type of the weight matrices: f32 (exact), f16 or q8_0 (8-bit "
       "blocks of 32); position_embd, LayerNorms and biases stay f32")
      ("out,o", po::value<std::string>(), "the output directory (created if needed)");
  // clang-format on
  CommandSpec spec;
  spec.usage =
      "Usage: wte export --checkpoint C [--format safetensors|npy|gguf] [--gguf-type f32|f16|q8_0]\n"
      "                  --out DIR\n\n"
      "Writes the checkpoint's model with Hugging Face's GPT-2 names and layouts (GPT2LMHeadModel's\n"
      "state dict: transformer.wte.weight, transformer.h.0.attn.c_attn.weight (in, out) as Conv1D,\n"
      "...; lm_head.weight only when untied), float32, plus config.json, vocab.json and merges.txt,\n"
      "so transformers' GPT2LMHeadModel.from_pretrained(DIR) loads it and wte import reads it back\n"
      "bit for bit, and tokenizer.json for Hugging Face's tokenizers. With --format gguf,\n"
      "model.gguf instead of the tensors: GGUF version 3 as llama.cpp's GPT-2 (token_embd,\n"
      "blk.N.attn_qkv, ...; the tokenizer in its metadata), which llama.cpp, ollama and LM Studio\n"
      "load. Files are written as NAME.tmp and renamed only when all are complete, all or none (a\n"
      "failed rename puts back the files renamed before it): an error leaves no new file and the\n"
      "directory's earlier files as they were. Name maps: docs/interop.md.\n\n";
  spec.example =
      "Example:\n  wte export --checkpoint runs/default --out exported/default\n"
      "  python3 -c 'import transformers as t; "
      "t.GPT2LMHeadModel.from_pretrained(\"exported/default\")'\n"
      "  wte export --checkpoint runs/default --format gguf --gguf-type q8_0 --out exported/gguf\n";
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  if (!vm.count("checkpoint") || !vm.count("out"))
    throw UsageError("needs --checkpoint C and --out DIR");
  const std::string fmt = vm["format"].as<std::string>();
  if (fmt != "safetensors" && fmt != "npy" && fmt != "gguf")
    throw UsageError("--format = '" + fmt + "' is not allowed; allowed: safetensors, npy, gguf" +
                     io::did_you_mean(fmt, {"safetensors", "npy", "gguf"}));
  const std::string gt = vm["gguf-type"].as<std::string>();
  GgufType gguf_type = GgufType::kF32;
  if (gt == "f16")
    gguf_type = GgufType::kF16;
  else if (gt == "q8_0")
    gguf_type = GgufType::kQ8_0;
  else if (gt != "f32")
    throw UsageError("--gguf-type = '" + gt + "' is not allowed; allowed: f32, f16, q8_0" +
                     io::did_you_mean(gt, {"f32", "f16", "q8_0"}));
  if (!vm["gguf-type"].defaulted() && fmt != "gguf")
    throw UsageError("--gguf-type is given but --format is '" + fmt + "'; it applies to --format gguf");
  const std::string out = vm["out"].as<std::string>();
  const std::string ckpt = checkpoint_option("--checkpoint", vm["checkpoint"].as<std::string>());
  if (fs::exists(out) && !fs::is_directory(out))
    throw Error("--out " + out + " exists and is not a directory");
  // The files export_hf_gpt2 writes into --out, each through NAME.tmp.
  check_output_dir_not_input("--out", out, {{"--checkpoint", ckpt}}, [&](const std::string& n) {
    if (n == "config.json" || n == "vocab.json" || n == "merges.txt" || n == "tokenizer.json")
      return true;
    if (fmt == "npy") return n.size() > 4 && n.compare(n.size() - 4, 4, ".npy") == 0;
    return n == (fmt == "gguf" ? "model.gguf" : "model.safetensors");
  });
  progress_note("wte export", "reading " + ckpt + ", then writing " + fmt + " files into " + out);
  const ExportFormat format = fmt == "npy"    ? ExportFormat::kNpy
                              : fmt == "gguf" ? ExportFormat::kGguf
                                              : ExportFormat::kSafetensors;
  const ExportSummary s = export_hf_gpt2(ckpt, format, out, gguf_type);
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
