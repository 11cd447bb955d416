// Internal HDF5 helpers shared by the files wte writes and reads (src/io/checkpoint.cc, src/analysis/gradcheck.cc,
// cli/cmd_grad.cc): writing a whole file atomically, quiet error printing, UTF-8 string datasets
// and attributes, int64 attributes, float32/float64 tensors, and the shape of a dataset. Errors of
// the small helpers are H5::Exception (HDF5 C++ API); callers turn them into wte::Error naming
// their file (write_file_atomic does). Not part of wte's public interface.
#pragma once

#include <H5Cpp.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "wte/error.h"

namespace wte::hdf5 {

/// Stops HDF5 printing its error stack to stderr (wte reports errors itself). Idempotent; call
/// before any HDF5 work.
void quiet();

/// Writes the HDF5 file `path` atomically: creates path + ".tmp" (truncating any old one), calls
/// fill(file, tmp_path) to write its contents, flushes and closes it, then commit_file (include/wte/data.h:
/// fsync, rename over `path`, fsync of the directory). On any error the temporary file is removed
/// and nothing is left at `path` (an earlier file there is untouched): an H5::Exception becomes
/// wte::Error "writing <description> failed: <HDF5's detail>"; any other exception (a wte::Error
/// from fill or commit_file) passes through unchanged. Calls quiet() first.
/// `expected_bytes` (0: unknown), a generous estimate of the file's size, is reserved on disk
/// (posix_fallocate) before HDF5 writes anything, so a full disk is an error naming ENOSPC, the
/// directory and its free space, found before any HDF5 write can fail (HDF5 1.10 does not survive
/// a failed write cleanly). A read-only file system or missing permission is named the same way.
/// `checksummed`: written in HDF5 1.10's file format (H5Pset_libver_bounds V110 to V110: superblock
/// version 3, version 2 object headers, new-style group and chunk indexes), in which every piece
/// of metadata HDF5 parses carries a checksum that HDF5 verifies before it parses it; such a file
/// needs HDF5 1.10 or later to read (h5py's wheels have it). Without it, the earliest format.
void write_file_atomic(const std::string& path, const std::string& description,
                       const std::function<void(H5::H5File& file, const std::string& tmp)>& fill,
                       uint64_t expected_bytes = 0, bool checksummed = false);

/// Variable-length string type with the UTF-8 character set (what h5py reads as str).
H5::StrType utf8_string_type();

/// A scalar UTF-8 string dataset `name` under `where`.
void write_string(H5::Group& where, const std::string& name, const std::string& value);

/// A scalar UTF-8 string attribute `name` on `where`.
void write_string_attr(H5::H5Object& where, const std::string& name, const std::string& value);

/// Fixed-length forms of write_string and write_string_attr: a UTF-8 string type of exactly
/// value.size() bytes (at least 1; null-padded), so the bytes are stored in the dataset or the
/// object header itself. Variable-length strings live in HDF5's global heap, whose records carry
/// no checksum (a damaged one is parsed as is). h5py reads these as bytes.
void write_fixed_string(H5::Group& where, const std::string& name, const std::string& value);
void write_fixed_string_attr(H5::H5Object& where, const std::string& name, const std::string& value);

/// As write_tensor, stored with a Fletcher-32 checksum per chunk (H5Pset_fletcher32: chunked
/// layout, chunks of whole rows of at most 1 MiB), which HDF5 verifies on every read: a damaged
/// value is a read error, not a wrong number. A scalar, or a shape with a zero dimension, cannot
/// be chunked and is written as write_tensor does. Also for uint32/uint64 vectors.
void write_checked_tensor(H5::Group& where, const std::string& name, const std::vector<size_t>& shape,
                          const float* data);
void write_checked_ints(H5::Group& where, const std::string& name, const std::vector<uint32_t>& values);
void write_checked_ints(H5::Group& where, const std::string& name, const std::vector<uint64_t>& values);

/// A scalar int64 (little-endian) attribute `name` on `where`.
void write_int_attr(H5::H5Object& where, const std::string& name, int64_t value);

/// Creates the groups of a path like "ln_f/g" (here "ln_f") under `root` that do not exist yet.
void ensure_parent_groups(H5::Group& root, const std::string& name);

/// A dataset `name` under `where` of `shape` ({} = scalar) holding prod(shape) values from `data`,
/// stored in the same precision: IEEE float32 (little-endian) for float, float64 for double.
/// The parent groups of `name` must exist (ensure_parent_groups).
void write_tensor(H5::Group& where, const std::string& name, const std::vector<size_t>& shape,
                  const float* data);
void write_tensor(H5::Group& where, const std::string& name, const std::vector<size_t>& shape,
                  const double* data);

/// The dimensions of a dataset's (simple) dataspace, outermost first; {} for a scalar.
std::vector<size_t> dataset_shape(const H5::DataSet& ds);

/// A shape as Python prints a tuple: "(3, 4)", "(5,)", "()".
std::string shape_str(const std::vector<size_t>& shape);

// ---- Reading hostile files (HDF5 C API) -------------------------------------------------------
// Checkpoints are files people share, so every read below checks the object's kind (hard link to
// a dataset, group or attribute: no soft or external links), its type class and size, its shape
// and, for a dataset, that the file can hold the bytes it claims, before one byte is read; every
// HDF5 id is owned by an Id, so no error path leaks one. Errors are wte::Error messages that start
// with the caller's `what` (e.g. "checkpoint 'runs/x/checkpoint_00000010.h5'") and name the
// dataset or attribute. None of these functions throws H5::Exception.

/// Owns one HDF5 id of any kind (file, group, dataset, attribute, datatype, dataspace, property
/// list) and releases it with H5Idec_ref. Move-only.
class Id {
 public:
  Id() = default;
  explicit Id(hid_t id) : id_(id) {}
  Id(Id&& other) noexcept : id_(other.id_) { other.id_ = -1; }
  Id& operator=(Id&& other) noexcept;
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() { reset(); }
  void reset();
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
};

/// Thrown by open_readonly when HDF5's file locking refuses the file because another process has
/// it open for writing (a wte::Error: callers that only report may treat it as one).
class FileLockedError : public Error {
 public:
  using Error::Error;
};

/// Opens the HDF5 file `path` read-only, then checks it is self-contained (check_self_contained)
/// before any dataset is read. Errors (wte::Error starting with `what`): the file does not exist,
/// is a directory, is not HDF5, or cannot be opened (truncated or corrupt, with HDF5's innermost
/// message); it reaches outside itself; FileLockedError when another process holds it open for
/// writing, naming HDF5_USE_FILE_LOCKING (never called corruption).
Id open_readonly(const std::string& path, const std::string& what);

/// Every object of the open file `file` must keep its bytes inside the file: a soft, external or
/// user-defined link anywhere, or a dataset that check_dataset_storage refuses, is a wte::Error
/// starting with `what` that names the object and what it points to (names escaped: they come
/// from the file). Reads object headers only, never a dataset's data, so no file the checked one
/// names is opened.
void check_self_contained(hid_t file, const std::string& what);

/// The dataset `ds` (named `name` in messages) must be stored as wte writes datasets: contiguous,
/// chunked or compact layout in the file itself, no external storage (H5Pset_external), not
/// virtual, and no filter but Fletcher-32. Else a wte::Error starting with `what`, naming the
/// external file, the virtual source or the filter (src/io/hdf5_storage.cc says why).
void check_dataset_storage(hid_t ds, const std::string& name, const std::string& what);

/// True if `name` (a path like "optimizer/m/wte", relative to `loc`) exists. Every component must
/// be a hard link and every inner one a group, else wte::Error ("... is a soft link ...").
bool exists(hid_t loc, const std::string& name, const std::string& what);

/// Opens the dataset `name` under `loc` (wte::Error if it is missing, reached through a link that
/// is not hard, or not a dataset).
Id open_dataset(hid_t loc, const std::string& name, const std::string& what);

/// Opens the group `name` under `loc` (same checks as open_dataset, for a group).
Id open_group(hid_t loc, const std::string& name, const std::string& what);

/// The shape of a dataset or attribute from its dataspace: {} for a scalar. A null dataspace or
/// a rank above 32 is a wte::Error naming `label`.
std::vector<size_t> space_shape(hid_t space, const std::string& what, const std::string& label);

/// Reads a float32 dataset (IEEE float32, either byte order) of exactly `shape` into dst. Checks
/// the file can hold the bytes it claims (a forged size is an error, not an allocation).
void read_f32(hid_t loc, const std::string& name, const std::vector<size_t>& shape, float* dst,
              const std::string& what);

/// Reads a 1-D dataset of unsigned integers of exactly `bytes` bytes each holding `n` values.
void read_u32(hid_t loc, const std::string& name, size_t n, uint32_t* dst,
              const std::string& what);
void read_u64(hid_t loc, const std::string& name, size_t n, uint64_t* dst,
              const std::string& what);

/// Reads a scalar string dataset (variable or fixed length, at most `max_bytes` bytes).
std::string read_string(hid_t loc, const std::string& name, const std::string& what,
                        size_t max_bytes = size_t{1} << 30);

/// Attribute readers: the attribute `name` of the object `obj` must be a scalar of the class
/// named. `label` is how messages name the attribute (e.g. "/data attribute 'epoch'").
bool has_attr(hid_t obj, const std::string& name);
std::string read_string_attr(hid_t obj, const std::string& name, const std::string& what,
                             const std::string& label);
/// Any integer type whose value fits int64.
int64_t read_int_attr(hid_t obj, const std::string& name, const std::string& what,
                      const std::string& label);
/// Exactly an unsigned 64-bit integer.
uint64_t read_u64_attr(hid_t obj, const std::string& name, const std::string& what,
                       const std::string& label);
/// A float32 or float64 scalar whose value is finite as a float32.
float read_float_attr(hid_t obj, const std::string& name, const std::string& what,
                      const std::string& label);

/// True if `path` starts with an HDF5 superblock of version 2 or later (HDF5 1.8's and 1.10's file
/// formats, written with write_file_atomic's `checksummed`): its metadata is checksummed, so
/// damage is found by HDF5 before it is parsed. False for the earliest format (version 0 or 1
/// superblock, written by default and by wte before checkpoint format version 3), a file whose
/// superblock is not at offset 0 (after a user block), and anything unreadable.
bool checksummed_format(const std::string& path);

/// Runs `read` in a forked child process, so that a file that crashes or hangs HDF5's parsers
/// (HDF5 1.10's earliest file format has metadata without checksums: a damaged byte can send it
/// into a segmentation fault or an endless loop) cannot take the caller with it. The child gets
/// `cpu_seconds` of CPU time (RLIMIT_CPU) and the caller waits at most `wall_seconds`, then kills
/// it. The child dies with the calling thread (PR_SET_PDEATHSIG) and first closes the descriptors
/// marked by close_in_isolated_children; the wait ends early if set_wait_check's check throws.
/// Returns when the child finished; throws wte::Error (FileLockedError for a locked file) with
/// the child's own message if `read` threw one, or "<what> is corrupt: ..." naming the signal, or
/// the time limit, if the child died or was killed. `read` must not write files or print: the
/// child ends with _exit, without flushing anything the parent holds.
void run_isolated(const std::function<void()>& read, const std::string& what, double cpu_seconds,
                  double wall_seconds);

/// Marks the descriptor `fd` to be closed at once in every child run_isolated forks, before it
/// reads anything: a child must not keep what its parent holds open, such as a run directory's
/// lock (flock, which a forked child shares). At most 8 at a time (wte::Error beyond).
/// keep_in_isolated_children(fd) unmarks it: call it before closing fd. Thread-safe.
void close_in_isolated_children(int fd);
void keep_in_isolated_children(int fd);

/// A check run_isolated calls at least every 100 ms while it waits for its child (nullptr: none).
/// If it throws, the child is killed and reaped and the exception reaches run_isolated's caller
/// unchanged. wte train sets one that throws wte::Interrupted on SIGINT/SIGTERM
/// (train/signals.cc), so a signal ends a validation within a second.
void set_wait_check(void (*check)());

/// Every dataset in the file under `loc`, as paths relative to it ("optimizer/m/wte"); a soft or
/// external link anywhere, or an object that is neither group nor dataset, is a wte::Error.
std::vector<std::string> list_datasets(hid_t loc, const std::string& what);

}  // namespace wte::hdf5
