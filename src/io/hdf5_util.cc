#include "src/io/hdf5_util.h"

#include <algorithm>
#include <cstdio>

#include "wte/data.h"
#include "wte/error.h"

namespace wte::hdf5 {

void quiet() {
  static const bool once = [] {
    H5::Exception::dontPrint();
    return true;
  }();
  (void)once;
}

void write_file_atomic(const std::string& path, const std::string& description,
                       const std::function<void(H5::H5File& file, const std::string& tmp)>& fill) {
  quiet();
  const std::string tmp = path + ".tmp";
  try {
    {
      H5::H5File file(tmp, H5F_ACC_TRUNC);
      fill(file, tmp);
      file.flush(H5F_SCOPE_GLOBAL);
    }  // every handle closed here (fill's own handles closed when it returned)
    commit_file(tmp, path);
  } catch (const H5::Exception& e) {
    std::remove(tmp.c_str());
    throw Error("writing " + description + " failed: " + e.getDetailMsg());
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

}  // namespace

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
