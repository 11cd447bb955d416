#include "src/checkpoint.h"

#include <H5Cpp.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "src/data.h"
#include "src/error.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

// HDF5 prints its error stack to stderr by default; wte reports errors itself.
void quiet_hdf5() {
  static const bool once = [] {
    H5::Exception::dontPrint();
    return true;
  }();
  (void)once;
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

void write_tensor(H5::Group& where, const std::string& name, const std::vector<size_t>& shape,
                  const float* data) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
  H5::DataSet ds = where.createDataSet(name, H5::PredType::IEEE_F32LE, space);
  ds.write(data, H5::PredType::NATIVE_FLOAT);
}

// Makes the groups of a path like "ln_f/g" exist under `root`.
void ensure_parent_groups(H5::Group& root, const std::string& name) {
  size_t pos = 0;
  while ((pos = name.find('/', pos)) != std::string::npos) {
    const std::string group = name.substr(0, pos);
    if (!root.nameExists(group)) root.createGroup(group);
    ++pos;
  }
}

std::string read_string(const H5::Group& where, const std::string& name, const std::string& path) {
  if (!where.nameExists(name)) throw Error("checkpoint '" + path + "' has no dataset '" + name + "'");
  H5::DataSet ds = where.openDataSet(name);
  if (ds.getTypeClass() != H5T_STRING)
    throw Error("checkpoint '" + path + "': dataset '" + name + "' is not a string");
  std::string value;
  ds.read(value, ds.getStrType());
  return value;
}

std::string read_string_attr(const H5::H5Object& where, const std::string& name,
                             const std::string& path) {
  if (!where.attrExists(name))
    throw Error("'" + path + "' is not a wte checkpoint: it has no attribute '" + name + "'");
  H5::Attribute attr = where.openAttribute(name);
  if (attr.getTypeClass() != H5T_STRING)
    throw Error("checkpoint '" + path + "': attribute '" + name + "' is not a string");
  std::string value;
  attr.read(attr.getStrType(), value);
  return value;
}

int64_t read_int_attr(const H5::H5Object& where, const std::string& name, const std::string& path) {
  if (!where.attrExists(name))
    throw Error("checkpoint '" + path + "' has no attribute '" + name + "'");
  H5::Attribute attr = where.openAttribute(name);
  if (attr.getTypeClass() != H5T_INTEGER)
    throw Error("checkpoint '" + path + "': attribute '" + name + "' is not an integer");
  int64_t value = 0;
  attr.read(H5::PredType::NATIVE_INT64, &value);
  return value;
}

std::string shape_str(const std::vector<size_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Reads a float32 tensor of exactly `shape` into dst (size = product of shape).
void read_tensor(const H5::Group& where, const std::string& name, const std::vector<size_t>& shape,
                 float* dst, const std::string& path) {
  if (!where.nameExists(name))
    throw Error("checkpoint '" + path + "' has no dataset '" + name + "'");
  H5::DataSet ds = where.openDataSet(name);
  if (ds.getTypeClass() != H5T_FLOAT || ds.getFloatType().getSize() != 4)
    throw Error("checkpoint '" + path + "': dataset '" + name + "' is not float32");
  H5::DataSpace space = ds.getSpace();
  const int rank = space.getSimpleExtentNdims();
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
  space.getSimpleExtentDims(dims.data());
  const std::vector<size_t> got(dims.begin(), dims.end());
  if (got != shape)
    throw Error("checkpoint '" + path + "': dataset '" + name + "' has shape " + shape_str(got) +
                ", expected " + shape_str(shape));
  ds.read(dst, H5::PredType::NATIVE_FLOAT);
}

void open_or_throw(H5::H5File& file, const std::string& path) {
  quiet_hdf5();
  if (!fs::exists(path)) throw Error("checkpoint '" + path + "' does not exist");
  try {
    if (!H5::H5File::isHdf5(path))
      throw Error("'" + path + "' is not an HDF5 file (so not a wte checkpoint)");
    file.openFile(path, H5F_ACC_RDONLY);
  } catch (const H5::Exception& e) {
    throw Error("cannot open checkpoint '" + path + "' (truncated or corrupt HDF5?): " +
                e.getDetailMsg());
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const Model& model, const AdamW* optimizer,
                     const Tokenizer& tokenizer, const Config& config, int64_t step) {
  quiet_hdf5();
  const std::string tmp = path + ".tmp";
  try {
    {
      H5::H5File file(tmp, H5F_ACC_TRUNC);
      H5::Group root = file.openGroup("/");
      write_string_attr(root, "format", kCheckpointFormat);
      write_int_attr(root, "format_version", kCheckpointVersion);
      write_int_attr(root, "step", step);
      for (const TensorSpec& t : model.tensors()) {
        ensure_parent_groups(root, t.name);
        write_tensor(root, t.name, t.shape, model.param_data() + t.offset);
      }
      if (optimizer != nullptr) {
        H5::Group opt = root.createGroup("optimizer");
        write_int_attr(opt, "step", optimizer->step());
        for (const char* moment : {"m", "v"}) {
          H5::Group g = opt.createGroup(moment);
          const float* base = moment[0] == 'm' ? optimizer->m() : optimizer->v();
          for (const TensorSpec& t : model.tensors()) {
            ensure_parent_groups(g, t.name);
            write_tensor(g, t.name, t.shape, base + t.offset);
          }
        }
      }
      H5::Group tok = root.createGroup("tokenizer");
      write_string(tok, "encoder_json", tokenizer.encoder_json());
      write_string(tok, "vocab_bpe", tokenizer.vocab_bpe());
      H5::Group cfg = root.createGroup("config");
      write_string(cfg, "ini", config.to_ini());
      file.flush(H5F_SCOPE_GLOBAL);
    }  // every handle closed here
    commit_file(tmp, path);
  } catch (const H5::Exception& e) {
    std::remove(tmp.c_str());
    throw Error("writing checkpoint '" + path + "' failed: " + e.getDetailMsg());
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  H5::H5File file;
  open_or_throw(file, path);
  try {
    H5::Group root = file.openGroup("/");
    const std::string format = read_string_attr(root, "format", path);
    if (format != kCheckpointFormat)
      throw Error("'" + path + "' is not a wte checkpoint: format is '" + format + "', expected '" +
                  kCheckpointFormat + "'");
    CheckpointInfo info;
    info.format_version = read_int_attr(root, "format_version", path);
    if (info.format_version != kCheckpointVersion)
      throw Error("checkpoint '" + path + "' has format_version " +
                  std::to_string(info.format_version) + "; this build reads version " +
                  std::to_string(kCheckpointVersion));
    info.step = read_int_attr(root, "step", path);
    info.config_ini = read_string(root, "config/ini", path);
    info.encoder_json = read_string(root, "tokenizer/encoder_json", path);
    info.vocab_bpe = read_string(root, "tokenizer/vocab_bpe", path);
    // Validate every tensor's shape and dtype against the stored config.
    const Config cfg = parse_config(info.config_ini, "the config stored in '" + path + "'");
    Model probe_shapes_only(cfg.model);  // cheap next to the read; gives the canonical layout
    std::vector<float> scratch;
    for (const TensorSpec& t : probe_shapes_only.tensors()) {
      scratch.resize(t.size);
      read_tensor(root, t.name, t.shape, scratch.data(), path);
    }
    return info;
  } catch (const H5::Exception& e) {
    throw Error("checkpoint '" + path + "' is unreadable (truncated or corrupt?): " +
                e.getDetailMsg());
  }
}

void load_checkpoint(const std::string& path, Model& model, AdamW* optimizer) {
  const CheckpointInfo info = read_checkpoint_info(path);
  H5::H5File file;
  open_or_throw(file, path);
  try {
    H5::Group root = file.openGroup("/");
    const size_t n = model.num_parameters();
    std::vector<float> params(n), m, v;
    for (const TensorSpec& t : model.tensors())
      read_tensor(root, t.name, t.shape, params.data() + t.offset, path);
    int64_t opt_step = 0;
    const bool with_opt = optimizer != nullptr && root.nameExists("optimizer");
    if (with_opt) {
      m.resize(n);
      v.resize(n);
      H5::Group opt = root.openGroup("optimizer");
      opt_step = read_int_attr(opt, "step", path);
      for (const TensorSpec& t : model.tensors()) {
        read_tensor(opt, "m/" + t.name, t.shape, m.data() + t.offset, path);
        read_tensor(opt, "v/" + t.name, t.shape, v.data() + t.offset, path);
      }
    }
    // All reads succeeded: commit.
    std::copy(params.begin(), params.end(), model.param_data());
    if (with_opt) {
      std::copy(m.begin(), m.end(), optimizer->m());
      std::copy(v.begin(), v.end(), optimizer->v());
      optimizer->set_step(opt_step);
    }
    (void)info;
  } catch (const H5::Exception& e) {
    throw Error("checkpoint '" + path + "' is unreadable (truncated or corrupt?): " +
                e.getDetailMsg());
  }
}

}  // namespace wte
