// Internal HDF5 helpers shared by the files wte writes and reads (src/io/checkpoint.cc, src/analysis/gradcheck.cc,
// train/cmd_grad.cc): writing a whole file atomically, quiet error printing, UTF-8 string datasets
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
void write_file_atomic(const std::string& path, const std::string& description,
                       const std::function<void(H5::H5File& file, const std::string& tmp)>& fill);

/// Variable-length string type with the UTF-8 character set (what h5py reads as str).
H5::StrType utf8_string_type();

/// A scalar UTF-8 string dataset `name` under `where`.
void write_string(H5::Group& where, const std::string& name, const std::string& value);

/// A scalar UTF-8 string attribute `name` on `where`.
void write_string_attr(H5::H5Object& where, const std::string& name, const std::string& value);

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

}  // namespace wte::hdf5
