#include "src/io/run_checkpoint.h"

#include <filesystem>
#include <system_error>

#include "wte/checkpoint.h"
#include "wte/error.h"
#include "src/io/file_checks.h"
#include "src/io/snapshot.h"

namespace wte::io {

std::string resolve_checkpoint(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!path.empty() && fs::is_directory(path, ec)) {
    const auto found = list_checkpoints(path);
    if (!found.empty()) return found.back().second;
    const auto snapshots = list_snapshots(path);
    throw Error(what + "'" + path + "' is a directory that holds no checkpoint_<step>.h5" +
                (snapshots.empty()
                     ? std::string("; give a checkpoint file or a run directory of wte train")
                     : "; give one of its snapshots (weights only), e.g. " +
                           snapshots.back().second));
  }
  require_input_file(what, path, " (give a checkpoint .h5 or a run directory)");
  return path;
}

}  // namespace wte::io
