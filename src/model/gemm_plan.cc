#include "src/model/gemm_plan.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <cstring>

namespace wte {
namespace {

namespace fs = std::filesystem;

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 1);
    }
  return "unknown cpu";
}

// Everything the speeds depend on besides the GEMM itself: the CPU and each library's version and
// kernel set.
std::string machine_identity() {
  std::string id = "cpu:" + cpu_model_name();
  for (GemmLibrary lib : {GemmLibrary::onednn, GemmLibrary::openblas, GemmLibrary::blis})
    id += std::string("; ") + to_string(lib) + ": " + gemm_library_version(lib);
  return id;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

std::optional<GemmLibrary> parse_library(const std::string& s) {
  for (GemmLibrary lib : {GemmLibrary::onednn, GemmLibrary::openblas, GemmLibrary::blis})
    if (s == to_string(lib)) return lib;
  return std::nullopt;
}

// The choices recorded in a cache file's text: lines "<key>\t<library>[\t<timings>]"; '#' lines
// and lines that do not parse are skipped. The first line for a key wins.
void parse_plans(const std::string& text, std::map<std::string, GemmLibrary>& plans) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0) continue;
    const size_t tab2 = line.find('\t', tab + 1);
    const std::optional<GemmLibrary> lib = parse_library(line.substr(tab + 1, tab2 - tab - 1));
    if (lib) plans.emplace(line.substr(0, tab), *lib);
  }
}

std::string read_fd(int fd) {
  std::string text;
  char buf[1 << 14];
  if (lseek(fd, 0, SEEK_SET) < 0) return text;
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  return text;
}

struct Planner {
  std::mutex mutex;
  std::map<std::string, GemmLibrary> plans;  // this process's, the file's included
  bool file_read = false;
  bool warned = false;
  std::string path;

  void warn(const std::string& why) {
    if (warned) return;
    warned = true;
    std::fprintf(stderr,
                 "wte: warning: the GEMM plan cache %s: %s; GEMM plans are timed again in each "
                 "run, which may then choose other libraries (other bits)\n",
                 path.c_str(), why.c_str());
  }

  void read_file() {
    file_read = true;
    if (path.empty()) return;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;  // no plans yet
    if (flock(fd, LOCK_SH) == 0) parse_plans(read_fd(fd), plans);
    close(fd);
  }

  // Appends the choice unless another process wrote one for `key` first; returns the one in force.
  GemmLibrary record(const std::string& key, GemmLibrary lib, const std::string& timings) {
    if (path.empty()) return lib;
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      warn(std::string("cannot be opened for writing: ") + std::strerror(errno));
      return lib;
    }
    if (flock(fd, LOCK_EX) != 0) {
      warn("cannot be locked");
      close(fd);
      return lib;
    }
    std::map<std::string, GemmLibrary> now;
    const std::string text = read_fd(fd);
    parse_plans(text, now);
    const auto it = now.find(key);
    if (it != now.end()) {
      lib = it->second;
    } else {
      std::string out;
      if (text.empty()) out = "# wte GEMM plans for " + machine_identity() + "\n";
      out += key + "\t" + to_string(lib) + "\t" + timings + "\n";
      if (write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size()))
        warn("a write failed");
    }
    flock(fd, LOCK_UN);
    close(fd);
    return lib;
  }
};

Planner& planner() {
  static Planner p;
  return p;
}

}  // namespace

std::string gemm_plan_cache_path() {
  std::string dir;
  if (const char* c = std::getenv("WTE_GEMM_CACHE"); c != nullptr && *c != '\0') {
    if (std::string(c) == "off") return "";
    dir = c;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    dir = std::string(x) + "/wte";
  } else if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    dir = std::string(h) + "/.cache/wte";
  } else {
    return "";
  }
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(fnv1a(machine_identity())));
  return dir + "/gemm-plans-" + hash + ".txt";
}

GemmLibrary plan_gemm(const std::string& key, const std::vector<GemmLibrary>& candidates,
                      const std::function<double(GemmLibrary)>& seconds) {
  Planner& p = planner();
  const std::lock_guard<std::mutex> lock(p.mutex);
  // WTE_GEMM_CACHE may change within a process (tests): another file, other plans
  if (std::string path = gemm_plan_cache_path(); path != p.path) {
    p.path = std::move(path);
    p.plans.clear();
    p.file_read = false;
    p.warned = false;
  }
  if (!p.file_read) p.read_file();
  const auto known = p.plans.find(key);
  if (known != p.plans.end() &&
      std::find(candidates.begin(), candidates.end(), known->second) != candidates.end())
    return known->second;
  // Timing: one warm-up run each (pages touched, packing buffers made), then interleaved rounds,
  // more of them for short GEMMs; the minimum of each library.
  std::vector<double> best(candidates.size(), std::numeric_limits<double>::infinity());
  double slowest = 0;
  for (GemmLibrary lib : candidates) slowest = std::max(slowest, seconds(lib));
  const int rounds = slowest < 2e-3 ? 9 : slowest < 20e-3 ? 5 : 3;
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < candidates.size(); ++i) best[i] = std::min(best[i], seconds(candidates[i]));
  size_t pick = 0;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (best[i] < best[pick]) pick = i;
  // oneDNN unless another library is clearly faster: timing noise alone does not move a GEMM
  const auto onednn = std::find(candidates.begin(), candidates.end(), GemmLibrary::onednn);
  if (onednn != candidates.end()) {
    const size_t o = static_cast<size_t>(onednn - candidates.begin());
    if (best[pick] > 0.97 * best[o]) pick = o;
  }
  std::string timings;
  for (size_t i = 0; i < candidates.size(); ++i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s=%.4gms", i == 0 ? "" : " ", to_string(candidates[i]),
                  best[i] * 1e3);
    timings += buf;
  }
  GemmLibrary chosen = p.record(key, candidates[pick], timings);
  if (std::find(candidates.begin(), candidates.end(), chosen) == candidates.end())
    chosen = candidates[pick];
  p.plans[key] = chosen;
  return chosen;
}

}  // namespace wte
