// Replays the fuzz targets' committed inputs in ordinary test builds (and in the ASan+UBSan CI
// build): every file in fuzz/corpus/TARGET (the seeds) and fuzz/regressions/TARGET (each input a
// fuzzer once crashed on, kept so the crash stays fixed) goes through the target's
// LLVMFuzzerTestOneInput, which aborts on a broken property; sanitizers report the rest.
// Include after the fuzz target's source: #include "fuzz/fuzz_config.cc".
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define WTE_FUZZ_REPLAY(target)                                                                 \
  TEST(FuzzReplay, target) {                                                                    \
    namespace fs = std::filesystem;                                                             \
    size_t n = 0;                                                                               \
    for (const char* kind : {"corpus", "regressions"}) {                                        \
      const fs::path dir = fs::path(WTE_SOURCE_DIR) / "fuzz" / kind / #target;                  \
      if (!fs::is_directory(dir)) continue;                                                     \
      std::vector<fs::path> files;                                                              \
      for (const auto& e : fs::directory_iterator(dir))                                         \
        if (e.is_regular_file()) files.push_back(e.path());                                     \
      std::sort(files.begin(), files.end());                                                    \
      for (const fs::path& f : files) {                                                         \
        std::ifstream in(f, std::ios::binary);                                                  \
        const std::string bytes((std::istreambuf_iterator<char>(in)),                           \
                                std::istreambuf_iterator<char>());                              \
        SCOPED_TRACE(f.string());                                                               \
        EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),        \
                                         bytes.size()),                                         \
                  0);                                                                           \
        ++n;                                                                                    \
      }                                                                                         \
    }                                                                                           \
    EXPECT_GT(n, 0u) << "no inputs under fuzz/corpus/" #target;                                 \
  }
