// The inputs of `wte geometry`, read before any measurement: the checkpoints of a series (files or
// run directories), wte of each with the first one's tokenizer, and the token frequencies that
// pick the most frequent tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/analysis/geometry_report.h"
#include "wte/tokenizer.h"

namespace wte {

/// The checkpoint files of `args` (each given as --checkpoint): a file stays itself (checked to be
/// a regular file); a run directory becomes its snapshot_<step>.h5 files in step order, else its
/// checkpoint_<step>.h5 files, and the run's final checkpoint ends the series also when it is no
/// snapshot step. Throws wte::Error naming the argument for a missing or special file, or a
/// directory without snapshots and checkpoints.
std::vector<std::string> expand_checkpoints(const std::vector<std::string>& args);

/// wte of every checkpoint (validated), in step order, with the first one's tokenizer.
struct WteSeries {
  std::vector<WteSnapshot> snaps;  // each (V, C)
  Tokenizer tok;
  size_t V = 0, C = 0;
};

/// Reads wte of every checkpoint of `paths` (load_checkpoint_model) and sorts them by step
/// (stable). Throws wte::Error naming the file for an unreadable checkpoint, or one whose wte
/// shape or tokenizer differs from the first's (a series must come from one run).
WteSeries read_wte_series(const std::vector<std::string>& paths);

/// Occurrences of every id in [0, V) in the int32 token file `path` (read_token_file; every id
/// checked against V). Throws wte::Error naming the file for an unreadable file or an id >= V.
std::vector<uint64_t> token_counts(const std::string& path, size_t V);

}  // namespace wte
