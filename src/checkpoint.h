// HDF5 checkpoints that h5py (or h5ls/h5dump) can read without wte.
//
// Layout, format "wte-checkpoint" version 1 (docs/checkpoint.md has the full table):
//   /                    attributes: format (string), format_version (int64), step (int64)
//   /wte                 float32 (vocab_size, d_model)   token embedding = tied lm_head, stored once
//   /wpe                 float32 (n_ctx, d_model)
//   /ln_f/g, /ln_f/b     float32 (d_model)               (GPT-2's names model/ln_f/g, model/ln_f/b)
//   /optimizer/m/<name>, /optimizer/v/<name>  float32, the shapes above; attribute step (int64)
//   /tokenizer/encoder_json, /tokenizer/vocab_bpe        UTF-8 strings, GPT-2's two files
//   /config/ini          UTF-8 string, the resolved configuration
// Reserved for exact resume (a later format version): /data (epoch, cursor, shuffle RNG state).
#pragma once

#include <cstdint>
#include <string>

#include "src/config.h"
#include "src/model.h"
#include "src/optimizer.h"
#include "src/tokenizer.h"

namespace wte {

inline constexpr const char* kCheckpointFormat = "wte-checkpoint";
inline constexpr int64_t kCheckpointVersion = 1;

/// Writes a checkpoint atomically: PATH.tmp in the same directory, closed, fsynced, renamed over
/// PATH, then the directory fsynced. A crash at any moment leaves the previous file at PATH whole.
/// `optimizer` may be null (no /optimizer group). Throws wte::Error naming the path on failure,
/// after removing the temporary file.
void save_checkpoint(const std::string& path, const Model& model, const AdamW* optimizer,
                     const Tokenizer& tokenizer, const Config& config, int64_t step);

/// What a checkpoint holds besides the tensors (which load_checkpoint copies into a Model).
struct CheckpointInfo {
  int64_t format_version = 0;
  int64_t step = 0;
  std::string config_ini;
  std::string encoder_json;
  std::string vocab_bpe;
};

/// Reads the metadata and validates the file: it must be HDF5 with format "wte-checkpoint", a
/// version this build reads, and every dataset present with the shapes the stored config implies
/// and dtype float32. Throws wte::Error naming the path and what is wrong; never a partial result.
CheckpointInfo read_checkpoint_info(const std::string& path);

/// Copies the stored parameters (and the optimizer state, if `optimizer` is not null and the file
/// has it) into `model`, whose config must match the file's shapes (else wte::Error naming the
/// tensor and both shapes). Everything is read into temporaries first: on error nothing changes.
void load_checkpoint(const std::string& path, Model& model, AdamW* optimizer);

}  // namespace wte
