#include "src/io/snapshot.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "wte/checkpoint.h"
#include "wte/error.h"

namespace fs = std::filesystem;

namespace wte {

std::string snapshot_path(const std::string& dir, uint64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "snapshot_%08llu.h5", static_cast<unsigned long long>(step));
  return (fs::path(dir) / name).string();
}

bool save_snapshot_if_due(const Config& cfg, const std::string& out_dir, const Model& model,
                          const Tokenizer& tokenizer, uint64_t step) {
  const auto& steps = cfg.train.snapshot_steps;
  if (!std::binary_search(steps.begin(), steps.end(), static_cast<size_t>(step))) return false;
  save_checkpoint(snapshot_path(out_dir, step), model, /*optimizer=*/nullptr, tokenizer, cfg,
                  static_cast<int64_t>(step));
  return true;
}

std::vector<std::pair<uint64_t, std::string>> list_snapshots(const std::string& dir,
                                                            const std::string& prefix) {
  if (!fs::is_directory(dir)) throw Error("'" + dir + "' is not a directory");
  const std::regex name_re(std::regex_replace(prefix, std::regex("[^A-Za-z0-9_]"), "\\$&") +
                           "([0-9]+)\\.h5");
  std::vector<std::pair<uint64_t, std::string>> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, m, name_re))
      out.emplace_back(std::stoull(m[1].str()), entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace wte
