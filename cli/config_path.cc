#include "cli/config_path.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "cli/build_info.h"
#include "src/io/suggest.h"
#include "wte/error.h"

namespace fs = std::filesystem;

namespace wte::cli {

std::vector<std::string> config_search_dirs() {
  std::vector<std::string> dirs;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return dirs;
  const fs::path bin = exe.parent_path();
  dirs.push_back((bin.parent_path() / "share" / "wte" / "configs").lexically_normal().string());
  if (fs::equivalent(bin, build::kBinaryDir, ec))
    dirs.push_back((fs::path(build::kSourceDir) / "configs").string());
  return dirs;
}

std::string resolve_config_path(const std::string& value) {
  std::error_code ec;
  if (value.empty() || fs::exists(value, ec) || value.find('/') != std::string::npos) return value;
  const std::vector<std::string> dirs = config_search_dirs();
  const bool has_ini = value.size() > 4 && value.compare(value.size() - 4, 4, ".ini") == 0;
  for (const std::string& d : dirs) {
    const fs::path p = fs::path(d) / (has_ini ? value : value + ".ini");  // NAME.ini
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  if (has_ini) return value;  // a file name: the config loader says it does not exist
  std::string searched, names;
  std::vector<std::string> all;  // every config name, each once, in listing order
  for (const std::string& d : dirs) {
    searched += (searched.empty() ? "" : ", ") + d;
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".ini") found.push_back(e.path().stem().string());
    std::sort(found.begin(), found.end());
    for (const std::string& n : found)
      if (std::find(all.begin(), all.end(), n) == all.end()) {
        all.push_back(n);
        names += n + ", ";
      }
  }
  // A name that is none of the configs is a usage error (exit 2), as any value outside its choices.
  throw UsageError("config '" + value + "' is not a file here, nor a config of wte's (searched " +
                   (searched.empty() ? std::string("no directory: the binary's place is unknown")
                                     : searched) +
                   (names.empty() ? std::string(")")
                                  : "; configs there: " + names.substr(0, names.size() - 2) + ")") +
                   io::did_you_mean(value, all));
}

}  // namespace wte::cli
