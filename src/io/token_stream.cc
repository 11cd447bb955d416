// Token streams from files: llm.c's shards and wte's int32 token files, memory-mapped (see
// TokenStream and ShardWriter in wte/data.h).
#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "wte/data.h"
#include "wte/error.h"

namespace fs = std::filesystem;

namespace wte {

// One file of a stream: its mapping, where its ids start in it, their width and their range in
// the stream.
struct TokenFile {
  std::string path;
  void* map = nullptr;
  size_t map_bytes = 0;
  size_t header_bytes = 0;   // 0 (int32 file) or 1024 (shard)
  size_t token_bytes = 4;    // 2 (uint16 shard) or 4
  bool is_unsigned = false;  // shard ids are unsigned
  size_t count = 0;
  size_t start = 0;          // stream position of its first id
  const unsigned char* ids() const { return static_cast<const unsigned char*>(map) + header_bytes; }
};

struct TokenStream::Impl {
  std::vector<int32_t> owned;
  const std::vector<int32_t>* memory = nullptr;  // the ids in memory (owned or borrowed), or null
  std::vector<TokenFile> files;
  size_t size = 0;
  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    for (const TokenFile& f : files)
      if (f.map != nullptr) ::munmap(f.map, f.map_bytes);
  }
  // The file holding stream position pos (< size).
  const TokenFile& file_at(size_t pos) const {
    auto it = std::upper_bound(files.begin(), files.end(), pos,
                               [](size_t p, const TokenFile& f) { return p < f.start; });
    return *(it - 1);
  }
};

namespace {

int32_t header_int(const unsigned char* p, size_t i) {
  int32_t v;
  std::memcpy(&v, p + 4 * i, 4);
  return v;
}

// Maps `path` and reads its format. `what` names the spec it came from.
TokenFile open_token_file(const std::string& path, const std::string& what) {
  TokenFile f;
  f.path = path;
  const std::string named = "token file '" + path + "' (" + what + ")";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + named + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(named + " is not a regular file");
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes > 0) {
    f.map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (f.map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw Error("cannot memory-map " + named + ": " + std::strerror(err));
    }
    f.map_bytes = bytes;
    // Windows are read at random places: no read-ahead beyond what a window touches.
    ::madvise(f.map, bytes, MADV_RANDOM);
  }
  ::close(fd);  // the mapping keeps the file
  const auto* p = static_cast<const unsigned char*>(f.map);
  const int32_t magic = bytes >= 4 ? header_int(p, 0) : 0;
  if (magic == kShardU16.magic || magic == kShardU32.magic) {
    const ShardFormat fmt = magic == kShardU16.magic ? kShardU16 : kShardU32;
    const std::string shard = "shard '" + path + "' (" + what + ")";
    if (bytes < kShardHeaderInts * 4) {
      ::munmap(f.map, bytes);
      throw Error(shard + " has " + std::to_string(bytes) + " bytes, less than its 1024-byte header "
                  "(truncated)");
    }
    const int32_t version = header_int(p, 1), count = header_int(p, 2);
    std::string problem;
    if (version != fmt.version)
      problem = "header version " + std::to_string(version) + " with magic " +
                std::to_string(magic) + " (llm.c's format has version " +
                std::to_string(fmt.version) + " with that magic)";
    else if (count < 0)
      problem = "header token count " + std::to_string(count) + " is negative";
    else if (bytes - 1024 != static_cast<size_t>(count) * fmt.token_bytes)
      problem = "header says " + std::to_string(count) + " tokens of " +
                std::to_string(fmt.token_bytes) + " bytes (" +
                std::to_string(static_cast<size_t>(count) * fmt.token_bytes) +
                " bytes after the header) but the file has " + std::to_string(bytes - 1024) +
                " bytes after the header (" +
                (bytes - 1024 < static_cast<size_t>(count) * fmt.token_bytes ? "truncated" : "extra bytes") +
                ")";
    if (!problem.empty()) {
      ::munmap(f.map, bytes);
      throw Error(shard + ": " + problem);
    }
    f.header_bytes = kShardHeaderInts * 4;
    f.token_bytes = fmt.token_bytes;
    f.is_unsigned = true;
    f.count = static_cast<size_t>(count);
  } else {
    if (bytes % 4 != 0) {
      if (f.map != nullptr) ::munmap(f.map, bytes);
      throw Error(named + " has " + std::to_string(bytes) + " bytes, not a multiple of 4: it is "
                  "not raw int32 ids (nor an llm.c shard: its first 4 bytes are not the magic " +
                  std::to_string(kShardU16.magic) + " or " + std::to_string(kShardU32.magic) + ")");
    }
    f.count = bytes / 4;
  }
  return f;
}

// The files `spec` names: itself, a directory's *.bin files or a glob's matches, sorted by name.
std::vector<std::string> expand_spec(const std::string& spec, const std::string& what) {
  std::vector<std::string> paths;
  std::error_code ec;
  if (spec.find_first_of("*?[") != std::string::npos && !fs::exists(spec, ec)) {
    glob_t g{};
    const int rc = ::glob(spec.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
    globfree(&g);
    if (rc != 0 && rc != GLOB_NOMATCH)
      throw Error(what + " '" + spec + "': the pattern could not be read (glob error " +
                  std::to_string(rc) + ")");
    if (paths.empty()) throw Error(what + " '" + spec + "': no file matches the pattern");
  } else if (fs::is_directory(spec, ec)) {
    for (const auto& entry : fs::directory_iterator(spec, ec))
      if (entry.path().extension() == ".bin") paths.push_back(entry.path().string());
    if (ec) throw Error(what + " '" + spec + "': cannot list the directory: " + ec.message());
    if (paths.empty()) throw Error(what + " '" + spec + "': the directory holds no *.bin file");
  } else {
    paths.push_back(spec);
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// madvise(advice) on the pages holding bytes [a, b) of a file's mapping, widened to the aligned
// 2 MiB blocks around them: a fault on a file mapping maps more than its page (the kernel's
// fault-around, and the whole of a large page-cache folio, which a freshly written file has), and
// those pages must be given back too. Measured: giving back only the 64 KiB fault-around blocks
// left 28-33 MiB of a 96 MiB shard resident after 2000 batches (test_token_shards,
// PassesAndWindowsDoNotKeepTheStreamResident); 2 MiB blocks keep it under its 16 MiB bound.
void advise_bytes(const TokenFile& f, size_t a, size_t b, int advice) {
  // Blocks aligned in the address space (as the kernel aligns what it maps), clipped to the mapping.
  constexpr uintptr_t block = uintptr_t(2) << 20;
  const uintptr_t base = reinterpret_cast<uintptr_t>(f.map), end = base + f.map_bytes;
  const uintptr_t lo = std::max(base, (base + a) / block * block);
  const uintptr_t hi = std::min(end, (base + b + block - 1) / block * block);
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, advice);
}

}  // namespace

TokenStream::TokenStream() : impl_(std::make_shared<Impl>()) {}

TokenStream::TokenStream(std::vector<int32_t> ids) {
  auto impl = std::make_shared<Impl>();
  impl->owned = std::move(ids);
  impl->memory = &impl->owned;
  impl->size = impl->owned.size();
  impl_ = std::move(impl);
}

TokenStream TokenStream::view(const std::vector<int32_t>* ids) {
  auto impl = std::make_shared<Impl>();
  impl->memory = ids;
  impl->size = ids->size();
  TokenStream s;
  s.impl_ = std::move(impl);
  return s;
}

TokenStream TokenStream::open(const std::string& spec, const std::string& what) {
  auto impl = std::make_shared<Impl>();
  for (const std::string& path : expand_spec(spec, what)) {
    TokenFile f = open_token_file(path, what);
    f.start = impl->size;
    impl->size += f.count;
    impl->files.push_back(f);
  }
  TokenStream s;
  s.impl_ = std::move(impl);
  return s;
}

size_t TokenStream::size() const { return impl_->size; }
bool TokenStream::mapped() const { return impl_->memory == nullptr; }

std::vector<std::string> TokenStream::files() const {
  std::vector<std::string> out;
  for (const TokenFile& f : impl_->files) out.push_back(f.path);
  return out;
}

void TokenStream::read(size_t pos, size_t n, int32_t* dst) const {
  if (pos > impl_->size || n > impl_->size - pos)
    throw Error("token stream read of [" + std::to_string(pos) + ", " + std::to_string(pos + n) +
                ") is past its end (" + std::to_string(impl_->size) + " tokens)");
  if (impl_->memory != nullptr) {
    if (n > 0) std::memcpy(dst, impl_->memory->data() + pos, n * sizeof(int32_t));
    return;
  }
  while (n > 0) {
    const TokenFile& f = impl_->file_at(pos);
    const size_t first = pos - f.start, take = std::min(n, f.count - first);
    const unsigned char* src = f.ids() + first * f.token_bytes;
    if (f.token_bytes == 2) {
      for (size_t i = 0; i < take; ++i) {
        uint16_t v;
        std::memcpy(&v, src + 2 * i, 2);
        dst[i] = v;
      }
    } else {
      std::memcpy(dst, src, take * 4);  // uint32 ids >= 2^31 read as negative: check_token_ids sees them
    }
    dst += take;
    pos += take;
    n -= take;
  }
}

void TokenStream::release(size_t pos, size_t n) const {
  if (impl_->memory != nullptr) return;
  const size_t end = std::min(impl_->size, pos + n);
  while (pos < end) {
    const TokenFile& f = impl_->file_at(pos);
    const size_t first = pos - f.start, take = std::min(end - pos, f.count - first);
    advise_bytes(f, f.header_bytes + first * f.token_bytes,
                 f.header_bytes + (first + take) * f.token_bytes, MADV_DONTNEED);
    pos += take;
  }
}

void TokenStream::for_each_chunk(
    size_t chunk, const std::function<void(const int32_t*, size_t, size_t)>& fn) const {
  if (impl_->memory != nullptr) {
    for (size_t pos = 0; pos < impl_->size; pos += chunk)
      fn(impl_->memory->data() + pos, std::min(chunk, impl_->size - pos), pos);
    return;
  }
  std::vector<int32_t> buf(std::min(chunk, impl_->size));
  for (size_t pos = 0; pos < impl_->size; pos += chunk) {
    const size_t n = std::min(chunk, impl_->size - pos);
    // The mapping is MADV_RANDOM (for training's windows): ask for this piece ahead of reading it.
    for (size_t p = pos; p < pos + n;) {
      const TokenFile& f = impl_->file_at(p);
      const size_t first = p - f.start, take = std::min(pos + n - p, f.count - first);
      advise_bytes(f, f.header_bytes + first * f.token_bytes,
                   f.header_bytes + (first + take) * f.token_bytes, MADV_WILLNEED);
      p += take;
    }
    read(pos, n, buf.data());
    release(pos, n);
    fn(buf.data(), n, pos);
  }
}

std::string TokenStream::locate(size_t pos, const std::string& where) const {
  if (impl_->memory != nullptr || pos >= impl_->size)
    return "position " + std::to_string(pos) + " of " + where;
  const TokenFile& f = impl_->file_at(pos);
  return "position " + std::to_string(pos - f.start) + " of " +
         (f.header_bytes > 0 ? "shard '" : "token file '") + f.path + "' (" + where + ")";
}

void check_token_ids(const TokenStream& ids, size_t vocab_size, const std::string& where) {
  ids.for_each_chunk(size_t(1) << 20, [&](const int32_t* p, size_t n, size_t pos) {
    for (size_t i = 0; i < n; ++i) {
      if (p[i] >= 0 && static_cast<size_t>(p[i]) < vocab_size) continue;
      const std::string at = ids.locate(pos + i, where);
      // Shard ids are unsigned: a uint32 shard's value as stored.
      const bool shard = at.find(" of shard '") != std::string::npos;
      const std::string value =
          shard ? std::to_string(static_cast<uint32_t>(p[i])) : std::to_string(p[i]);
      std::string hint = " (a tokenizer/config mismatch or a corrupt token file?)";
      if (pos + i == 0 && at.find("token file '") != std::string::npos)
        hint = " (if it is meant to be an llm.c shard, its first 4 bytes, " + value +
               ", are not the magic " + std::to_string(kShardU16.magic) + " or " +
               std::to_string(kShardU32.magic) + ")";
      throw Error("token id " + value + " at " + at + " is outside [0, vocab_size=" +
                  std::to_string(vocab_size) + ")" + hint);
    }
  });
}

uint64_t fnv1a64(const TokenStream& ids) {
  uint64_t h = kFnv1a64Offset;
  ids.for_each_chunk(size_t(1) << 20, [&](const int32_t* p, size_t n, size_t) {
    h = fnv1a64(p, n * sizeof(int32_t), h);
  });
  return h;
}

void write_token_file(const std::string& path, const TokenStream& ids) {
  if (!ids.mapped()) {
    std::vector<int32_t> all(ids.size());
    ids.read(0, ids.size(), all.data());
    write_token_file(path, all);
    return;
  }
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create '" + tmp + "': " + std::strerror(errno));
  try {
    ids.for_each_chunk(size_t(1) << 20, [&](const int32_t* p, size_t n, size_t) {
      const char* b = reinterpret_cast<const char*>(p);
      size_t left = n * sizeof(int32_t);
      while (left > 0) {
        const ssize_t w = ::write(fd, b, left);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0)
          throw Error("writing '" + tmp + "' failed: " + std::strerror(errno) +
                      (errno == ENOSPC ? " (the disk is full)" : ""));
        b += w;
        left -= static_cast<size_t>(w);
      }
    });
  } catch (...) {
    ::close(fd);
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  ::close(fd);
  commit_file(tmp, path);
}

double unigram_cross_entropy(const TokenStream& train, const std::vector<int32_t>& val,
                             size_t vocab_size) {
  std::vector<uint64_t> counts(vocab_size, 0);
  train.for_each_chunk(size_t(1) << 20, [&](const int32_t* p, size_t n, size_t) {
    for (size_t i = 0; i < n; ++i) counts[static_cast<size_t>(p[i])] += 1;
  });
  const double denom = static_cast<double>(train.size() + vocab_size);
  double total = 0.0;
  for (int32_t id : val) total -= std::log((counts[static_cast<size_t>(id)] + 1) / denom);
  return val.empty() ? 0.0 : total / static_cast<double>(val.size());
}

// --- ShardWriter ---------------------------------------------------------------------------------

ShardWriter::ShardWriter(const std::string& path, ShardFormat format)
    : path_(path), tmp_(path + ".tmp"), format_(format) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot create '" + tmp_ + "': " + std::strerror(errno));
  buffer_.assign(kShardHeaderInts * 4, 0);  // the header, its count written by finish()
}

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    std::error_code ec;
    fs::remove(tmp_, ec);
  }
}

void ShardWriter::append(const int32_t* ids, size_t n) {
  if (n > kShardMaxTokens - count_)
    throw Error("shard '" + path_ + "' would pass " + std::to_string(kShardMaxTokens) +
                " tokens, the most its int32 count can say");
  const uint64_t limit = format_.token_bytes == 2 ? 65536 : (uint64_t(1) << 32);
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || static_cast<uint64_t>(ids[i]) >= limit)
      throw Error("token id " + std::to_string(ids[i]) + " does not fit shard '" + path_ + "' (" +
                  std::to_string(format_.token_bytes * 8) + "-bit ids)");
    const uint32_t v = static_cast<uint32_t>(ids[i]);
    const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                                static_cast<unsigned char>(v >> 16),
                                static_cast<unsigned char>(v >> 24)};
    buffer_.insert(buffer_.end(), b, b + format_.token_bytes);
  }
  count_ += n;
  if (buffer_.size() >= (size_t(1) << 22)) flush();
}

void ShardWriter::flush() {
  const unsigned char* p = buffer_.data();
  size_t left = buffer_.size();
  while (left > 0) {
    const ssize_t w = ::write(fd_, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      throw Error("writing '" + tmp_ + "' failed: " + std::strerror(errno) +
                  (errno == ENOSPC ? " (the disk is full)" : ""));
    p += w;
    left -= static_cast<size_t>(w);
  }
  buffer_.clear();
}

void ShardWriter::finish() {
  flush();
  const int32_t header[3] = {format_.magic, format_.version, static_cast<int32_t>(count_)};
  if (::pwrite(fd_, header, sizeof header, 0) != static_cast<ssize_t>(sizeof header))
    throw Error("writing the header of '" + tmp_ + "' failed: " + std::strerror(errno));
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw Error("closing '" + tmp_ + "' failed: " + std::strerror(errno));
  }
  fd_ = -1;
  commit_file(tmp_, path_);
}

}  // namespace wte
