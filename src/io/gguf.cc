#include "src/io/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "wte/error.h"

namespace wte::gguf {
namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void put_string(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

// docs/gguf.md: "a hierarchical key, where each segment is lower_snake_case and separated by a
// '.'", ASCII, at most 65535 bytes.
bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > 65535 || key.front() == '.' || key.back() == '.') return false;
  char prev = 0;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (!ok || (c == '.' && prev == '.')) return false;
    prev = c;
  }
  return true;
}

}  // namespace

const char* type_name(TensorType t) {
  switch (t) {
    case TensorType::kF32: return "F32";
    case TensorType::kF16: return "F16";
    case TensorType::kQ8_0: return "Q8_0";
  }
  return "?";
}

void Metadata::begin(const std::string& key, ValueType type) {
  if (!valid_key(key))
    throw Error("GGUF metadata key '" + key + "' is not allowed; allowed: lower_snake_case "
                "segments of a-z, 0-9 and _ separated by '.', at most 65535 bytes");
  if (std::find(keys_.begin(), keys_.end(), key) != keys_.end())
    throw Error("GGUF metadata key '" + key + "' is given twice");
  keys_.push_back(key);
  put_string(bytes_, key);
  put_u32(bytes_, static_cast<uint32_t>(type));
}

void Metadata::add_uint32(const std::string& key, uint32_t v) {
  begin(key, ValueType::kUint32);
  put_u32(bytes_, v);
}

void Metadata::add_float32(const std::string& key, float v) {
  begin(key, ValueType::kFloat32);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  put_u32(bytes_, bits);
}

void Metadata::add_bool(const std::string& key, bool v) {
  begin(key, ValueType::kBool);
  bytes_ += static_cast<char>(v ? 1 : 0);
}

void Metadata::add_string(const std::string& key, const std::string& v) {
  begin(key, ValueType::kString);
  put_string(bytes_, v);
}

void Metadata::add_string_array(const std::string& key, const std::vector<std::string>& v) {
  begin(key, ValueType::kArray);
  put_u32(bytes_, static_cast<uint32_t>(ValueType::kString));
  put_u64(bytes_, v.size());
  for (const std::string& s : v) put_string(bytes_, s);
}

void Metadata::add_int32_array(const std::string& key, const std::vector<int32_t>& v) {
  begin(key, ValueType::kArray);
  put_u32(bytes_, static_cast<uint32_t>(ValueType::kInt32));
  put_u64(bytes_, v.size());
  for (int32_t x : v) put_u32(bytes_, static_cast<uint32_t>(x));
}

uint64_t data_bytes(const TensorInfo& t) {
  uint64_t n = 1;
  for (uint64_t d : t.ne) n *= d;
  switch (t.type) {
    case TensorType::kF32: return 4 * n;
    case TensorType::kF16: return 2 * n;
    case TensorType::kQ8_0:
      if (t.ne.empty() || t.ne[0] % kQ8Block != 0)
        throw Error("GGUF tensor '" + t.name + "': Q8_0 needs its innermost dimension (ne[0] = " +
                    (t.ne.empty() ? std::string("none") : std::to_string(t.ne[0])) +
                    ") to be a multiple of 32");
      return n / kQ8Block * kQ8BlockBytes;
  }
  return 0;
}

uint64_t align(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

std::string header(const Metadata& meta, const std::vector<TensorInfo>& tensors) {
  std::string out = "GGUF";
  put_u32(out, 3);
  put_u64(out, tensors.size());
  put_u64(out, meta.count());
  out += meta.bytes();
  uint64_t offset = 0;
  for (const TensorInfo& t : tensors) {
    if (t.name.empty() || t.name.size() > 64)
      throw Error("GGUF tensor name '" + t.name + "' is not allowed; allowed: 1 to 64 bytes");
    if (t.ne.empty() || t.ne.size() > 4)
      throw Error("GGUF tensor '" + t.name + "' has " + std::to_string(t.ne.size()) +
                  " dimensions; allowed: 1 to 4");
    for (uint64_t d : t.ne)
      if (d == 0) throw Error("GGUF tensor '" + t.name + "' has a dimension of 0");
    put_string(out, t.name);
    put_u32(out, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) put_u64(out, d);
    put_u32(out, static_cast<uint32_t>(t.type));
    put_u64(out, offset);
    offset += align(data_bytes(t));
  }
  out.append(align(out.size()) - out.size(), '\0');
  return out;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN (quiet)
  const int e = static_cast<int>(abs >> 23) - 127;                     // unbiased exponent
  if (e > 15) return static_cast<uint16_t>(sign | 0x7c00u);            // >= 2^16, or infinity
  const uint32_t mant = abs & 0x7fffffu;
  if (e >= -14) {  // a normal half: 10 of the 23 mantissa bits, the rest rounded to even
    uint32_t h = (static_cast<uint32_t>(e + 15) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may reach infinity
    return static_cast<uint16_t>(sign | h);
  }
  if (e < -25) return static_cast<uint16_t>(sign);  // below half the smallest subnormal, 2^-25
  // A subnormal half: units of 2^-24; the value is (mant | 2^23) * 2^(e - 23).
  const uint32_t m = mant | 0x800000u;
  const int shift = -e - 1;  // 2^(e-23) / 2^-24 = 2^(e+1): shift right by -(e+1)
  uint32_t h = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

size_t convert(const float* src, size_t n, TensorType type, uint8_t* dst) {
  if (type == TensorType::kF32) {
    std::memcpy(dst, src, 4 * n);
    return n;
  }
  if (type == TensorType::kF16) {
    for (size_t i = 0; i < n; ++i) {
      if (std::isfinite(src[i]) && std::fabs(src[i]) > 65504.0f) return i;
      const uint16_t h = float_to_half(src[i]);
      dst[2 * i] = static_cast<uint8_t>(h & 0xff);
      dst[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
    return n;
  }
  for (size_t b = 0; b < n / kQ8Block; ++b) {
    const float* x = src + b * kQ8Block;
    uint8_t* out = dst + b * kQ8BlockBytes;
    float amax = 0.0f;
    for (size_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    if (d > 65504.0f) return b * kQ8Block;
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = float_to_half(d);
    out[0] = static_cast<uint8_t>(dh & 0xff);
    out[1] = static_cast<uint8_t>(dh >> 8);
    for (size_t j = 0; j < kQ8Block; ++j) {
      const float q = std::round(x[j] * inv);  // in [-127, 127]: |x| <= amax = 127 d
      out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
  return n;
}

}  // namespace wte::gguf
