// Checks the checkpoint loaders share (src/io/checkpoint.cc: read_checkpoint_info and
// load_checkpoint; src/analysis/gradcheck.cc: load_model_file). Private to wte.
#pragma once

#include <hdf5.h>

#include <functional>
#include <string>
#include <vector>

#include "wte/model.h"

namespace wte {

/// Reads the float32 dataset `name` under `where` (a group of the checkpoint `path`) of exactly
/// `shape` into dst (hdf5::read_f32: kind, dtype, shape and storage checked first), then checks
/// every value is finite and, if `nonnegative` (AdamW's v), >= 0. wte::Error names the dataset,
/// the value and its index.
void read_tensor(hid_t where, const std::string& name, const std::vector<size_t>& shape,
                 float* dst, const std::string& path, bool nonnegative = false);

/// Every dataset under `root` must be one a checkpoint of `tensors` may hold: the tensors, their
/// optimizer/m and optimizer/v moments, data/order, data/rng_state, tokenizer/encoder_json,
/// tokenizer/vocab_bpe and config/ini. A tied model (`tied`) may also hold an lm_head equal to
/// wte bit for bit (exporters write both). Anything else is a wte::Error naming the dataset; a
/// tied model's lm_head that differs from wte names both and the difference.
void check_datasets_explained(hid_t root, const std::vector<TensorSpec>& tensors, bool tied,
                              const std::string& path);

/// Runs `read` (a full read of the file `path`, e.g. load_model_file's own) in a child process
/// first (hdf5::run_isolated, with validate_checkpoint_isolated's time limits) unless the file is
/// in HDF5's checksummed format (hdf5::checksummed_format), is not a regular file, or passed
/// before; does nothing in that child itself. Then the caller reads it in-process: HDF5 has
/// parsed all of it once without crashing. `what` names the file in errors.
void isolate_unless_checksummed(const std::string& path, const std::string& what,
                                const std::function<void()>& read);

}  // namespace wte
