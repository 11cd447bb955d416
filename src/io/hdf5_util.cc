#include "src/io/hdf5_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <filesystem>

#include "wte/data.h"
#include "src/io/file_checks.h"
#include "wte/error.h"
#include "wte/tokenizer.h"

namespace wte::hdf5 {

void quiet() {
  static const bool once = [] {
    H5::Exception::dontPrint();
    return true;
  }();
  (void)once;
}

namespace {

// Why writing into directory `dir` failed, as a user can act on it: errno's text, and for a full
// disk the free space left.
std::string write_failure(int err, const std::string& dir) {
  std::string why = std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) {
    struct statvfs st;
    if (::statvfs(dir.c_str(), &st) == 0)
      why += " (the file system holding '" + dir + "' is full: " +
             std::to_string(static_cast<unsigned long long>(st.f_bavail) * st.f_frsize / 1024) +
             " KiB free)";
  } else if (err == EROFS) {
    why += " (the file system holding '" + dir + "' is mounted read-only)";
  }
  return why;
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& description,
                       const std::function<void(H5::H5File& file, const std::string& tmp)>& fill,
                       uint64_t expected_bytes, bool checksummed) {
  quiet();
  const std::string tmp = path + ".tmp";
  const std::string dir = std::filesystem::path(path).parent_path().empty()
                              ? std::string(".")
                              : std::filesystem::path(path).parent_path().string();
  // The file's space is reserved right after HDF5 creates it, before HDF5 writes a byte: HDF5
  // 1.10 cannot recover from a failed write (its file id stays open after the failed close and
  // the library crashes at exit), so a full disk must be found before HDF5 writes. HDF5 truncates
  // the file to what it used when it closes it.
  {
    // Created once with POSIX calls so that a read-only file system or a missing permission is
    // named with errno (HDF5 says only "unable to open file"); HDF5 truncates it next.
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      throw Error("writing " + description + " failed: cannot create '" + tmp + "': " +
                  write_failure(errno, dir));
    ::close(fd);
  }
  hsize_t used = 0;
  try {
    {
      H5::FileAccPropList fapl;
      fapl.setFcloseDegree(H5F_CLOSE_STRONG);  // closing the file closes anything left open
      if (checksummed) fapl.setLibverBounds(H5F_LIBVER_V110, H5F_LIBVER_V110);
      H5::H5File file(tmp, H5F_ACC_TRUNC, H5::FileCreatPropList::DEFAULT, fapl);
      if (expected_bytes > 0) {
        int* fd = nullptr;
        file.getVFDHandle(reinterpret_cast<void**>(&fd));
        int err = fd != nullptr ? ::posix_fallocate(*fd, 0, static_cast<off_t>(expected_bytes)) : 0;
        if (err == EOPNOTSUPP || err == EINVAL) err = 0;  // a file system without fallocate
        if (err != 0) {
          // Give back whatever was reserved, so HDF5's close (a superblock) finds room.
          if (::ftruncate(*fd, 0) != 0) {
          }
          file.close();
          std::remove(tmp.c_str());
          throw Error("writing " + description + " failed: " + write_failure(err, dir) +
                      "; it needs about " + std::to_string(expected_bytes / 1024) +
                      " KiB; nothing was written");
        }
      }
      fill(file, tmp);
      file.flush(H5F_SCOPE_GLOBAL);
      used = file.getFileSize();  // HDF5's end of file: what it wrote, without the reservation
    }  // every handle closed here (fill's own handles closed when it returned)
    // HDF5 does not know about the reserved tail (its idea of the file's end is what it wrote),
    // so it is cut off here.
    if (expected_bytes > 0 && used > 0 && ::truncate(tmp.c_str(), static_cast<off_t>(used)) != 0)
      throw Error("writing " + description + " failed: cannot truncate '" + tmp + "': " +
                  write_failure(errno, dir));
    commit_file(tmp, path);
  } catch (const H5::Exception& e) {
    std::remove(tmp.c_str());
    struct statvfs st;
    const bool full = ::statvfs(dir.c_str(), &st) == 0 &&
                      static_cast<uint64_t>(st.f_bavail) * st.f_frsize < std::max<uint64_t>(expected_bytes, 1 << 20);
    throw Error("writing " + description + " failed: " +
                (full ? write_failure(ENOSPC, dir) : e.getDetailMsg()));
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

H5::StrType utf8_string_type() {
  H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  type.setCset(H5T_CSET_UTF8);
  return type;
}

void write_string(H5::Group& where, const std::string& name, const std::string& value) {
  const H5::StrType type = utf8_string_type();
  H5::DataSet ds = where.createDataSet(name, type, H5::DataSpace(H5S_SCALAR));
  ds.write(value, type);
}

void write_string_attr(H5::H5Object& where, const std::string& name, const std::string& value) {
  const H5::StrType type = utf8_string_type();
  H5::Attribute attr = where.createAttribute(name, type, H5::DataSpace(H5S_SCALAR));
  attr.write(type, value);
}

namespace {

// A UTF-8 string type of exactly `bytes` bytes (at least 1), null-padded.
H5::StrType fixed_utf8_type(size_t bytes) {
  H5::StrType type(H5::PredType::C_S1, std::max<size_t>(bytes, 1));
  type.setCset(H5T_CSET_UTF8);
  type.setStrpad(H5T_STR_NULLPAD);
  return type;
}

}  // namespace

void write_fixed_string(H5::Group& where, const std::string& name, const std::string& value) {
  const H5::StrType type = fixed_utf8_type(value.size());
  H5::DataSet ds = where.createDataSet(name, type, H5::DataSpace(H5S_SCALAR));
  std::string padded = value;
  padded.resize(std::max<size_t>(value.size(), 1), '\0');
  ds.write(padded.data(), type);
}

void write_fixed_string_attr(H5::H5Object& where, const std::string& name, const std::string& value) {
  const H5::StrType type = fixed_utf8_type(value.size());
  H5::Attribute attr = where.createAttribute(name, type, H5::DataSpace(H5S_SCALAR));
  std::string padded = value;
  padded.resize(std::max<size_t>(value.size(), 1), '\0');
  attr.write(type, padded.data());
}

void write_int_attr(H5::H5Object& where, const std::string& name, int64_t value) {
  H5::Attribute attr =
      where.createAttribute(name, H5::PredType::STD_I64LE, H5::DataSpace(H5S_SCALAR));
  attr.write(H5::PredType::NATIVE_INT64, &value);
}

void ensure_parent_groups(H5::Group& root, const std::string& name) {
  size_t pos = 0;
  while ((pos = name.find('/', pos)) != std::string::npos) {
    const std::string group = name.substr(0, pos);
    if (!root.nameExists(group)) root.createGroup(group);
    ++pos;
  }
}

namespace {

template <typename F>
void write_tensor_of(H5::Group& where, const std::string& name, const std::vector<size_t>& shape,
                     const F* data, const H5::PredType& file_type, const H5::PredType& mem_type) {
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  const H5::DataSpace space = dims.empty()
                                  ? H5::DataSpace(H5S_SCALAR)
                                  : H5::DataSpace(static_cast<int>(dims.size()), dims.data());
  H5::DataSet ds = where.createDataSet(name, file_type, space);
  ds.write(data, mem_type);
}

// Chunked with Fletcher-32: chunks of whole rows (outermost dimension), at most 1 MiB each (at
// least one row): the checksum's buffer stays small, and reading allocates no second copy of a
// large tensor.
template <typename T>
void write_checked_of(H5::Group& where, const std::string& name, const std::vector<size_t>& shape,
                      const T* data, const H5::PredType& file_type, const H5::PredType& mem_type) {
  const bool chunkable =
      !shape.empty() && std::all_of(shape.begin(), shape.end(), [](size_t d) { return d > 0; });
  if (!chunkable) {
    if (!shape.empty()) {  // nothing to write (a zero dimension)
      const std::vector<hsize_t> dims(shape.begin(), shape.end());
      where.createDataSet(name, file_type, H5::DataSpace(static_cast<int>(dims.size()), dims.data()));
    } else {
      write_tensor_of(where, name, shape, data, file_type, mem_type);
    }
    return;
  }
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  size_t row_bytes = sizeof(T);
  for (size_t k = 1; k < shape.size(); ++k) row_bytes *= shape[k];
  std::vector<hsize_t> chunk = dims;
  chunk[0] = std::clamp<hsize_t>((size_t{1} << 20) / row_bytes, 1, dims[0]);
  H5::DSetCreatPropList dcpl;
  dcpl.setChunk(static_cast<int>(chunk.size()), chunk.data());
  dcpl.setFletcher32();
  const H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
  H5::DataSet ds = where.createDataSet(name, file_type, space, dcpl);
  ds.write(data, mem_type);
}

}  // namespace

void write_checked_tensor(H5::Group& where, const std::string& name,
                          const std::vector<size_t>& shape, const float* data) {
  write_checked_of(where, name, shape, data, H5::PredType::IEEE_F32LE, H5::PredType::NATIVE_FLOAT);
}

void write_checked_ints(H5::Group& where, const std::string& name,
                        const std::vector<uint32_t>& values) {
  write_checked_of(where, name, {values.size()}, values.data(), H5::PredType::STD_U32LE,
                   H5::PredType::NATIVE_UINT32);
}

void write_checked_ints(H5::Group& where, const std::string& name,
                        const std::vector<uint64_t>& values) {
  write_checked_of(where, name, {values.size()}, values.data(), H5::PredType::STD_U64LE,
                   H5::PredType::NATIVE_UINT64);
}

void write_tensor(H5::Group& where, const std::string& name, const std::vector<size_t>& shape,
                  const float* data) {
  write_tensor_of(where, name, shape, data, H5::PredType::IEEE_F32LE, H5::PredType::NATIVE_FLOAT);
}

void write_tensor(H5::Group& where, const std::string& name, const std::vector<size_t>& shape,
                  const double* data) {
  write_tensor_of(where, name, shape, data, H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE);
}

std::vector<size_t> dataset_shape(const H5::DataSet& ds) {
  const H5::DataSpace space = ds.getSpace();
  const int rank = space.getSimpleExtentNdims();
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
  space.getSimpleExtentDims(dims.data());
  return std::vector<size_t>(dims.begin(), dims.end());
}

std::string shape_str(const std::vector<size_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace wte::hdf5

// ---- Reading hostile files ---------------------------------------------------------------------
namespace wte::hdf5 {

Id& Id::operator=(Id&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    other.id_ = -1;
  }
  return *this;
}

void Id::reset() {
  if (id_ >= 0 && H5Iis_valid(id_) > 0) H5Idec_ref(id_);
  id_ = -1;
}

namespace {

// What HDF5's error stack of the current thread says: every message, innermost first joined by
// "; ", and whether one of them is a file-locking failure.
struct StackText {
  std::string text;
  bool locked = false;
  int errno_seen = 0;
};

herr_t collect_error(unsigned /*n*/, const H5E_error2_t* err, void* data) {
  auto* st = static_cast<StackText*>(data);
  if (err->min_num == H5E_CANTLOCKFILE) st->locked = true;
  if (err->desc != nullptr) {
    const std::string d = err->desc;
    const size_t e = d.find("errno = ");
    if (e != std::string::npos && st->errno_seen == 0) st->errno_seen = std::atoi(d.c_str() + e + 8);
    if (st->text.find(d) == std::string::npos) st->text += (st->text.empty() ? "" : "; ") + d;
  }
  return 0;
}

StackText error_stack() {
  StackText st;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_error, &st);
  H5Eclear2(H5E_DEFAULT);
  return st;
}

[[noreturn]] void fail(const std::string& what, const std::string& msg) {
  H5Eclear2(H5E_DEFAULT);
  throw Error(what + ": " + msg);
}

std::vector<std::string> split_path(const std::string& name) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= name.size()) {
    const size_t slash = name.find('/', pos);
    const std::string part = name.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return parts;
}

// Opens the object `name` under `loc`, which must be reached through hard links only and be of
// `type` (H5I_DATASET or H5I_GROUP). Returns an invalid Id if it does not exist.
Id open_object(hid_t loc, const std::string& name, H5I_type_t type, const std::string& what) {
  const std::vector<std::string> parts = split_path(name);
  if (parts.empty()) {
    if (name != "/") fail(what, "empty object name");
    Id root(H5Oopen(loc, "/", H5P_DEFAULT));
    if (!root.valid() || H5Iget_type(root.get()) != type)
      fail(what, "cannot open the root group: " + error_stack().text);
    return root;
  }
  std::string prefix;
  for (size_t i = 0; i < parts.size(); ++i) {
    prefix += (i ? "/" : "") + parts[i];
    const htri_t there = H5Lexists(loc, prefix.c_str(), H5P_DEFAULT);
    if (there < 0) fail(what, "cannot look up '" + prefix + "': " + error_stack().text);
    if (there == 0) return Id();
    H5L_info_t info;
    if (H5Lget_info(loc, prefix.c_str(), &info, H5P_DEFAULT) < 0)
      fail(what, "cannot look up '" + prefix + "': " + error_stack().text);
    if (info.type != H5L_TYPE_HARD)
      fail(what, "'" + prefix + "' is " + (info.type == H5L_TYPE_SOFT ? "a soft" : "an external") +
                     " link; a wte checkpoint holds no links, only groups and datasets");
    const bool last = i + 1 == parts.size();
    Id obj(H5Oopen(loc, prefix.c_str(), H5P_DEFAULT));
    if (!obj.valid()) fail(what, "cannot open '" + prefix + "': " + error_stack().text);
    const H5I_type_t got = H5Iget_type(obj.get());
    const H5I_type_t want = last ? type : H5I_GROUP;
    if (got != want)
      fail(what, "'" + prefix + "' is " + (got == H5I_GROUP ? "a group" : got == H5I_DATASET ? "a dataset" : "a named datatype") +
                     ", expected " + (want == H5I_GROUP ? "a group" : "a dataset"));
    // Each dataset again as it is opened: no read of wte's reaches outside the file.
    if (last && got == H5I_DATASET) check_dataset_storage(obj.get(), prefix, what);
    if (last) return obj;
  }
  return Id();
}

size_t product(const std::vector<size_t>& shape) {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  return n;
}

// Opens dataset `name`, checks it holds `n` elements of `elem_bytes` bytes with a shape equal
// to `shape` ({n} for the 1-D readers) and that the file can hold that many bytes.
Id checked_dataset(hid_t loc, const std::string& name, const std::vector<size_t>& shape,
                   size_t elem_bytes, const std::string& what) {
  Id ds = open_dataset(loc, name, what);
  Id space(H5Dget_space(ds.get()));
  if (!space.valid()) fail(what, "dataset '" + name + "' has no dataspace");
  const std::vector<size_t> got = space_shape(space.get(), what, "dataset '" + name + "'");
  if (got != shape)
    fail(what, "dataset '" + name + "' has shape " + shape_str(got) + ", expected " + shape_str(shape));
  // A contiguous or compact dataset without filters stores every byte: its claimed storage must
  // fit in the file (a forged size is refused here, before a buffer is sized by it).
  const size_t bytes = product(shape) * elem_bytes;
  Id dcpl(H5Dget_create_plist(ds.get()));
  const int filters = dcpl.valid() ? H5Pget_nfilters(dcpl.get()) : -1;
  const H5D_layout_t layout = dcpl.valid() ? H5Pget_layout(dcpl.get()) : H5D_LAYOUT_ERROR;
  if (filters < 0 || layout == H5D_LAYOUT_ERROR || layout == H5D_VIRTUAL)
    fail(what, "dataset '" + name + "' has an unsupported storage layout");
  Id file(H5Iget_file_id(ds.get()));
  hsize_t file_size = 0;
  if (!file.valid() || H5Fget_filesize(file.get(), &file_size) < 0)
    fail(what, "cannot read the file size");
  if (filters == 0 && layout != H5D_CHUNKED && bytes > 0) {
    const hsize_t stored = H5Dget_storage_size(ds.get());
    if (stored < bytes || stored > file_size)
      fail(what, "dataset '" + name + "' claims " + std::to_string(stored) + " bytes of storage for " +
                     std::to_string(bytes) + " bytes of data in a file of " + std::to_string(file_size) +
                     " bytes (truncated or corrupt)");
  }
  H5Eclear2(H5E_DEFAULT);
  return ds;
}

void read_checked(hid_t ds, hid_t mem_type, void* dst, const std::string& name,
                  const std::string& what) {
  if (H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst) < 0)
    fail(what, "dataset '" + name + "' cannot be read (truncated or corrupt?): " + error_stack().text);
}

template <typename T>
void read_uints(hid_t loc, const std::string& name, size_t n, T* dst, hid_t mem_type,
                const std::string& what) {
  Id ds = open_dataset(loc, name, what);
  {
    Id type(H5Dget_type(ds.get()));
    if (!type.valid() || H5Tget_class(type.get()) != H5T_INTEGER ||
        H5Tget_sign(type.get()) != H5T_SGN_NONE || H5Tget_size(type.get()) != sizeof(T))
      fail(what, "dataset '" + name + "' is not uint" + std::to_string(8 * sizeof(T)));
  }
  ds = checked_dataset(loc, name, {n}, sizeof(T), what);
  if (n > 0) read_checked(ds.get(), mem_type, dst, name, what);
}

// The attribute `name` of `obj`, which must exist, be of `cls` and be a scalar.
Id open_scalar_attr(hid_t obj, const std::string& name, H5T_class_t cls, const char* kind,
                    const std::string& what, const std::string& label) {
  if (!has_attr(obj, name)) fail(what, "has no " + label);
  Id attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT));
  if (!attr.valid()) fail(what, label + " cannot be opened: " + error_stack().text);
  Id type(H5Aget_type(attr.get()));
  if (!type.valid() || H5Tget_class(type.get()) != cls) fail(what, label + " is not " + kind);
  Id space(H5Aget_space(attr.get()));
  if (!space.valid()) fail(what, label + " has no dataspace");
  const std::vector<size_t> shape = space_shape(space.get(), what, label);
  if (!shape.empty()) fail(what, label + " has shape " + shape_str(shape) + ", expected a scalar");
  return attr;
}

// A string from a scalar object of string type `file_type` read by `read(mem_type, buffer)`.
template <typename Read, typename Reclaim>
std::string read_string_of(hid_t file_type, size_t max_bytes, const std::string& what,
                           const std::string& label, Read read, Reclaim reclaim) {
  const htri_t vlen = H5Tis_variable_str(file_type);
  if (vlen < 0) fail(what, label + " has a broken string type");
  Id mem(H5Tcopy(H5T_C_S1));
  // HDF5 converts no string between character sets: read in the file's own (ASCII or UTF-8).
  const H5T_cset_t cset = H5Tget_cset(file_type);
  if (cset != H5T_CSET_ASCII && cset != H5T_CSET_UTF8) fail(what, label + " has an unknown character set");
  H5Tset_cset(mem.get(), cset);
  if (vlen > 0) {
    if (H5Tset_size(mem.get(), H5T_VARIABLE) < 0) fail(what, "H5Tset_size failed");
    char* buf = nullptr;
    if (read(mem.get(), &buf) < 0) fail(what, label + " cannot be read: " + error_stack().text);
    std::string value = buf == nullptr ? std::string() : std::string(buf, ::strnlen(buf, max_bytes + 1));
    reclaim(mem.get(), &buf);
    if (value.size() > max_bytes) fail(what, label + " is longer than " + std::to_string(max_bytes) + " bytes");
    return value;
  }
  const size_t size = H5Tget_size(file_type);
  if (size == 0 || size > max_bytes)
    fail(what, label + " is a fixed-length string of " + std::to_string(size) + " bytes; allowed: 1 to " +
                   std::to_string(max_bytes));
  // Null-padded in memory: HDF5 converts a null-terminated file string into it unchanged, and
  // keeps a null-padded one's last byte (a null-terminated memory type would replace it).
  if (H5Tset_size(mem.get(), size) < 0 || H5Tset_strpad(mem.get(), H5T_STR_NULLPAD) < 0)
    fail(what, "H5Tset_size failed");
  std::string value(size + 1, '\0');
  if (read(mem.get(), value.data()) < 0) fail(what, label + " cannot be read: " + error_stack().text);
  value.resize(::strnlen(value.data(), size));
  return value;
}

}  // namespace

Id open_readonly(const std::string& path, const std::string& what) {
  quiet();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  // A directory, /dev/null or a FIFO (on which H5Fis_hdf5 would block) is named as what it is.
  const std::string problem = io::input_file_problem(path);
  if (problem == "does not exist") throw Error(what + " does not exist");
  if (!problem.empty()) throw Error("'" + path + "' " + problem);
  const htri_t is = H5Fis_hdf5(path.c_str());
  if (is == 0) throw Error("'" + path + "' is not an HDF5 file (so not a wte checkpoint)");
  Id file(is > 0 ? H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT) : -1);
  if (!file.valid()) {
    const StackText st = error_stack();
    if (st.locked)
      throw FileLockedError(
          what + " is locked: another process has it open for writing (HDF5 file locking: " +
          st.text + "). Wait for that process to finish, or, if the file is complete and no "
          "process writes it (e.g. a file system without working locks), set "
          "HDF5_USE_FILE_LOCKING=FALSE");
    throw Error("cannot open " + what + " (truncated or corrupt HDF5?): " +
                (st.text.empty() ? std::string("H5Fopen failed") : st.text));
  }
  check_self_contained(file.get(), what);
  return file;
}

bool exists(hid_t loc, const std::string& name, const std::string& what) {
  const std::vector<std::string> parts = split_path(name);
  std::string prefix;
  for (size_t i = 0; i < parts.size(); ++i) {
    prefix += (i ? "/" : "") + parts[i];
    const htri_t there = H5Lexists(loc, prefix.c_str(), H5P_DEFAULT);
    if (there <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
    H5L_info_t info;
    if (H5Lget_info(loc, prefix.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_HARD)
      fail(what, "'" + prefix + "' is a soft or external link; a wte checkpoint holds no links");
    if (i + 1 < parts.size()) {
      Id obj(H5Oopen(loc, prefix.c_str(), H5P_DEFAULT));
      if (!obj.valid() || H5Iget_type(obj.get()) != H5I_GROUP)
        fail(what, "'" + prefix + "' is not a group");
    }
  }
  return !parts.empty();
}

Id open_dataset(hid_t loc, const std::string& name, const std::string& what) {
  Id ds = open_object(loc, name, H5I_DATASET, what);
  if (!ds.valid()) throw Error(what + " has no dataset '" + name + "'");
  return ds;
}

Id open_group(hid_t loc, const std::string& name, const std::string& what) {
  Id g = open_object(loc, name, H5I_GROUP, what);
  if (!g.valid()) throw Error(what + " has no group '" + name + "'");
  return g;
}

std::vector<size_t> space_shape(hid_t space, const std::string& what, const std::string& label) {
  const H5S_class_t cls = H5Sget_simple_extent_type(space);
  if (cls == H5S_SCALAR) return {};
  if (cls != H5S_SIMPLE) fail(what, label + " has an empty (null) or unknown dataspace");
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > 32) fail(what, label + " has rank " + std::to_string(rank));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space, dims.data(), nullptr) < 0)
    fail(what, label + ": cannot read its dimensions");
  return std::vector<size_t>(dims.begin(), dims.end());
}

void read_f32(hid_t loc, const std::string& name, const std::vector<size_t>& shape, float* dst,
              const std::string& what) {
  Id ds = open_dataset(loc, name, what);
  {
    Id type(H5Dget_type(ds.get()));
    if (!type.valid() || H5Tget_class(type.get()) != H5T_FLOAT ||
        (H5Tequal(type.get(), H5T_IEEE_F32LE) <= 0 && H5Tequal(type.get(), H5T_IEEE_F32BE) <= 0))
      fail(what, "dataset '" + name + "' is not float32");
  }
  ds = checked_dataset(loc, name, shape, 4, what);
  if (product(shape) > 0) read_checked(ds.get(), H5T_NATIVE_FLOAT, dst, name, what);
}

void read_u32(hid_t loc, const std::string& name, size_t n, uint32_t* dst, const std::string& what) {
  read_uints(loc, name, n, dst, H5T_NATIVE_UINT32, what);
}

void read_u64(hid_t loc, const std::string& name, size_t n, uint64_t* dst, const std::string& what) {
  read_uints(loc, name, n, dst, H5T_NATIVE_UINT64, what);
}

std::string read_string(hid_t loc, const std::string& name, const std::string& what,
                        size_t max_bytes) {
  Id ds = open_dataset(loc, name, what);
  const std::string label = "dataset '" + name + "'";
  Id type(H5Dget_type(ds.get()));
  if (!type.valid() || H5Tget_class(type.get()) != H5T_STRING) fail(what, label + " is not a string");
  Id space(H5Dget_space(ds.get()));
  if (!space.valid()) fail(what, label + " has no dataspace");
  const std::vector<size_t> shape = space_shape(space.get(), what, label);
  if (!shape.empty()) fail(what, label + " has shape " + shape_str(shape) + ", expected a scalar string");
  const hid_t d = ds.get(), s = space.get();
  return read_string_of(
      type.get(), max_bytes, what, label,
      [&](hid_t mem, void* buf) { return H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf); },
      [&](hid_t mem, char** buf) { H5Dvlen_reclaim(mem, s, H5P_DEFAULT, buf); });
}

bool has_attr(hid_t obj, const std::string& name) {
  const htri_t there = H5Aexists(obj, name.c_str());
  H5Eclear2(H5E_DEFAULT);
  return there > 0;
}

std::string read_string_attr(hid_t obj, const std::string& name, const std::string& what,
                             const std::string& label) {
  Id attr = open_scalar_attr(obj, name, H5T_STRING, "a string", what, label);
  Id type(H5Aget_type(attr.get()));
  const hid_t a = attr.get();
  return read_string_of(
      type.get(), size_t{1} << 20, what, label,
      [&](hid_t mem, void* buf) { return H5Aread(a, mem, buf); },
      [&](hid_t /*mem*/, char** buf) { H5free_memory(*buf); });
}

int64_t read_int_attr(hid_t obj, const std::string& name, const std::string& what,
                      const std::string& label) {
  Id attr = open_scalar_attr(obj, name, H5T_INTEGER, "an integer", what, label);
  Id type(H5Aget_type(attr.get()));
  const size_t size = H5Tget_size(type.get());
  if (size == 0 || size > 8) fail(what, label + " is an integer of " + std::to_string(size) + " bytes");
  if (H5Tget_sign(type.get()) == H5T_SGN_NONE) {
    uint64_t u = 0;
    if (H5Aread(attr.get(), H5T_NATIVE_UINT64, &u) < 0) fail(what, label + " cannot be read");
    if (u > static_cast<uint64_t>(INT64_MAX)) fail(what, label + " is " + std::to_string(u) + ", above 2^63 - 1");
    return static_cast<int64_t>(u);
  }
  int64_t v = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_INT64, &v) < 0) fail(what, label + " cannot be read");
  return v;
}

uint64_t read_u64_attr(hid_t obj, const std::string& name, const std::string& what,
                       const std::string& label) {
  Id attr = open_scalar_attr(obj, name, H5T_INTEGER, "uint64", what, label);
  Id type(H5Aget_type(attr.get()));
  if (H5Tget_sign(type.get()) != H5T_SGN_NONE || H5Tget_size(type.get()) != 8)
    fail(what, label + " is not uint64");
  uint64_t v = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_UINT64, &v) < 0) fail(what, label + " cannot be read");
  return v;
}

float read_float_attr(hid_t obj, const std::string& name, const std::string& what,
                      const std::string& label) {
  Id attr = open_scalar_attr(obj, name, H5T_FLOAT, "a float", what, label);
  Id type(H5Aget_type(attr.get()));
  const size_t size = H5Tget_size(type.get());
  if (size != 4 && size != 8) fail(what, label + " is a float of " + std::to_string(size) + " bytes");
  double v = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v) < 0) fail(what, label + " cannot be read");
  if (!std::isfinite(v) || !std::isfinite(static_cast<float>(v)))
    fail(what, label + " is " + std::to_string(v) + ", not a finite float32");
  return static_cast<float>(v);
}

namespace {

struct Visit {
  std::vector<std::string> datasets;
  std::string error;
};

herr_t visit_link(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  auto* v = static_cast<Visit*>(data);
  if (info->type != H5L_TYPE_HARD) {
    // Built by construction and appends, then moved: GCC 12 warns falsely (-Wrestrict) on
    // "'" + std::string(name) (an insert) and on assigning a literal (a replace).
    std::string error = "'";
    error += escape_piece(name);
    error += "' is a ";
    error += info->type == H5L_TYPE_SOFT ? "soft" : "external";
    error += " link; a wte checkpoint holds no links, only groups and datasets";
    v->error = std::move(error);
    return 1;
  }
  Id obj(H5Oopen(group, name, H5P_DEFAULT));
  const H5I_type_t t = obj.valid() ? H5Iget_type(obj.get()) : H5I_BADID;
  if (t == H5I_DATASET) {
    v->datasets.push_back(name);
  } else if (t != H5I_GROUP) {
    std::string error = "'";
    error += escape_piece(name);  // from the file: no control bytes into a terminal
    error += "' is neither a group nor a dataset";
    v->error = std::move(error);
    return 1;
  }
  if (v->datasets.size() > 100000) {
    v->error = "more than 100000 datasets";
    return 1;
  }
  return 0;
}

}  // namespace

std::vector<std::string> list_datasets(hid_t loc, const std::string& what) {
  Visit v;
  const herr_t r = H5Lvisit(loc, H5_INDEX_NAME, H5_ITER_INC, visit_link, &v);
  if (!v.error.empty()) fail(what, v.error);
  if (r < 0) fail(what, "cannot list its objects (corrupt?): " + error_stack().text);
  return v.datasets;
}

bool checksummed_format(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  unsigned char head[9] = {};
  const ssize_t got = ::pread(fd, head, sizeof head, 0);
  ::close(fd);
  static const unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  return got == static_cast<ssize_t>(sizeof head) && std::memcmp(head, kSignature, 8) == 0 &&
         head[8] >= 2;
}

namespace {

// Descriptors a child of run_isolated closes first (close_in_isolated_children), in a fixed array
// of atomics: the child reads it after fork without a lock another thread may have held.
constexpr size_t kChildCloses = 8;
std::array<std::atomic<int>, kChildCloses>& child_closes() {
  static std::array<std::atomic<int>, kChildCloses> fds = {-1, -1, -1, -1, -1, -1, -1, -1};
  return fds;
}

std::atomic<void (*)()> g_wait_check{nullptr};

// The child's report on its pipe: one kind byte ('E' wte::Error, 'L' FileLockedError, 'X' any
// other exception), then the message.
void child_report(int fd, char kind, const std::string& message) {
  std::string out(1, kind);
  out += message;
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::write(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

// Reads the child's report from `fd` until the child closes it (returns true) or `wall_seconds`
// pass (false), calling the wait check (set_wait_check) at least every 100 ms.
bool wait_for_child(int fd, double wall_seconds, std::string* message) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(wall_seconds * 1000));
  for (;;) {
    if (void (*check)() = g_wait_check.load()) check();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    struct pollfd p = {fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
    if (r < 0 && errno != EINTR) return true;
    if (r <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;  // end of file: the child exited (or closed the pipe)
    if (message->size() < (size_t{1} << 16)) message->append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

void close_in_isolated_children(int fd) {
  for (std::atomic<int>& slot : child_closes()) {
    int empty = -1;
    if (slot.compare_exchange_strong(empty, fd)) return;
  }
  throw Error("close_in_isolated_children: more than " + std::to_string(kChildCloses) +
              " descriptors marked");
}

void keep_in_isolated_children(int fd) {
  for (std::atomic<int>& slot : child_closes()) {
    int want = fd;
    slot.compare_exchange_strong(want, -1);
  }
}

void set_wait_check(void (*check)()) { g_wait_check.store(check); }

void run_isolated(const std::function<void()>& read, const std::string& what, double cpu_seconds,
                  double wall_seconds) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error("cannot check " + what + ": pipe failed: " + std::strerror(errno));
  std::fflush(nullptr);  // nothing buffered is duplicated into the child (it never flushes anyway)
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error("cannot check " + what + ": fork failed: " + std::strerror(err));
  }
  if (pid == 0) {
    // The child dies with its parent (a SIGKILLed wte train leaves no reader behind), and the
    // descriptors marked close_in_isolated_children (a run directory's lock) are closed first, so
    // it never holds what its parent locked. getppid() catches a parent that died before prctl.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    for (const std::atomic<int>& fd : child_closes())
      if (const int f = fd.load(); f >= 0) ::close(f);
    ::close(fds[0]);
    // No core file for a crash on a damaged file; SIGXCPU at the CPU limit ends the child.
    const struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    const rlim_t cpu = static_cast<rlim_t>(std::ceil(cpu_seconds));
    const struct rlimit cpu_limit = {cpu, cpu + 1};
    ::setrlimit(RLIMIT_CPU, &cpu_limit);
    ::signal(SIGXCPU, SIG_DFL);
    ::signal(SIGINT, SIG_IGN);  // a Ctrl-C is the parent's to handle (it kills the child)
    ::signal(SIGTERM, SIG_DFL);
    int status = 0;
    try {
      read();
    } catch (const FileLockedError& e) {
      child_report(fds[1], 'L', e.what());
      status = 1;
    } catch (const Error& e) {
      child_report(fds[1], 'E', e.what());
      status = 1;
    } catch (const std::exception& e) {
      child_report(fds[1], 'X', e.what());
      status = 1;
    } catch (...) {
      child_report(fds[1], 'X', "an unknown exception");
      status = 1;
    }
    ::_exit(status);
  }
  ::close(fds[1]);
  std::string message;
  bool timed_out = false;
  try {
    timed_out = !wait_for_child(fds[0], wall_seconds, &message);
  } catch (...) {
    // The wait check asked to stop (e.g. Ctrl-C in wte train): the child goes too.
    ::close(fds[0]);
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw;
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    throw Error(what + " is corrupt: reading it did not finish in " +
                std::to_string(static_cast<long long>(wall_seconds)) +
                " s (HDF5 loops on some damaged metadata); stopped it");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (WIFEXITED(status) && !message.empty()) {
    const std::string text = message.substr(1);
    if (message[0] == 'L') throw FileLockedError(text);
    if (message[0] == 'E') throw Error(text);
    throw Error("cannot read " + what + ": " + text);
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGXCPU || sig == SIGKILL)
      throw Error(what + " is corrupt: reading it used more than " +
                  std::to_string(static_cast<long long>(std::ceil(cpu_seconds))) +
                  " s of CPU time (HDF5 loops on some damaged metadata); stopped it");
    const char* name = ::sigdescr_np(sig);
    throw Error(what + " is corrupt: reading it crashed HDF5's parser (signal " +
                std::to_string(sig) + ", " + (name != nullptr ? name : "unknown") +
                "): its HDF5 metadata is damaged");
  }
  throw Error("cannot check " + what + ": the reading process ended with status " +
              std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : status));
}

}  // namespace wte::hdf5
