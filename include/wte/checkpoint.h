// HDF5 checkpoints that h5py (or h5ls/h5dump) can read without wte, complete enough to resume
// training bit for bit.
//
// Layout, format "wte-checkpoint" version 3 (docs/checkpoint.md has the full table), in HDF5
// 1.10's file format (every piece of metadata checksummed), datasets chunked with Fletcher-32,
// strings fixed-length:
//   /                    attributes: format (string), format_version (int64), step (int64),
//                        config_fnv1a64 (uint64, FNV-1a 64 of /config/ini)
//   /<tensor>            float32, one dataset per Model::tensors() entry: /wte (vocab_size, d_model)
//                        = the tied lm_head, stored once; /wpe (n_ctx, d_model); /ln_f/g, /ln_f/b
//   /optimizer/m/<name>, /optimizer/v/<name>  float32, the shapes above; attribute step (int64)
//   /schedule            attributes step (int64), total_steps (int64), lr (float32)
//   /data                attributes epoch, cursor, num_samples, shuffle, train_tokens, val_tokens
//                        (int64), train_tokens_fnv1a64, val_tokens_fnv1a64 (uint64); datasets
//                        order uint32 (num_samples,), rng_state uint64 (4,)
//   /tokenizer/encoder_json, /tokenizer/vocab_bpe        UTF-8 strings, GPT-2's two files;
//                        attributes encoder_json_fnv1a64, vocab_bpe_fnv1a64 (uint64) on /tokenizer
//   /config/ini          UTF-8 string, the resolved configuration
// /optimizer, /schedule and /data are present together in a resumable checkpoint (the trainer's);
// a weights-only checkpoint (save_checkpoint without an optimizer and resume state) has neither.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wte/config.h"
#include "wte/data.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "wte/tokenizer.h"

namespace wte {

inline constexpr const char* kCheckpointFormat = "wte-checkpoint";
/// The version save_checkpoint writes.
inline constexpr int64_t kCheckpointVersion = 3;
/// The oldest version the readers accept: version 2 (HDF5's earliest file format, variable-length
/// strings, no checksums), validated in a child process before it is read (validate_checkpoint_isolated).
inline constexpr int64_t kOldestCheckpointVersion = 2;

/// What a resumed run needs besides parameters and optimizer moments: the data order, the identity
/// of the token streams it was trained on, and the learning-rate schedule's position.
/// The schedule is learning_rate(step, train.steps, optim) (include/wte/optimizer.h), a pure function of the
/// checkpoint's step, so the position is the step itself; `lr` records the value used at the last
/// step taken, for inspection. wte has no other random state during training: the init's Rng
/// (Model::init_weights) is used up before step 1 and nothing else draws random numbers.
struct ResumeState {
  LoaderState data;                    // BatchLoader position over the train stream
  uint64_t train_tokens = 0;           // length of the train token stream
  uint64_t val_tokens = 0;             // length of the validation token stream
  uint64_t train_tokens_fnv1a64 = 0;   // fnv1a64 of the train stream's int32 bytes
  uint64_t val_tokens_fnv1a64 = 0;
  uint64_t total_steps = 0;            // train.steps when the checkpoint was written
  float lr = 0.0f;                     // learning rate of the last step taken
};

/// Writes a checkpoint atomically: PATH.tmp in the same directory, closed, fsynced, renamed over
/// PATH, then the directory fsynced (wte::commit_file). A crash at any moment leaves the previous
/// file at PATH whole and never a partial file at PATH. `optimizer` and `resume` may be null
/// (then no /optimizer, or no /schedule and /data). Throws wte::Error naming the path on failure,
/// after removing the temporary file.
void save_checkpoint(const std::string& path, const Model& model, const AdamW* optimizer,
                     const Tokenizer& tokenizer, const Config& config, int64_t step,
                     const ResumeState* resume = nullptr);

/// What a checkpoint holds besides the tensors (which load_checkpoint copies into a Model).
struct CheckpointInfo {
  int64_t format_version = 0;
  int64_t step = 0;
  std::string config_ini;
  uint64_t config_fnv1a64 = 0;
  std::string encoder_json;
  std::string vocab_bpe;
  std::vector<TensorSpec> tensors;    // the parameter datasets, in Model::tensors() order
  bool has_optimizer = false;
  int64_t optimizer_step = 0;
  bool has_resume = false;            // /schedule and /data present
  ResumeState resume;
  /// True if the file has everything `wte train --resume` needs (optimizer and resume state).
  bool resumable() const { return has_optimizer && has_resume; }
};

/// Reads the metadata and validates the whole file, reading every dataset: it must exist and be
/// HDF5 with format "wte-checkpoint" and a version this build reads; config_fnv1a64 must match the
/// stored config text, which must parse; every parameter (and optimizer moment, if /optimizer
/// exists) must be present as float32 with the shape the stored config implies; the tokenizer must
/// parse and have vocab_size tokens; /schedule and /data, if present, must come together, with the
/// listed dtypes and shapes, a step equal to the root's and the optimizer's, and a valid data order
/// (check_loader_state). Throws wte::Error naming the path and what is wrong; never a partial
/// result. Every HDF5 handle is closed on return and on every error path.
CheckpointInfo read_checkpoint_info(const std::string& path);

/// Validates the file as read_checkpoint_info does, in a forked child process with a time limit
/// (hdf5::run_isolated), so that a damaged file that crashes or hangs HDF5's parsers is an error
/// here and never takes the caller with it: "checkpoint '<path>' is corrupt: reading it crashed
/// HDF5's parser (signal 11, ...)", or "... did not finish in N s", or the same wte::Error
/// read_checkpoint_info gives (hdf5::FileLockedError for a locked file). The child gets 3 s of CPU
/// time plus 1 s per 16 MiB of file (validating takes a small fraction of that), and the caller
/// waits at most 120 s plus 1 s per 4 MiB. The result is remembered for the rest of the process
/// (by device, inode, size and modification time): the in-process read that follows a pass does
/// not check the file twice, and a file that failed fails again at once with the same error.
/// read_checkpoint_info, load_checkpoint and load_checkpoint_model call it themselves for a file
/// not in HDF5's checksummed format (hdf5::checksummed_format: checkpoints older than version 3);
/// `wte train --resume auto` calls it for every checkpoint it considers.
void validate_checkpoint_isolated(const std::string& path);

/// Validates the file as read_checkpoint_info does and copies the stored parameters (and the
/// optimizer state, if `optimizer` is not null and the file has it) into `model`, whose tensors
/// must be the file's by name and shape (else wte::Error naming the first that differs). One pass
/// over the file: the validating read is the load. Everything is read into temporaries first: on
/// error nothing changes. Returns the info.
CheckpointInfo load_checkpoint(const std::string& path, Model& model, AdamW* optimizer);

/// A checkpoint's model: its info, its stored config and a Model of that config holding the
/// stored parameters.
struct CheckpointModel {
  CheckpointInfo info;
  Config config;
  std::unique_ptr<Model> model;
};

/// Reads, validates (as read_checkpoint_info) and loads a checkpoint's model in one pass over the
/// file, for commands that take the model's shapes from the checkpoint (sample, hidden-states,
/// geometry, export, the Python module). Not the optimizer state. Throws wte::Error as
/// read_checkpoint_info.
CheckpointModel load_checkpoint_model(const std::string& path);

/// The checkpoint file a path given for a model means: a file as it is (it must be a regular
/// file), or a run directory's newest checkpoint (the highest step of list_checkpoints(dir); not
/// validated here). Throws wte::Error naming `path` if it does not exist, is neither a regular
/// file nor a directory, or is a directory without checkpoint_<step>.h5 files; the message starts
/// with `what` (e.g. "--checkpoint ") to say where the path came from.
std::string resolve_checkpoint(const std::string& path, const std::string& what = "");

/// Everything needed to run a trained model: the checkpoint file read, its info, its stored
/// config, a Model of that config holding the stored parameters, and the tokenizer it stores.
struct LoadedModel {
  std::string path;  // the checkpoint file read (for a run directory, its newest checkpoint)
  CheckpointInfo info;
  Config config;
  std::unique_ptr<Model> model;
  Tokenizer tokenizer;
};

/// Loads a model in one call: `path` is a checkpoint file or a run directory (resolve_checkpoint),
/// read and validated as load_checkpoint_model does, and its tokenizer parsed. Not the optimizer
/// state. Throws wte::Error naming the path and what is wrong (`what` as for resolve_checkpoint).
///
///   wte::LoadedModel m = wte::load_model("runs/default");
///   std::vector<int32_t> ids = m.tokenizer.encode("And God said");
LoadedModel load_model(const std::string& path, const std::string& what = "");

/// Path of the trainer's checkpoint for `step` in `dir`: DIR/checkpoint_XXXXXXXX.h5 (8 digits).
std::string checkpoint_path(const std::string& dir, uint64_t step);

/// The trainer's checkpoints in `dir` (files named checkpoint_<digits>.h5; never *.tmp), as
/// (step, path), sorted by step, ascending. Not validated.
std::vector<std::pair<uint64_t, std::string>> list_checkpoints(const std::string& dir);

/// The checkpoint `wte train --resume auto` continues in a run directory, and the files it skipped.
struct ResumeChoice {
  std::string path;   // the chosen checkpoint; "" if none validates
  int64_t step = -1;  // its stored step; -1 if none
  /// The checkpoint files that do not validate or are weights-only, newest file name first:
  /// (file name's step, path, the error read_checkpoint_info or the isolated validation gave).
  struct Skipped {
    uint64_t name_step;
    std::string path;
    std::string error;
  };
  std::vector<Skipped> skipped;
  size_t considered = 0;  // checkpoint files in the directory (list_checkpoints)
};

/// Chooses the checkpoint `wte train --resume auto` continues in the run directory `dir`: among
/// list_checkpoints(dir), the one of the highest stored step (file names are not trusted; of two
/// with the same stored step, the one with the later file name) that validates in a child process
/// (validate_checkpoint_isolated: a file that crashes or hangs HDF5 is skipped, never fatal) and
/// then as read_checkpoint_info, and is resumable (optimizer and resume state). Every other file is
/// listed in `skipped` with its error; none is removed or renamed. Throws wte::Error ("--resume
/// auto: a checkpoint cannot be read: ...") when a checkpoint is locked by another process
/// (hdf5::FileLockedError): skipping it would resume from an older step and lose the steps since.
ResumeChoice choose_resume_checkpoint(const std::string& dir);

/// Keys of the resolved config that a resumed run may change: they do not alter the computation
/// of any step (train.steps changes the schedule's remaining length, which is the point).
/// Every other key must equal the checkpoint's.
const std::vector<std::string>& resume_mutable_keys();

/// Compares the config of a resumed run with the checkpoint's stored config. Returns one line per
/// key that differs and may not ("model.d_model: checkpoint 256, now 128"); empty if compatible.
/// Data paths (data.text, data.train_tokens, data.val_tokens) are not compared here: the trainer
/// compares the token streams' lengths and hashes instead, so a moved corpus still resumes.
std::vector<std::string> resume_config_mismatches(const Config& stored, const Config& now);

}  // namespace wte
