// The GGUF file format, version 3, as a writer (ggml's docs/gguf.md, "File Structure"): what
// llama.cpp, ollama, LM Studio and llamafile load. A file is, all little-endian:
//   header       "GGUF" (the bytes 0x47 0x47 0x55 0x46), version u32 = 3, tensor count u64,
//                key-value count u64
//   key-values   each a key (string) then a value type (u32) and the value; a string is a u64
//                byte length then the UTF-8 bytes (no terminator); an array is the element type
//                (u32), the element count (u64), then the elements
//   tensor infos each a name (string, at most 64 bytes), the number of dimensions (u32), the
//                dimensions ne[0..n) (u64 each; ne[0] is the innermost, contiguous one: a
//                row-major (rows, cols) matrix is ne = {cols, rows}), the ggml type (u32) and
//                the offset of its data (u64) from the start of the data section, a multiple of
//                the alignment
//   padding      zero bytes up to a multiple of the alignment (general.alignment, 32 when absent)
//   data         the tensors at their offsets, each padded with zero bytes to the alignment
// Private to wte; the public entry point is export_hf_gpt2 (include/wte/interop.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wte::gguf {

/// The alignment wte writes (general.alignment): ggml's default, 32 bytes.
inline constexpr uint32_t kAlignment = 32;

/// Metadata value types (docs/gguf.md: gguf_metadata_value_type); the numbers are the file's.
enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};

/// The tensor types wte writes (ggml's ggml_type numbers).
enum class TensorType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8 };

/// "F32", "F16", "Q8_0".
const char* type_name(TensorType t);

/// Q8_0: blocks of 32 values along ne[0], each a float16 scale d = max|x| / 127 then 32 int8
/// q = round(x / d) (half away from zero), 34 bytes (ggml's block_q8_0).
inline constexpr size_t kQ8Block = 32;
inline constexpr size_t kQ8BlockBytes = 2 + kQ8Block;

/// The metadata key-values of a file, in the order they are added. Keys must be ASCII,
/// lower_snake_case segments separated by '.', at most 65535 bytes; each add throws wte::Error
/// on a key that breaks those rules or was added before.
class Metadata {
 public:
  void add_uint32(const std::string& key, uint32_t v);
  void add_float32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_string_array(const std::string& key, const std::vector<std::string>& v);
  void add_int32_array(const std::string& key, const std::vector<int32_t>& v);

  size_t count() const { return keys_.size(); }
  const std::vector<std::string>& keys() const { return keys_; }
  /// Every key-value pair, serialized back to back as the file holds them.
  const std::string& bytes() const { return bytes_; }

 private:
  void begin(const std::string& key, ValueType type);
  std::vector<std::string> keys_;
  std::string bytes_;
};

/// One tensor's entry in the file: its name, its dimensions in ggml's order (ne[0] innermost)
/// and its type.
struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;
  TensorType type = TensorType::kF32;
};

/// Bytes of a tensor's data (unpadded): elements x 4 (F32), x 2 (F16), or (elements / 32) x 34
/// (Q8_0). Throws wte::Error naming the tensor if it is Q8_0 and ne[0] is not a multiple of 32.
uint64_t data_bytes(const TensorInfo& t);

/// `n` rounded up to a multiple of kAlignment.
uint64_t align(uint64_t n);

/// Everything before the data section: the header, `meta`'s key-values, the tensor infos (each
/// tensor's offset: the previous one's offset plus its data_bytes rounded up to kAlignment) and
/// the zero padding to kAlignment. Throws wte::Error for a tensor name longer than 64 bytes, more
/// than 4 dimensions, or a dimension of 0. The data section that follows holds
/// sum(align(data_bytes(t))) bytes.
std::string header(const Metadata& meta, const std::vector<TensorInfo>& tensors);

/// IEEE 754 binary16 bits of a float, rounded to nearest even (overflow gives infinity; NaN
/// stays NaN).
uint16_t float_to_half(float f);

/// Converts `n` floats to `type` into `dst` (data_bytes of them): F32 as is, F16 rounded to
/// nearest even, Q8_0 in blocks of 32 (n a multiple of 32). Returns the index of the first value
/// the type cannot hold (F16: a finite value beyond binary16's largest, 65504; Q8_0: a block
/// whose scale max|x| / 127 is), or n when every value fits.
size_t convert(const float* src, size_t n, TensorType type, uint8_t* dst);

}  // namespace wte::gguf
