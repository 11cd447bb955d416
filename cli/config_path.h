// Where `-c NAME` finds a config: a config name ("default", "embedding_only") means the
// configs/NAME.ini that ships with wte, wherever wte runs from.
#pragma once

#include <string>
#include <vector>

namespace wte::cli {

/// The directories holding wte's shipped configs, in search order: BIN/../share/wte/configs of an
/// installed wte (BIN: the directory of the running binary), then, for a binary run from its
/// build directory, the source tree's configs/.
std::vector<std::string> config_search_dirs();

/// The config file `value` (as given to --config) names: `value` itself if it is an existing path
/// or holds a '/'; else (a bare name such as "default" or "default.ini") the first
/// DIR/NAME.ini of config_search_dirs(), or `value` unchanged if it ends in ".ini" and none is
/// there (the loader then says that file does not exist). Throws wte::UsageError for a bare name
/// found nowhere, naming the value, the closest config name ("did you mean"), the directories
/// searched and the configs found there.
std::string resolve_config_path(const std::string& value);

}  // namespace wte::cli
