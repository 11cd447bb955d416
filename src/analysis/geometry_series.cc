#include "src/analysis/geometry_series.h"

#include <algorithm>
#include <filesystem>

#include "src/io/file_checks.h"
#include "src/io/snapshot.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/model.h"

namespace fs = std::filesystem;

namespace wte {

std::vector<std::string> expand_checkpoints(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    if (fs::is_directory(a)) {
      auto list = list_snapshots(a);
      // The run's final checkpoint always ends the series, also when it is no snapshot step
      // (a shorter run of a config whose snapshot_steps go further).
      const auto checkpoints = list_snapshots(a, "checkpoint_");
      if (list.empty()) list = checkpoints;
      else if (!checkpoints.empty() && checkpoints.back().first > list.back().first)
        list.push_back(checkpoints.back());
      if (list.empty())
        throw Error("--checkpoint " + a + ": the directory has no snapshot_<step>.h5 or " +
                    "checkpoint_<step>.h5 files (train with --train.snapshot_steps=0,10,100,...)");
      for (auto& [step, path] : list) out.push_back(path);
    } else {
      io::require_input_file("--checkpoint ", a, " (give a checkpoint .h5 or a run directory)");
      out.push_back(a);
    }
  }
  return out;
}

WteSeries read_wte_series(const std::vector<std::string>& paths) {
  WteSeries ws;
  std::string encoder_json;
  for (const std::string& path : paths) {
    const CheckpointModel ck = load_checkpoint_model(path);
    const CheckpointInfo& info = ck.info;
    const Config& cfg = ck.config;
    if (ws.snaps.empty()) {
      ws.tok = Tokenizer::from_strings(info.encoder_json, info.vocab_bpe, path + " /tokenizer");
      encoder_json = info.encoder_json;
      ws.V = cfg.model.vocab_size, ws.C = cfg.model.d_model;
    } else if (cfg.model.vocab_size != ws.V || cfg.model.d_model != ws.C ||
               info.encoder_json != encoder_json) {
      throw Error(path + ": wte is (" + std::to_string(cfg.model.vocab_size) + ", " +
                  std::to_string(cfg.model.d_model) + ") with its own tokenizer, but " +
                  ws.snaps[0].path + " has (" + std::to_string(ws.V) + ", " +
                  std::to_string(ws.C) + "); a series must come from one run");
    }
    WteSnapshot s;
    s.path = path;
    s.step = info.step;
    s.wte.assign(ck.model->params().wte, ck.model->params().wte + ws.V * ws.C);
    ws.snaps.push_back(std::move(s));
  }
  std::stable_sort(ws.snaps.begin(), ws.snaps.end(),
                   [](const WteSnapshot& a, const WteSnapshot& b) { return a.step < b.step; });
  return ws;
}

std::vector<uint64_t> token_counts(const std::string& path, size_t V) {
  const std::vector<int32_t> ids = read_token_file(path);
  check_token_ids(ids.data(), ids.size(), V, path);
  std::vector<uint64_t> counts(V, 0);
  for (int32_t id : ids) ++counts[id];
  return counts;
}

}  // namespace wte
