// Opening wte both ways: Hugging Face's GPT-2 (model.safetensors + config.json + vocab.json /
// merges.txt) into a wte checkpoint, and a wte checkpoint out to the files transformers'
// GPT2LMHeadModel.from_pretrained(dir) loads (or to one .npy per tensor). The name map and the
// layouts: docs/interop.md (src/io/hf_gpt2.h holds the map).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wte/config.h"

namespace wte {

/// Where a Hugging Face GPT-2 comes from.
struct HfImportSource {
  std::string safetensors;  // model.safetensors
  std::string config_json;  // config.json (transformers' GPT2Config)
  std::string tokenizer;    // a directory with vocab.json + merges.txt (Hugging Face's names) or
                            // encoder.json + vocab.bpe (GPT-2's names for the same two files)
};

/// What import_hf_gpt2 read and wrote.
struct HfImportSummary {
  ModelConfig model;
  size_t tensors = 0;                    // model tensors read
  size_t f32 = 0, f16 = 0, bf16 = 0;     // of them, by stored dtype
  size_t parameters = 0;
  bool prefixed = false;                 // the file's names carry "transformer."
  bool lm_head_in_file = false;          // lm_head.weight was present (tied: equal to wte)
  std::vector<std::string> ignored;      // buffers skipped: h.N.attn.bias, h.N.attn.masked_bias
  uint64_t safetensors_bytes = 0;
  double read_seconds = 0, write_seconds = 0;
};

/// Reads a Hugging Face GPT-2 and writes it as a weights-only wte checkpoint at `out_checkpoint`
/// (step 0; no optimizer; config: the model's keys from config.json, ln_f on, data.seq_len =
/// min(64, n_ctx), every other key its default; the tokenizer in the checkpoint), atomically as
/// every checkpoint (save_checkpoint). Every check comes before anything is written, each a
/// wte::Error naming the file and the tensor or offset: config.json (src/io/hf_gpt2.h:
/// parse_config_json: an architecture, activation or setting wte does not have); the tokenizer
/// files (parse, and their size equals vocab_size); the safetensors file (src/io/safetensors.h:
/// header length, JSON, dtypes, shapes, offsets past the end or not tiling the buffer, a
/// truncated file); every tensor present with the shape config.json implies and dtype F32, F16 or
/// BF16 (converted exactly to float32), no tensor wte does not have (buffers h.N.attn.bias and
/// h.N.attn.masked_bias are ignored), every value finite, a tied lm_head.weight equal to wte.
/// No tensor needs a transpose (Conv1D stores (in, out), as wte does).
HfImportSummary import_hf_gpt2(const HfImportSource& source, const std::string& out_checkpoint);

enum class ExportFormat { kSafetensors, kNpy, kGguf };

/// The type of a GGUF export's weight matrices (token_embd, the blocks' linear weights, an untied
/// output); position_embd, LayerNorms and biases stay F32 in every case (as llama.cpp's converter
/// keeps them). kF32 keeps every value exactly; kF16 rounds to nearest even; kQ8_0 is ggml's
/// 8-bit blocks (32 values, one float16 scale), F16 for a matrix whose input dimension is not a
/// multiple of 32.
enum class GgufType { kF32, kF16, kQ8_0 };

/// What export_hf_gpt2 wrote.
struct ExportSummary {
  std::vector<std::string> files;  // paths written, in order
  size_t tensors = 0;
  uint64_t bytes = 0;              // bytes of all files
};

/// Writes the model of a wte checkpoint (read and validated first: read_checkpoint_info) into the
/// directory `out_dir` (created if needed) with Hugging Face's names and layouts:
///   kSafetensors: model.safetensors (F32, GPT2LMHeadModel's state-dict names "transformer.h.0.
///                 attn.c_attn.weight", ...; lm_head.weight only when untied; metadata
///                 {"format": "pt"}), so GPT2LMHeadModel.from_pretrained(out_dir) loads it;
///   kNpy:         one NAME.npy per tensor (NumPy format 1.0, '<f4', C order), NAME as above;
///   kGguf:        model.gguf (GGUF version 3, llama.cpp's GPT-2: src/io/gguf_gpt2.h), weights
///                 of type `gguf_type`, with the tokenizer in its metadata, so llama.cpp loads it;
/// plus config.json, vocab.json and merges.txt (the checkpoint's tokenizer: GPT-2's encoder.json
/// and vocab.bpe under Hugging Face's names) and tokenizer.json (Hugging Face's tokenizers
/// format of the same vocabulary). Every file is written to NAME.tmp first; the files
/// are renamed into place (fsync, rename, fsync of the directory) only after all were written, so
/// an error leaves no file of this export in out_dir. Throws wte::Error naming the file, or for a
/// model Hugging Face's GPT-2 cannot express (ln_f off), or, for kGguf kF16 / kQ8_0, naming the
/// tensor and the index of a weight float16 cannot hold (|x| > 65504, or a Q8_0 block scale
/// max|x| / 127 beyond it).
ExportSummary export_hf_gpt2(const std::string& checkpoint, ExportFormat format,
                             const std::string& out_dir, GgufType gguf_type = GgufType::kF32);

}  // namespace wte
