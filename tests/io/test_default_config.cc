// configs/default.ini is the one default: every key of the built-in defaults (what a command run
// without a config uses: wte train --help, gradcheck, profile) equals that file's value, except
// the corpus path, which only a file can give (relative to itself).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "wte/config.h"

namespace {

// "section.key = value" lines of a resolved config (Config::to_ini), in key order.
std::vector<std::pair<std::string, std::string>> keys_of(const std::string& ini) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(ini);
  std::string line, section;
  while (std::getline(in, line)) {
    if (!line.empty() && line.front() == '[') section = line.substr(1, line.find(']') - 1);
    else if (const size_t eq = line.find(" = "); eq != std::string::npos)
      out.emplace_back(section + "." + line.substr(0, eq), line.substr(eq + 3));
  }
  return out;
}

}  // namespace

TEST(DefaultConfig, BuiltInDefaultsEqualConfigsDefaultIni) {
  const wte::Config file = wte::load_config(std::string(WTE_SOURCE_DIR) + "/configs/default.ini", {});
  const auto from_file = keys_of(file.to_ini());
  const auto built_in = keys_of(wte::Config().to_ini());
  ASSERT_EQ(from_file.size(), built_in.size());
  for (size_t i = 0; i < from_file.size(); ++i) {
    ASSERT_EQ(from_file[i].first, built_in[i].first);
    if (from_file[i].first == "data.text") continue;  // a path relative to the file
    EXPECT_EQ(from_file[i].second, built_in[i].second)
        << from_file[i].first << ": configs/default.ini " << from_file[i].second
        << ", built in " << built_in[i].second;
  }
  EXPECT_FALSE(file.data.text.empty());
  EXPECT_TRUE(wte::Config().data.text.empty());
}

// Without a config file the loader gives the built-in defaults, the command line still wins.
TEST(DefaultConfig, LoadConfigWithoutFileIsTheBuiltInDefaults) {
  EXPECT_EQ(wte::load_config("", {}).to_ini(), wte::Config().to_ini());
  EXPECT_EQ(wte::load_config("", {"--model.n_layer=0"}).model.n_layer, 0u);
}
