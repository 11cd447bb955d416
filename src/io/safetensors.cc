#include "src/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "src/io/json_util.h"
#include "src/tokenizer/quoted_excerpt.h"
#include "wte/data.h"
#include "wte/error.h"

namespace wte::safetensors {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; wte reads it in place on little-endian hosts");

namespace {

// The reference implementation's limit on the header (safetensors/src/tensor.rs: MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeader = 100'000'000;
constexpr size_t kMaxDims = 16;

struct DtypeInfo {
  Dtype dtype;
  const char* name;
  size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {Dtype::F64, "F64", 8},   {Dtype::F32, "F32", 4},         {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2}, {Dtype::I64, "I64", 8},         {Dtype::I32, "I32", 4},
    {Dtype::I16, "I16", 2},   {Dtype::I8, "I8", 1},           {Dtype::U64, "U64", 8},
    {Dtype::U32, "U32", 4},   {Dtype::U16, "U16", 2},         {Dtype::U8, "U8", 1},
    {Dtype::BOOL, "BOOL", 1}, {Dtype::F8_E4M3, "F8_E4M3", 1}, {Dtype::F8_E5M2, "F8_E5M2", 1},
};

std::string shape_str(const std::vector<size_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// A whole number >= 0 that fits uint64 (JSON integers only: 2.0, -1 and 1e3 are not).
bool whole(const nlohmann::json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(j.get<int64_t>());
    return true;
  }
  return false;
}

// A JSON value shortened for a message (bounded depth and length: the header is hostile).
std::string brief(const nlohmann::json& j) { return json::brief(j, 80); }
// A name from the file's header (a tensor's, a key) in single quotes, escaped and cut
// (quoted_excerpt: a hostile header's escape codes never reach the terminal raw).
std::string named(const std::string& name) { return quoted_excerpt(name, 80, '\''); }

// One tensor's header entry `entry` (named `name`), validated: exactly the fields dtype, shape and
// data_offsets; a known dtype; a shape of at most kMaxDims whole numbers whose product fits 2^64;
// offsets [begin, end] with begin <= end holding product(shape) * dtype size bytes, ending inside
// the data buffer (`buffer` bytes from file offset `data_start`, in a file of `size` bytes).
// Throws wte::Error naming `o` and the tensor.
TensorInfo parse_tensor(const std::string& o, const std::string& name, const nlohmann::json& entry,
                        uint64_t data_start, uint64_t buffer, size_t size) {
  const std::string t = o + ": tensor " + named(name);
  if (!entry.is_object())
    throw Error(t + " is " + brief(entry) +
                ", expected {\"dtype\": ..., \"shape\": [...], \"data_offsets\": [begin, end]}");
  for (const auto& [k, v] : entry.items())
    if (k != "dtype" && k != "shape" && k != "data_offsets")
      throw Error(t + " has an unknown field " + named(k) +
                  " (allowed: dtype, shape, data_offsets)");
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(k)) throw Error(t + " has no '" + k + "'");
  TensorInfo info;
  info.name = name;
  const nlohmann::json& dt = entry["dtype"];
  bool known = false;
  if (dt.is_string())
    for (const DtypeInfo& d : kDtypes)
      if (dt.get<std::string>() == d.name) {
        info.dtype = d.dtype;
        known = true;
      }
  if (!known) {
    std::string allowed;
    for (const DtypeInfo& d : kDtypes) {
      if (!allowed.empty()) allowed += ", ";
      allowed += d.name;
    }
    throw Error(t + " has dtype " + brief(dt) + "; the format's dtypes are " + allowed);
  }
  const nlohmann::json& sh = entry["shape"];
  if (!sh.is_array() || sh.size() > kMaxDims)
    throw Error(t + " has shape " + brief(sh) + ", expected a list of at most " +
                std::to_string(kMaxDims) + " whole numbers");
  uint64_t numel = 1;
  for (const nlohmann::json& d : sh) {
    uint64_t v = 0;
    if (!whole(d, &v))
      throw Error(t + " has shape " + brief(sh) + ": " + brief(d) + " is not a whole number");
    info.shape.push_back(static_cast<size_t>(v));
    if (__builtin_mul_overflow(numel, v, &numel))
      throw Error(t + " has shape " + brief(sh) + ", more elements than 2^64");
  }
  const nlohmann::json& off = entry["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !whole(off[0], &info.begin) ||
      !whole(off[1], &info.end))
    throw Error(t + " has data_offsets " + brief(off) + ", expected [begin, end], two whole numbers");
  if (info.begin > info.end)
    throw Error(t + " has data_offsets [" + std::to_string(info.begin) + ", " +
                std::to_string(info.end) + "]: begin is after end");
  uint64_t bytes_needed = 0;
  if (__builtin_mul_overflow(numel, uint64_t(dtype_size(info.dtype)), &bytes_needed))
    throw Error(t + " has shape " + shape_str(info.shape) + ", more bytes than 2^64");
  if (info.end - info.begin != bytes_needed)
    throw Error(t + ": data_offsets [" + std::to_string(info.begin) + ", " +
                std::to_string(info.end) + "] hold " + std::to_string(info.end - info.begin) +
                " bytes, but " + dtype_name(info.dtype) + " " + shape_str(info.shape) + " needs " +
                std::to_string(bytes_needed));
  if (info.end > buffer)
    throw Error(t + ": data_offsets [" + std::to_string(info.begin) + ", " +
                std::to_string(info.end) + "] end at file offset " +
                std::to_string(data_start + info.end) + ", past the end of the file (" +
                std::to_string(size) + " bytes; the data buffer is " + std::to_string(buffer) +
                " bytes from offset " + std::to_string(data_start) + "): truncated?");
  return info;
}

// Checks that `tensors` (in any order) tile the data buffer, `buffer` bytes from file offset
// `data_start`: no overlap (a write to one would show in another) and no bytes no tensor explains
// (the reference implementation rejects both). Throws wte::Error naming `o`, the tensors and the
// offsets (data offsets, and file offsets for gaps).
void check_coverage(const std::string& o, const std::vector<TensorInfo>& tensors,
                    uint64_t data_start, uint64_t buffer) {
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : by_offset) {
    if (t->begin < at)
      throw Error(o + ": tensor " + named(t->name) + " at data offset " +
                  std::to_string(t->begin) + " overlaps tensor " + named(prev->name) +
                  " (which ends at " + std::to_string(at) + ")");
    if (t->begin > at)
      throw Error(o + ": data bytes [" + std::to_string(at) + ", " + std::to_string(t->begin) +
                  ") (file offset " + std::to_string(data_start + at) +
                  ") belong to no tensor; tensor " + named(t->name) + " starts at " +
                  std::to_string(t->begin));
    at = t->end;
    prev = t;
  }
  if (at != buffer)
    throw Error(o + ": the data buffer has " + std::to_string(buffer) + " bytes but its tensors end at " +
                std::to_string(at) + " (file offset " + std::to_string(data_start + at) +
                "): trailing bytes no tensor explains");
}

}  // namespace

const char* dtype_name(Dtype d) {
  for (const DtypeInfo& i : kDtypes)
    if (i.dtype == d) return i.name;
  return "?";
}

size_t dtype_size(Dtype d) {
  for (const DtypeInfo& i : kDtypes)
    if (i.dtype == d) return i.size;
  return 0;
}

size_t TensorInfo::numel() const {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  return n;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // infinity, or NaN with its payload
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // 127 - 15 = 112
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // Subnormal: mant * 2^-24, exact in float32 (normalise the mantissa).
    uint32_t e = 113, m = mant;  // 2^-14 = 2^(113 - 127)
    while ((m & 0x400u) == 0) {
      m <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((m & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

View::View(const uint8_t* bytes, size_t size, std::string origin) : origin_(std::move(origin)) {
  const std::string& o = origin_;
  if (size < 8)
    throw Error(o + ": " + std::to_string(size) +
                " bytes, too short for a safetensors file (it starts with an 8-byte header length)");
  uint64_t n = 0;
  std::memcpy(&n, bytes, 8);
  if (n > size - 8)
    throw Error(o + ": the header length at offset 0 is " + std::to_string(n) +
                " bytes, past the end of the file (" + std::to_string(size) +
                " bytes): truncated, or not a safetensors file");
  if (n > kMaxHeader)
    throw Error(o + ": the header length at offset 0 is " + std::to_string(n) +
                " bytes, above the format's limit of " + std::to_string(kMaxHeader) +
                " (not a safetensors file?)");
  if (n < 2 || bytes[8] != '{')
    throw Error(o + ": the header at offset 8 does not start with '{' (not a safetensors file?)");
  data_start_ = 8 + n;
  data_ = bytes + data_start_;
  const uint64_t buffer = size - data_start_;

  // Top-level keys are collected by the parser callback: nlohmann keeps the last of two equal
  // keys, which would silently drop a tensor.
  std::set<std::string> keys;
  std::string duplicate;
  const nlohmann::json::parser_callback_t on_event =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string() &&
            !keys.insert(parsed.get<std::string>()).second && duplicate.empty())
          duplicate = parsed.get<std::string>();
        return true;
      };
  const nlohmann::json header = json::parse(
      std::string_view(reinterpret_cast<const char*>(bytes + 8), n), o, on_event,
      "the header (offset 8, " + std::to_string(n) + " bytes) is not valid JSON");
  if (!header.is_object())
    throw Error(o + ": the header (offset 8) is not a JSON object");
  if (!duplicate.empty())
    throw Error(o + ": the header names " + named(duplicate) + " twice");

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        throw Error(o + ": __metadata__ is " + brief(entry) + ", expected an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string())
          throw Error(o + ": __metadata__ " + named(k) + " is " + brief(v) + ", expected a string");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    tensors_.push_back(parse_tensor(o, name, entry, data_start_, buffer, size));
  }
  check_coverage(o, tensors_, data_start_, buffer);
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

const TensorInfo* View::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void View::to_f32(const TensorInfo& t, float* dst) const {
  const size_t n = t.numel();
  const uint8_t* src = data(t);
  switch (t.dtype) {
    case Dtype::F32:
      if (n) std::memcpy(dst, src, n * 4);
      return;
    case Dtype::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = half_to_float(h);
      }
      return;
    case Dtype::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, src + 2 * i, 2);
        dst[i] = bf16_to_float(b);
      }
      return;
    default:
      throw Error(origin_ + ": tensor " + named(t.name) + " has dtype " + dtype_name(t.dtype) +
                  "; wte reads F32, F16 and BF16 tensors");
  }
}

MappedFile::MappedFile(const std::string& path) {
  const std::string o = "safetensors '" + path + "'";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(o + " is a directory; give the model.safetensors file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(o + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(o + ": not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  try {
    bytes_.reset(new uint8_t[std::max<uint64_t>(size_, 1)]);
  } catch (const std::bad_alloc&) {
    ::close(fd);
    throw Error(o + ": cannot allocate " + std::to_string(size_) + " bytes to read it into");
  }
  uint64_t got = 0;
  while (got < size_) {
    const ssize_t n = ::pread(fd, bytes_.get() + got, std::min<uint64_t>(size_ - got, uint64_t{1} << 30),
                              static_cast<off_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw Error(o + ": read error at byte " + std::to_string(got) + " of " +
                  std::to_string(size_) + ": " + std::strerror(err));
    }
    if (n == 0) break;
    got += static_cast<uint64_t>(n);
  }
  // One byte more: a file that grew while it was read is no more the file that was read.
  uint8_t extra = 0;
  const bool grew = got == size_ && ::pread(fd, &extra, 1, static_cast<off_t>(size_)) > 0;
  // A file cut short and written back to its size meanwhile has the same size but other bytes
  // (zeros where it was cut): its modification or change time moved.
  struct stat after;
  const bool changed = ::fstat(fd, &after) != 0 || after.st_size != st.st_size ||
                       after.st_mtim.tv_sec != st.st_mtim.tv_sec ||
                       after.st_mtim.tv_nsec != st.st_mtim.tv_nsec ||
                       after.st_ctim.tv_sec != st.st_ctim.tv_sec ||
                       after.st_ctim.tv_nsec != st.st_ctim.tv_nsec;
  ::close(fd);
  if (got == size_ && !grew && changed)
    throw Error(o + ": the file changed while it was read (its modification time moved): "
                "another process is writing it; read it again once it is complete");
  if (got != size_ || grew)
    throw Error(o + ": the file " + (grew ? "grew" : "shrank") + " while it was read (" +
                std::to_string(size_) + " bytes when opened, " +
                (grew ? std::string("more by the end of the read") : std::to_string(got) + " read") +
                "): another process is writing it; read it again once it is complete");
  view_ = new View(bytes_.get(), size_, o);
}

MappedFile::~MappedFile() { delete view_; }

std::string header_bytes(const std::vector<OutTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) json += ',';
      first = false;
      json += nlohmann::json(k).dump() + ":" + nlohmann::json(v).dump();
    }
    json += "}";
  }
  uint64_t at = 0;
  for (const OutTensor& t : tensors) {
    if (json.size() > 1) json += ',';
    uint64_t n = 1;
    for (size_t d : t.shape) n *= d;
    json += nlohmann::json(t.name).dump() + ":{\"dtype\":\"F32\",\"shape\":" + shape_str(t.shape) +
            ",\"data_offsets\":[" + std::to_string(at) + "," + std::to_string(at + 4 * n) + "]}";
    at += 4 * n;
  }
  json += "}";
  while ((8 + json.size()) % 8 != 0) json += ' ';
  std::string out(8, '\0');
  const uint64_t len = json.size();
  std::memcpy(out.data(), &len, 8);
  return out + json;
}

void write_file(const std::string& path, const std::vector<OutTensor>& tensors,
                const std::map<std::string, std::string>& metadata, bool commit) {
  const std::string tmp = path + ".tmp";
  const std::string header = header_bytes(tensors, metadata);
  uint64_t total = header.size();
  for (const OutTensor& t : tensors) {
    uint64_t n = 1;
    for (size_t d : t.shape) n *= d;
    total += 4 * n;
  }
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create '" + tmp + "': " + std::strerror(errno));
  auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("writing '" + path + "' failed: " + what + ": " + std::strerror(err) +
                (err == ENOSPC ? " (the disk is full)" : "") + "; nothing was written");
  };
  // Reserve the whole file first: a full disk is found before any byte is written.
  if (total > 0) {
    const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(total));
    if (err != 0 && err != EOPNOTSUPP && err != EINVAL)
      fail("reserving " + std::to_string(total) + " bytes", err);
  }
  auto put = [&](const void* p, uint64_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd, c, std::min<uint64_t>(n, uint64_t{1} << 30));
      if (w < 0) {
        if (errno == EINTR) continue;
        fail("write", errno);
      }
      c += w;
      n -= static_cast<uint64_t>(w);
    }
  };
  put(header.data(), header.size());
  for (const OutTensor& t : tensors) {
    uint64_t n = 1;
    for (size_t d : t.shape) n *= d;
    put(t.data, 4 * n);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("writing '" + path + "' failed: close: " + std::strerror(err));
  }
  if (!commit) return;
  try {
    commit_file(tmp, path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace wte::safetensors
