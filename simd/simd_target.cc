// The cap on Highway's dispatch target (include/wte/simd_target.h): WTE_MAX_SIMD, applied by a
// constructor of this library when it loads. Every consumer links this file: the wte::kernels
// target carries `-Wl,-u,wte_simd_target_cap_anchor` in its interface (CMakeLists.txt, and the
// Libs of wte-kernels.pc), so a static link keeps the constructor even where nothing calls in here.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "hwy/targets.h"
#include "wte/kernels.h"
#include "wte/simd_target.h"

namespace wte {
namespace {

// The cap in force ("" for none), upper-case. Written only by apply_simd_target_cap.
std::string& cap_name() {
  static std::string name;
  return name;
}

std::string upper(const char* s) {
  std::string u;
  for (; *s; ++s) u += static_cast<char>(std::toupper(static_cast<unsigned char>(*s)));
  return u;
}

}  // namespace

std::vector<std::string> simd_target_names() {
  std::vector<std::string> names;
  // Highway's target bits are ordered best first (the lowest bit is the best target).
  for (int bit = 0; bit < 63; ++bit) {
    const char* name = hwy::TargetName(int64_t{1} << bit);
    if (std::string(name) != "Unknown") names.emplace_back(name);
  }
  return names;
}

void apply_simd_target_cap(const char* name) {
  const std::string want = upper(name ? name : "");
  if (want.empty()) {
    hwy::DisableTargets(0);
    cap_name().clear();
    return;
  }
  for (int bit = 0; bit < 63; ++bit) {
    const int64_t target = int64_t{1} << bit;
    if (want != hwy::TargetName(target)) continue;
    // Every better target (every lower bit) is disabled. Highway re-reads the targets at the next
    // dispatch, so a cap set after a kernel has run takes effect too.
    hwy::DisableTargets(target - 1);
    cap_name() = want;
    return;
  }
  std::string allowed;
  for (const std::string& n : simd_target_names()) allowed += (allowed.empty() ? "" : ", ") + n;
  throw std::invalid_argument("WTE_MAX_SIMD='" + std::string(name) +
                              "' names no Highway target of this CPU architecture; allowed "
                              "(best first, any case): " + allowed + ", or empty for no cap");
}

std::string simd_target_cap() { return cap_name(); }

std::string simd_target_name() { return hwy::TargetName(simd_dispatch_target()); }

}  // namespace wte

extern "C" {
// Referenced by the link option -Wl,-u,wte_simd_target_cap_anchor, so that a static link keeps this
// file (and its constructor) even in a program that calls nothing in it.
int wte_simd_target_cap_anchor = 0;
}

namespace {

// Priority 101, the first one a program may use: before any static initializer of the program
// (gtest evaluates its target lists later, in InitGoogleTest). A bad value ends the process with
// the usage status 2 before any work: carrying on would run, and report, another target than the
// one asked for.
__attribute__((constructor(101))) void apply_cap_from_environment() {
  const char* value = std::getenv("WTE_MAX_SIMD");
  if (value == nullptr) return;
  try {
    wte::apply_simd_target_cap(value);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wte: error: environment variable %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(2);
  }
}

}  // namespace
