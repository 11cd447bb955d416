// The safetensors format (Hugging Face, https://github.com/huggingface/safetensors, README
// "Format"): a file is
//   8 bytes   N, the header's length, unsigned 64-bit little-endian
//   N bytes   a UTF-8 JSON object: tensor name -> {"dtype": "F32", "shape": [d0, d1, ...],
//             "data_offsets": [begin, end]}, plus an optional "__metadata__": {string: string};
//             may end in spaces (writers pad it so the data is 8-byte aligned)
//   the rest  the data buffer: every tensor's bytes, row-major, little-endian, at
//             [begin, end) relative to the buffer's start
// Files are shared and downloaded, so the reader treats every byte as hostile: the header length,
// the JSON, every dtype, shape and offset are checked, and the tensors must tile the buffer exactly
// (sorted by begin: the first starts at 0, each starts where the previous ended, the last ends at
// the buffer's end; end - begin = product(shape) * dtype size, without overflow), as the reference
// implementation requires, before any tensor's bytes are read. A violation is a wte::Error naming
// the file, the tensor and the offset. Private to wte (the public entry points are
// include/wte/interop.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace wte::safetensors {

/// Element types of the format. wte converts F32, F16 and BF16 to float32; the others are parsed
/// (their sizes are checked) but converting them is an error naming the tensor and its dtype.
enum class Dtype { F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL, F8_E4M3, F8_E5M2 };

/// "F32", "BF16", ...
const char* dtype_name(Dtype d);
/// Bytes of one element.
size_t dtype_size(Dtype d);

/// One tensor of the header. `begin`, `end`: bytes relative to the data buffer.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<size_t> shape;
  uint64_t begin = 0, end = 0;
  size_t numel() const;  // product of shape (1 for a scalar), overflow already excluded
};

/// A parsed, validated safetensors file over bytes it does not own (a memory map or a buffer),
/// which must outlive it.
class View {
 public:
  /// Parses and validates `bytes` (the whole file). `origin` names it in errors ("safetensors
  /// 'model.safetensors'"). Errors (wte::Error, each naming origin): fewer than 8 bytes; a header
  /// length past the end of the file or above 100 MB; a header that is not UTF-8 JSON, not an
  /// object, or has a duplicate name; "__metadata__" not an object of strings; a tensor entry
  /// that is not an object with exactly "dtype", "shape" and "data_offsets"; an unknown dtype; a
  /// shape that is not a list of whole numbers (at most 16 dimensions); data_offsets that are not
  /// two whole numbers with begin <= end; a byte count that is not product(shape) * dtype size;
  /// offsets past the end of the buffer (named with the buffer's size), overlapping, or leaving
  /// bytes no tensor covers.
  View(const uint8_t* bytes, size_t size, std::string origin);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in header order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& origin() const { return origin_; }
  /// The tensor `name`, or nullptr.
  const TensorInfo* find(const std::string& name) const;
  /// The raw bytes of a tensor of this file (t.end - t.begin of them).
  const uint8_t* data(const TensorInfo& t) const { return data_ + t.begin; }
  /// Bytes of the header (8 + N): where the data buffer starts in the file.
  uint64_t data_start() const { return data_start_; }

  /// Converts tensor `t` to float32 into dst (t.numel() floats): F32 as is, F16 and BF16 widened
  /// exactly (IEEE half incl. subnormals, infinities, NaN; bfloat16 = the top 16 bits of a
  /// float32). Another dtype is a wte::Error naming the tensor and its dtype.
  void to_f32(const TensorInfo& t, float* dst) const;

 private:
  const uint8_t* data_ = nullptr;  // the data buffer
  uint64_t data_start_ = 0;
  std::string origin_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

/// A safetensors file read whole into memory (pread) and validated (View). Not memory-mapped: a
/// mapped file that another process truncates kills the reader with SIGBUS at the first access
/// past the new end; read, the bytes are this process's own, and a file that shrinks (or grows)
/// while it is read is an error naming the path and both sizes, as is one whose modification or
/// change time moves meanwhile (cut short and written back to its size). Throws wte::Error naming the path
/// if it is missing, a directory or unreadable (a read error with errno's text), then View's
/// errors.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const View& view() const { return *view_; }
  uint64_t size() const { return size_; }

 private:
  std::unique_ptr<uint8_t[]> bytes_;  // size_ bytes (at least 1: a View needs a pointer)
  uint64_t size_ = 0;
  View* view_ = nullptr;
};

/// A float32 tensor to write.
struct OutTensor {
  std::string name;
  std::vector<size_t> shape;
  const float* data;  // product(shape) floats
};

/// The whole header (8-byte length + JSON, padded with spaces to a multiple of 8 bytes) for
/// `tensors` stored F32 in the given order, back to back; `metadata` goes under "__metadata__".
/// Deterministic: the same tensors give the same bytes.
std::string header_bytes(const std::vector<OutTensor>& tensors,
                         const std::map<std::string, std::string>& metadata);

/// Writes a safetensors file of `tensors` (F32, little-endian, in the given order) atomically:
/// PATH.tmp (the whole size reserved first, so a full disk fails before any byte is written),
/// then, if `commit`, fsync, rename over PATH, fsync of the directory (wte::commit_file); with
/// commit = false the finished PATH.tmp is left for the caller to commit (an export of several
/// files commits them together). On error the temporary file is removed and nothing is left at
/// PATH; wte::Error names the path.
void write_file(const std::string& path, const std::vector<OutTensor>& tensors,
                const std::map<std::string, std::string>& metadata, bool commit = true);

/// IEEE 754 half and bfloat16 bits to float, exactly.
float half_to_float(uint16_t h);
float bf16_to_float(uint16_t b);

}  // namespace wte::safetensors
