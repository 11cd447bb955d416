// "A run directory means its newest checkpoint": how every command that reads one model
// (sample, hidden-states, inspect, export, eval, grad, gradcheck, wte::load_model) turns the path a
// user gave into a checkpoint file.
#pragma once

#include <string>

namespace wte::io {

/// The checkpoint file `path` names: `path` itself if it is a regular file; for a directory (a
/// run's, as wte train writes it) its checkpoint_<step>.h5 of the highest step in the file name.
/// `what` names the path in errors ("--checkpoint "). Not validated (loading does that).
/// Throws wte::Error "WHAT'PATH' does not exist" (or is not a regular file: /dev/null, a FIFO),
/// or, for a directory without checkpoints, "... holds no checkpoint_<step>.h5" (naming its
/// snapshots, which are weights-only checkpoints, if it has any).
std::string resolve_checkpoint(const std::string& path, const std::string& what = "");

}  // namespace wte::io
