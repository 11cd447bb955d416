#include "wte/checkpoint.h"

#include <H5Cpp.h>

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <vector>

#include "wte/data.h"
#include "wte/error.h"
#include "src/io/hdf5_util.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

using hdf5::dataset_shape;
using hdf5::ensure_parent_groups;
using hdf5::shape_str;
using hdf5::write_int_attr;
using hdf5::write_string;
using hdf5::write_string_attr;
using hdf5::write_tensor;

std::string read_string(const H5::Group& where, const std::string& name, const std::string& path) {
  if (!where.nameExists(name)) throw Error("checkpoint '" + path + "' has no dataset '" + name + "'");
  H5::DataSet ds = where.openDataSet(name);
  if (ds.getTypeClass() != H5T_STRING)
    throw Error("checkpoint '" + path + "': dataset '" + name + "' is not a string");
  std::string value;
  ds.read(value, ds.getStrType());
  return value;
}

// Opens attribute `name` of `where`, which must exist (else `missing`) and be of class `cls`
// (else "attribute NAME is not KIND"): the shared prologue of the read_*_attr functions.
H5::Attribute open_attr(const H5::H5Object& where, const std::string& name, const std::string& path,
                        H5T_class_t cls, const char* kind, const std::string& missing) {
  if (!where.attrExists(name)) throw Error(missing);
  H5::Attribute attr = where.openAttribute(name);
  if (attr.getTypeClass() != cls)
    throw Error("checkpoint '" + path + "': attribute '" + name + "' is not " + kind);
  return attr;
}

std::string missing_attr(const std::string& path, const std::string& name) {
  return "checkpoint '" + path + "' has no attribute '" + name + "'";
}

std::string read_string_attr(const H5::H5Object& where, const std::string& name,
                             const std::string& path) {
  H5::Attribute attr =
      open_attr(where, name, path, H5T_STRING, "a string",
                "'" + path + "' is not a wte checkpoint: it has no attribute '" + name + "'");
  std::string value;
  attr.read(attr.getStrType(), value);
  return value;
}

int64_t read_int_attr(const H5::H5Object& where, const std::string& name, const std::string& path) {
  H5::Attribute attr =
      open_attr(where, name, path, H5T_INTEGER, "an integer", missing_attr(path, name));
  int64_t value = 0;
  attr.read(H5::PredType::NATIVE_INT64, &value);
  return value;
}

// Reads a float32 tensor of exactly `shape` into dst (size = product of shape).
void read_tensor(const H5::Group& where, const std::string& name, const std::vector<size_t>& shape,
                 float* dst, const std::string& path) {
  if (!where.nameExists(name))
    throw Error("checkpoint '" + path + "' has no dataset '" + name + "'");
  H5::DataSet ds = where.openDataSet(name);
  if (ds.getTypeClass() != H5T_FLOAT || ds.getFloatType().getSize() != 4)
    throw Error("checkpoint '" + path + "': dataset '" + name + "' is not float32");
  const std::vector<size_t> got = dataset_shape(ds);
  if (got != shape)
    throw Error("checkpoint '" + path + "': dataset '" + name + "' has shape " + shape_str(got) +
                ", expected " + shape_str(shape));
  ds.read(dst, H5::PredType::NATIVE_FLOAT);
  // A parameter or moment that is NaN or infinite is corruption (or a diverged run saved by some
  // other tool): training, gradients and geometry computed from it would be meaningless.
  size_t n = 1;
  for (size_t d : shape) n *= d;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(dst[i])) {
      std::string index;
      size_t rest = i;
      for (size_t k = shape.size(); k-- > 0;) {
        index = std::to_string(rest % shape[k]) + (index.empty() ? "" : ", ") + index;
        rest /= shape[k];
      }
      throw Error("checkpoint '" + path + "': dataset '" + name + "' holds " +
                  std::to_string(dst[i]) + " at [" + index +
                  "]; every parameter and moment must be finite (a corrupt file?)");
    }
  }
}

void open_or_throw(H5::H5File& file, const std::string& path) {
  hdf5::quiet();
  if (!fs::exists(path)) throw Error("checkpoint '" + path + "' does not exist");
  if (fs::is_directory(path))
    throw Error("'" + path + "' is a directory, not a checkpoint file");
  try {
    if (!H5::H5File::isHdf5(path))
      throw Error("'" + path + "' is not an HDF5 file (so not a wte checkpoint)");
    file.openFile(path, H5F_ACC_RDONLY);
  } catch (const H5::Exception& e) {
    throw Error("cannot open checkpoint '" + path + "' (truncated or corrupt HDF5?): " +
                e.getDetailMsg());
  }
}

void write_uint_attr(H5::H5Object& where, const std::string& name, uint64_t value) {
  H5::Attribute attr =
      where.createAttribute(name, H5::PredType::STD_U64LE, H5::DataSpace(H5S_SCALAR));
  attr.write(H5::PredType::NATIVE_UINT64, &value);
}

void write_float_attr(H5::H5Object& where, const std::string& name, float value) {
  H5::Attribute attr =
      where.createAttribute(name, H5::PredType::IEEE_F32LE, H5::DataSpace(H5S_SCALAR));
  attr.write(H5::PredType::NATIVE_FLOAT, &value);
}

uint64_t read_uint_attr(const H5::H5Object& where, const std::string& name,
                        const std::string& path) {
  H5::Attribute attr =
      open_attr(where, name, path, H5T_INTEGER, "uint64", missing_attr(path, name));
  if (attr.getIntType().getSign() != H5T_SGN_NONE || attr.getIntType().getSize() != 8)
    throw Error("checkpoint '" + path + "': attribute '" + name + "' is not uint64");
  uint64_t value = 0;
  attr.read(H5::PredType::NATIVE_UINT64, &value);
  return value;
}

float read_float_attr(const H5::H5Object& where, const std::string& name, const std::string& path) {
  H5::Attribute attr = open_attr(where, name, path, H5T_FLOAT, "a float", missing_attr(path, name));
  float value = 0;
  attr.read(H5::PredType::NATIVE_FLOAT, &value);
  return value;
}

// A 1-D integer dataset of `file_type` (unsigned, `bytes` wide) holding `n` values.
template <typename T>
void write_ints(H5::Group& where, const std::string& name, const std::vector<T>& values,
                const H5::PredType& file_type, const H5::PredType& mem_type) {
  const hsize_t dims[1] = {values.size()};
  H5::DataSpace space(1, dims);
  H5::DataSet ds = where.createDataSet(name, file_type, space);
  if (!values.empty()) ds.write(values.data(), mem_type);
}

// Reads a 1-D unsigned integer dataset of exactly `n` values of sizeof(T) bytes.
template <typename T>
std::vector<T> read_uints(const H5::Group& where, const std::string& name, size_t n,
                          const H5::PredType& mem_type, const std::string& path) {
  if (!where.nameExists(name))
    throw Error("checkpoint '" + path + "' has no dataset '" + name + "'");
  H5::DataSet ds = where.openDataSet(name);
  if (ds.getTypeClass() != H5T_INTEGER || ds.getIntType().getSign() != H5T_SGN_NONE ||
      ds.getIntType().getSize() != sizeof(T))
    throw Error("checkpoint '" + path + "': dataset '" + name + "' is not uint" +
                std::to_string(8 * sizeof(T)));
  const std::vector<size_t> got = dataset_shape(ds);
  if (got != std::vector<size_t>{n})
    throw Error("checkpoint '" + path + "': dataset '" + name + "' has shape " + shape_str(got) +
                ", expected " + shape_str({n}));
  std::vector<T> values(n);
  if (n > 0) ds.read(values.data(), mem_type);
  return values;
}

// Stops the process (SIGSTOP) in the middle of writing `tmp` when the test hook asks for `step`.
void maybe_pause_for_test(H5::H5File& file, const std::string& tmp, int64_t step) {
  const char* want = std::getenv("WTE_TEST_PAUSE_IN_CHECKPOINT_WRITE");
  if (want == nullptr || std::to_string(step) != want) return;
  file.flush(H5F_SCOPE_GLOBAL);  // so the partial file is really on disk when the test kills us
  std::fprintf(stderr, "wte: test pause: '%s' partly written (step %lld); SIGSTOP\n", tmp.c_str(),
               static_cast<long long>(step));
  std::fflush(stderr);
  ::raise(SIGSTOP);
}

// "key = value" pairs of the INI text Config::to_ini writes, as "section.key" -> value.
std::map<std::string, std::string> ini_values(const std::string& ini) {
  std::map<std::string, std::string> values;
  std::istringstream in(ini);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    values[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
  }
  return values;
}

}  // namespace

void save_checkpoint(const std::string& path, const Model& model, const AdamW* optimizer,
                     const Tokenizer& tokenizer, const Config& config, int64_t step,
                     const ResumeState* resume) {
  const std::string config_ini = config.to_ini();
  const auto fill = [&](H5::H5File& file, const std::string& tmp) {
    H5::Group root = file.openGroup("/");
    write_string_attr(root, "format", kCheckpointFormat);
    write_int_attr(root, "format_version", kCheckpointVersion);
    write_int_attr(root, "step", step);
    write_uint_attr(root, "config_fnv1a64", fnv1a64(config_ini.data(), config_ini.size()));
    for (const TensorSpec& t : model.tensors()) {
      ensure_parent_groups(root, t.name);
      write_tensor(root, t.name, t.shape, model.param_data() + t.offset);
    }
    maybe_pause_for_test(file, tmp, step);
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
    if (resume != nullptr) {
      H5::Group sched = root.createGroup("schedule");
      write_int_attr(sched, "step", step);
      write_int_attr(sched, "total_steps", static_cast<int64_t>(resume->total_steps));
      write_float_attr(sched, "lr", resume->lr);
      H5::Group data = root.createGroup("data");
      const LoaderState& ls = resume->data;
      write_int_attr(data, "epoch", static_cast<int64_t>(ls.epoch));
      write_int_attr(data, "cursor", static_cast<int64_t>(ls.cursor));
      write_int_attr(data, "num_samples", static_cast<int64_t>(ls.num_samples));
      write_int_attr(data, "shuffle", ls.shuffle ? 1 : 0);
      write_int_attr(data, "train_tokens", static_cast<int64_t>(resume->train_tokens));
      write_int_attr(data, "val_tokens", static_cast<int64_t>(resume->val_tokens));
      write_uint_attr(data, "train_tokens_fnv1a64", resume->train_tokens_fnv1a64);
      write_uint_attr(data, "val_tokens_fnv1a64", resume->val_tokens_fnv1a64);
      write_ints(data, "order", ls.order, H5::PredType::STD_U32LE, H5::PredType::NATIVE_UINT32);
      const std::vector<uint64_t> rng(ls.rng_state.begin(), ls.rng_state.end());
      write_ints(data, "rng_state", rng, H5::PredType::STD_U64LE, H5::PredType::NATIVE_UINT64);
    }
    H5::Group tok = root.createGroup("tokenizer");
    write_string(tok, "encoder_json", tokenizer.encoder_json());
    write_string(tok, "vocab_bpe", tokenizer.vocab_bpe());
    H5::Group cfg = root.createGroup("config");
    write_string(cfg, "ini", config_ini);
  };
  hdf5::write_file_atomic(path, "checkpoint '" + path + "'", fill);
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
                  std::to_string(kCheckpointVersion) +
                  (info.format_version == 1 ? " (version 1 has no data order or schedule state, "
                                              "so it cannot be resumed exactly)"
                                            : ""));
    info.step = read_int_attr(root, "step", path);
    if (info.step < 0)
      throw Error("checkpoint '" + path + "': step is " + std::to_string(info.step) +
                  ", expected >= 0");
    info.config_ini = read_string(root, "config/ini", path);
    info.config_fnv1a64 = read_uint_attr(root, "config_fnv1a64", path);
    const uint64_t config_hash = fnv1a64(info.config_ini.data(), info.config_ini.size());
    if (config_hash != info.config_fnv1a64) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "config_fnv1a64 is %016llx but /config/ini hashes to %016llx",
                    static_cast<unsigned long long>(info.config_fnv1a64),
                    static_cast<unsigned long long>(config_hash));
      throw Error("checkpoint '" + path + "' is corrupt: " + buf);
    }
    info.encoder_json = read_string(root, "tokenizer/encoder_json", path);
    info.vocab_bpe = read_string(root, "tokenizer/vocab_bpe", path);
    const Config cfg = parse_config(info.config_ini, "the config stored in '" + path + "'");
    const Tokenizer tok = Tokenizer::from_strings(info.encoder_json, info.vocab_bpe,
                                                  "the tokenizer stored in '" + path + "'");
    if (tok.size() != cfg.model.vocab_size)
      throw Error("checkpoint '" + path + "': its tokenizer has " + std::to_string(tok.size()) +
                  " tokens but its config has model.vocab_size = " +
                  std::to_string(cfg.model.vocab_size));
    // Every tensor's shape and dtype against the stored config; reading the data also catches a
    // file whose datasets are cut off.
    Model probe_shapes_only(cfg.model);  // cheap next to the read; gives the canonical layout
    info.tensors = probe_shapes_only.tensors();
    std::vector<float> scratch;
    for (const TensorSpec& t : info.tensors) {
      scratch.resize(t.size);
      read_tensor(root, t.name, t.shape, scratch.data(), path);
    }
    info.has_optimizer = root.nameExists("optimizer");
    if (info.has_optimizer) {
      H5::Group opt = root.openGroup("optimizer");
      info.optimizer_step = read_int_attr(opt, "step", path);
      for (const TensorSpec& t : info.tensors) {
        scratch.resize(t.size);
        read_tensor(opt, "m/" + t.name, t.shape, scratch.data(), path);
        read_tensor(opt, "v/" + t.name, t.shape, scratch.data(), path);
      }
    }
    const bool has_schedule = root.nameExists("schedule"), has_data = root.nameExists("data");
    if (has_schedule != has_data)
      throw Error("checkpoint '" + path + "' has /" + (has_schedule ? "schedule" : "data") +
                  " but no /" + (has_schedule ? "data" : "schedule") + "; both or neither");
    info.has_resume = has_schedule;
    if (info.has_resume) {
      ResumeState& rs = info.resume;
      H5::Group sched = root.openGroup("schedule");
      const int64_t sched_step = read_int_attr(sched, "step", path);
      if (sched_step != info.step)
        throw Error("checkpoint '" + path + "': /schedule step " + std::to_string(sched_step) +
                    " differs from the root step " + std::to_string(info.step));
      if (info.has_optimizer && info.optimizer_step != info.step)
        throw Error("checkpoint '" + path + "': /optimizer step " +
                    std::to_string(info.optimizer_step) + " differs from the root step " +
                    std::to_string(info.step));
      const int64_t total = read_int_attr(sched, "total_steps", path);
      rs.total_steps = static_cast<uint64_t>(std::max<int64_t>(total, 0));
      rs.lr = read_float_attr(sched, "lr", path);
      H5::Group data = root.openGroup("data");
      auto nonneg = [&](const char* name) {
        const int64_t v = read_int_attr(data, name, path);
        if (v < 0)
          throw Error("checkpoint '" + path + "': /data attribute '" + name + "' is " +
                      std::to_string(v) + ", expected >= 0");
        return static_cast<uint64_t>(v);
      };
      LoaderState& ls = rs.data;
      ls.epoch = nonneg("epoch");
      ls.cursor = nonneg("cursor");
      ls.num_samples = nonneg("num_samples");
      ls.shuffle = nonneg("shuffle") != 0;
      rs.train_tokens = nonneg("train_tokens");
      rs.val_tokens = nonneg("val_tokens");
      rs.train_tokens_fnv1a64 = read_uint_attr(data, "train_tokens_fnv1a64", path);
      rs.val_tokens_fnv1a64 = read_uint_attr(data, "val_tokens_fnv1a64", path);
      ls.order = read_uints<uint32_t>(data, "order", ls.num_samples, H5::PredType::NATIVE_UINT32,
                                      path);
      const std::vector<uint64_t> rng =
          read_uints<uint64_t>(data, "rng_state", 4, H5::PredType::NATIVE_UINT64, path);
      std::copy(rng.begin(), rng.end(), ls.rng_state.begin());
      check_loader_state(ls, "checkpoint '" + path + "'");
    }
    return info;
  } catch (const H5::Exception& e) {
    throw Error("checkpoint '" + path + "' is unreadable (truncated or corrupt?): " +
                e.getDetailMsg());
  }
}

CheckpointInfo load_checkpoint(const std::string& path, Model& model, AdamW* optimizer) {
  CheckpointInfo info = read_checkpoint_info(path);
  H5::H5File file;
  open_or_throw(file, path);
  try {
    H5::Group root = file.openGroup("/");
    const size_t n = model.num_parameters();
    std::vector<float> params(n), m, v;
    for (const TensorSpec& t : model.tensors())
      read_tensor(root, t.name, t.shape, params.data() + t.offset, path);
    const bool with_opt = optimizer != nullptr && info.has_optimizer;
    if (with_opt) {
      m.resize(n);
      v.resize(n);
      H5::Group opt = root.openGroup("optimizer");
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
      optimizer->set_step(info.optimizer_step);
    }
    return info;
  } catch (const H5::Exception& e) {
    throw Error("checkpoint '" + path + "' is unreadable (truncated or corrupt?): " +
                e.getDetailMsg());
  }
}

std::string checkpoint_path(const std::string& dir, uint64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint_%08llu.h5", static_cast<unsigned long long>(step));
  return (fs::path(dir) / name).string();
}

std::vector<std::pair<uint64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<uint64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string prefix = "checkpoint_", suffix = ".h5";
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 19 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    found.emplace_back(std::stoull(digits), e.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

const std::vector<std::string>& resume_mutable_keys() {
  static const std::vector<std::string> keys = {
      "train.steps",         "train.log_interval",  "train.eval_interval", "train.eval_tokens",
      "train.threads",       "train.snapshot_steps", "checkpoint.interval", "checkpoint.keep_last",
      "data.text",           "data.train_tokens",   "data.val_tokens",     "data.tokenizer"};
  return keys;
}

std::vector<std::string> resume_config_mismatches(const Config& stored, const Config& now) {
  const std::map<std::string, std::string> a = ini_values(stored.to_ini());
  const std::map<std::string, std::string> b = ini_values(now.to_ini());
  const std::vector<std::string>& free = resume_mutable_keys();
  std::vector<std::string> out;
  for (const auto& [key, value] : a) {
    if (std::find(free.begin(), free.end(), key) != free.end()) continue;
    const auto it = b.find(key);
    const std::string now_value = it == b.end() ? "(no such key)" : it->second;
    if (now_value != value) out.push_back(key + ": checkpoint " + value + ", now " + now_value);
  }
  for (const auto& [key, value] : b)
    if (!a.count(key) && std::find(free.begin(), free.end(), key) == free.end())
      out.push_back(key + ": checkpoint (no such key), now " + value);
  // data.tokenizer: "train" and a directory are different tokenizers; two directories are compared
  // by content in the trainer.
  if ((stored.data.tokenizer == "train") != (now.data.tokenizer == "train"))
    out.push_back("data.tokenizer: checkpoint " + stored.data.tokenizer + ", now " +
                  now.data.tokenizer);
  return out;
}

}  // namespace wte
