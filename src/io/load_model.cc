// wte::resolve_checkpoint and wte::load_model (include/wte/checkpoint.h): a trained model, its
// config and its tokenizer from a checkpoint file or a run directory, in one call.
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "src/io/file_checks.h"
#include "src/io/snapshot.h"
#include "wte/checkpoint.h"
#include "wte/error.h"

namespace wte {

std::string resolve_checkpoint(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!path.empty() && std::filesystem::is_directory(path, ec)) {
    const auto found = list_checkpoints(path);
    if (!found.empty()) return found.back().second;
    const auto snapshots = list_snapshots(path);
    throw Error(what + "'" + path + "' is a directory that holds no checkpoint_<step>.h5" +
                (snapshots.empty()
                     ? std::string("; give a checkpoint file or a run directory of wte train")
                     : "; give one of its snapshots (weights only), e.g. " +
                           snapshots.back().second));
  }
  io::require_input_file(what, path, " (give a checkpoint .h5 or a run directory)");
  return path;
}

LoadedModel load_model(const std::string& path, const std::string& what) {
  LoadedModel out;
  out.path = resolve_checkpoint(path, what);
  CheckpointModel ck = load_checkpoint_model(out.path);
  out.tokenizer =
      Tokenizer::from_strings(ck.info.encoder_json, ck.info.vocab_bpe, out.path + " /tokenizer");
  out.info = std::move(ck.info);
  out.config = std::move(ck.config);
  out.model = std::move(ck.model);
  return out;
}

}  // namespace wte
