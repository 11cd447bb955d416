#include "wte/checkpoint.h"

#include <H5Cpp.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "wte/data.h"
#include "wte/error.h"
#include "src/hooks/test_hooks.h"
#include "src/io/config_values.h"
#include "src/io/checkpoint_checks.h"
#include "src/io/hdf5_util.h"
#include "src/model/parameters.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

using hdf5::dataset_shape;
using hdf5::ensure_parent_groups;
using hdf5::shape_str;
using hdf5::write_int_attr;
using hdf5::write_checked_ints;
using hdf5::write_checked_tensor;
using hdf5::write_fixed_string;
using hdf5::write_fixed_string_attr;

// Reads a float32 tensor of exactly `shape` into dst (size = product of shape): kind, dtype, shape
// and storage checked first (hdf5::read_f32), then every value must be finite and, for a second
// moment (`nonnegative`), >= 0.
}  // namespace

void read_tensor(hid_t where, const std::string& name, const std::vector<size_t>& shape,
                 float* dst, const std::string& path, bool nonnegative) {
  hdf5::read_f32(where, name, shape, dst, "checkpoint '" + path + "'");
  // A parameter or moment that is NaN or infinite is corruption (or a diverged run saved by some
  // other tool): training, gradients and geometry computed from it would be meaningless. AdamW's
  // second moment is an average of squares: a negative one would make sqrt(v) NaN on resume.
  size_t n = 1;
  for (size_t d : shape) n *= d;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(dst[i]) || (nonnegative && dst[i] < 0)) {
      std::string index;
      size_t rest = i;
      for (size_t k = shape.size(); k-- > 0;) {
        index = std::to_string(rest % shape[k]) + (index.empty() ? "" : ", ") + index;
        rest /= shape[k];
      }
      throw Error("checkpoint '" + path + "': dataset '" + name + "' holds " +
                  std::to_string(dst[i]) + " at [" + index + "]; " +
                  (std::isfinite(dst[i])
                       ? "AdamW's second moment v is a mean of squared gradients and must be >= 0 "
                         "(a corrupt file?)"
                       : "every parameter and moment must be finite (a corrupt file?)"));
    }
  }
}

namespace {

std::string ckpt_what(const std::string& path) { return "checkpoint '" + path + "'"; }

std::string read_string(hid_t where, const std::string& name, const std::string& path) {
  return hdf5::read_string(where, name, ckpt_what(path));
}

int64_t read_int_attr(hid_t where, const std::string& group, const std::string& name,
                      const std::string& path) {
  return hdf5::read_int_attr(where, name, ckpt_what(path),
                             (group.empty() ? "" : group + " ") + "attribute '" + name + "'");
}

uint64_t read_uint_attr(hid_t where, const std::string& group, const std::string& name,
                        const std::string& path) {
  return hdf5::read_u64_attr(where, name, ckpt_what(path),
                             (group.empty() ? "" : group + " ") + "attribute '" + name + "'");
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

}  // namespace

void save_checkpoint(const std::string& path, const Model& model, const AdamW* optimizer,
                     const Tokenizer& tokenizer, const Config& config, int64_t step,
                     const ResumeState* resume) {
  const std::string config_ini = config.to_ini();
  const auto fill = [&](H5::H5File& file, const std::string& tmp) {
    H5::Group root = file.openGroup("/");
    write_fixed_string_attr(root, "format", kCheckpointFormat);
    write_int_attr(root, "format_version", kCheckpointVersion);
    write_int_attr(root, "step", step);
    write_uint_attr(root, "config_fnv1a64", fnv1a64(config_ini.data(), config_ini.size()));
    for (const TensorSpec& t : model.tensors()) {
      ensure_parent_groups(root, t.name);
      write_checked_tensor(root, t.name, t.shape, model.param_data() + t.offset);
    }
    test_hooks::pause_in_checkpoint_write(tmp, step,
                                          [&file] { file.flush(H5F_SCOPE_GLOBAL); });
    if (optimizer != nullptr) {
      H5::Group opt = root.createGroup("optimizer");
      write_int_attr(opt, "step", optimizer->step());
      for (const char* moment : {"m", "v"}) {
        H5::Group g = opt.createGroup(moment);
        const float* base = moment[0] == 'm' ? optimizer->m() : optimizer->v();
        for (const TensorSpec& t : model.tensors()) {
          ensure_parent_groups(g, t.name);
          write_checked_tensor(g, t.name, t.shape, base + t.offset);
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
      write_checked_ints(data, "order", ls.order);
      const std::vector<uint64_t> rng(ls.rng_state.begin(), ls.rng_state.end());
      write_checked_ints(data, "rng_state", rng);
    }
    // The strings are stored contiguously (a scalar cannot be chunked, so no Fletcher-32): their
    // FNV-1a 64 hashes, in checksummed metadata, cover them as config_fnv1a64 covers the config.
    H5::Group tok = root.createGroup("tokenizer");
    write_fixed_string(tok, "encoder_json", tokenizer.encoder_json());
    write_fixed_string(tok, "vocab_bpe", tokenizer.vocab_bpe());
    write_uint_attr(tok, "encoder_json_fnv1a64",
                    fnv1a64(tokenizer.encoder_json().data(), tokenizer.encoder_json().size()));
    write_uint_attr(tok, "vocab_bpe_fnv1a64",
                    fnv1a64(tokenizer.vocab_bpe().data(), tokenizer.vocab_bpe().size()));
    H5::Group cfg = root.createGroup("config");
    write_fixed_string(cfg, "ini", config_ini);
  };
  // Reserved on disk before HDF5 writes: parameters (and m, v), the data order, the strings,
  // and HDF5's metadata (measured: about 1 KiB per dataset; 2 KiB + 16 KiB reserved).
  const uint64_t copies = optimizer != nullptr ? 3 : 1;
  const uint64_t expected =
      4 * model.num_parameters() * copies + (resume != nullptr ? 4 * resume->data.order.size() : 0) +
      tokenizer.encoder_json().size() + tokenizer.vocab_bpe().size() + config_ini.size() +
      (16 + 2 * (model.tensors().size() * copies + 8)) * uint64_t{1024};
  hdf5::write_file_atomic(path, "checkpoint '" + path + "'", fill, expected, /*checksummed=*/true);
}

namespace {

// The datasets a checkpoint of `tensors` may hold: the parameters, the optimizer's moments,
// the data order, the tokenizer and the config.
std::vector<std::string> expected_datasets(const std::vector<TensorSpec>& tensors, bool optimizer,
                                           bool resume) {
  std::vector<std::string> names = {"tokenizer/encoder_json", "tokenizer/vocab_bpe", "config/ini"};
  for (const TensorSpec& t : tensors) {
    names.push_back(t.name);
    if (optimizer) {
      names.push_back("optimizer/m/" + t.name);
      names.push_back("optimizer/v/" + t.name);
    }
  }
  if (resume) {
    names.push_back("data/order");
    names.push_back("data/rng_state");
  }
  return names;
}

// A dataset the stored config does not explain is an error: it is either another model's tensor
// (a tied model carrying an lm_head that is not its wte would silently lose the head) or damage.
// One exception: a tied model's lm_head that equals wte bit for bit (exporters write both).
}  // namespace

void check_datasets_explained(hid_t root, const std::vector<TensorSpec>& tensors, bool tied,
                              const std::string& path) {
  const std::vector<std::string> want = expected_datasets(tensors, true, true);
  for (const std::string& name : hdf5::list_datasets(root, ckpt_what(path))) {
    if (std::find(want.begin(), want.end(), name) != want.end()) continue;
    const TensorSpec* wte = nullptr;
    for (const TensorSpec& t : tensors)
      if (t.name == "wte") wte = &t;
    if (name == "lm_head" && tied && wte != nullptr) {
      std::vector<float> head(wte->size), table(wte->size);
      hdf5::Id ds = hdf5::open_dataset(root, "lm_head", ckpt_what(path));
      hdf5::Id space(H5Dget_space(ds.get()));
      const std::vector<size_t> shape = hdf5::space_shape(space.get(), ckpt_what(path), "dataset 'lm_head'");
      if (shape != wte->shape)
        throw Error("checkpoint '" + path + "' has model.tie_embeddings = true (the lm_head is wte) "
                    "but also holds a dataset 'lm_head' of shape " + hdf5::shape_str(shape) +
                    ", while 'wte' has shape " + hdf5::shape_str(wte->shape) +
                    "; they contradict each other (set model.tie_embeddings = false in the stored "
                    "config for an untied model, or delete /lm_head)");
      read_tensor(root, "wte", wte->shape, table.data(), path);
      read_tensor(root, "lm_head", wte->shape, head.data(), path);
      size_t differ = 0, first = 0;
      float worst = 0;
      for (size_t i = 0; i < head.size(); ++i) {
        if (head[i] == table[i]) continue;
        if (differ++ == 0) first = i;
        worst = std::max(worst, std::fabs(head[i] - table[i]));
      }
      if (differ == 0) continue;
      const size_t C = wte->shape.size() == 2 ? wte->shape[1] : 1;
      throw Error("checkpoint '" + path + "' has model.tie_embeddings = true (the lm_head is wte) "
                  "but also holds a dataset 'lm_head' that differs from 'wte' in " +
                  std::to_string(differ) + " of " + std::to_string(head.size()) +
                  " values (first at [" + std::to_string(first / C) + ", " +
                  std::to_string(first % C) + "], max |lm_head - wte| = " + std::to_string(worst) +
                  "); loading it tied would silently drop that head (set model.tie_embeddings = "
                  "false in the stored config for an untied model, or delete /lm_head)");
    }
    throw Error("checkpoint '" + path + "' holds a dataset '" + name +
                "' that its config does not explain (a tensor of another model, or damage); a wte "
                "checkpoint holds exactly the datasets listed in docs/checkpoint.md");
  }
}

namespace {

// read_checkpoint_info's validation, reading every parameter (and, if present, optimizer moment)
// once: into `params` (and `m`, `v`) when not null, each resized to the arena's floats and every
// tensor at its TensorSpec offset; else into a scratch buffer, only to check it.
CheckpointInfo read_checkpoint(const std::string& path, std::vector<float>* params,
                               std::vector<float>* m, std::vector<float>* v);

// Set in the child process of run_isolated: it reads in-process, never forks again.
bool in_isolated_child = false;

// Files read in a child process, by (device, inode, size, mtime s, mtime ns): those that passed,
// and the error of those that did not, by how the reader names the file (`what`): a damaged file
// that hangs HDF5 costs its time limit once, not once per reader.
using FileKey = std::tuple<uint64_t, uint64_t, int64_t, int64_t, int64_t>;
std::set<FileKey>& passed_files() {
  static std::set<FileKey> files;
  return files;
}
std::map<std::pair<FileKey, std::string>, std::string>& failed_files() {
  static std::map<std::pair<FileKey, std::string>, std::string> files;
  return files;
}

// The key of a regular file, or false (missing, a directory, a FIFO...: the readers name those).
bool file_key(const std::string& path, FileKey* key, uint64_t* bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  *key = {st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
  *bytes = static_cast<uint64_t>(st.st_size);
  return true;
}

// Test hook (no effect unless the environment asks): WTE_TEST_STALL_VALIDATION=1 makes the
// validation child wait for ever before it reads, as a file on a hung disk would, so tests can
// signal or kill wte train while it waits (tests/train/test_validation_child.sh).
void stall_for_test() {
  if (std::getenv("WTE_TEST_STALL_VALIDATION") == nullptr) return;
  for (;;) ::pause();
}

// Runs `read` in a child unless it passed before (or this is the child); remembers a pass.
void read_in_child(const std::string& path, const std::string& what,
                   const std::function<void()>& read) {
  FileKey key;
  uint64_t bytes = 0;
  if (in_isolated_child || !file_key(path, &key, &bytes) || passed_files().count(key)) return;
  const auto failed = failed_files().find({key, what});
  if (failed != failed_files().end()) throw Error(failed->second);
  const double mib = static_cast<double>(bytes) / (1 << 20);
  try {
    hdf5::run_isolated(
        [&] {
          in_isolated_child = true;
          stall_for_test();
          read();
        },
        what, 3.0 + mib / 16.0, 120.0 + mib / 4.0);
  } catch (const hdf5::FileLockedError&) {
    throw;  // not the file's fault: asked again next time
  } catch (const Cancelled&) {
    throw;  // stopped on request: not the file's fault either
  } catch (const Error& e) {
    failed_files()[{key, what}] = e.what();
    throw;
  }
  passed_files().insert(key);
}

}  // namespace

void validate_checkpoint_isolated(const std::string& path) {
  read_in_child(path, ckpt_what(path), [&] { read_checkpoint(path, nullptr, nullptr, nullptr); });
}

void isolate_unless_checksummed(const std::string& path, const std::string& what,
                                const std::function<void()>& read) {
  if (in_isolated_child || hdf5::checksummed_format(path)) return;
  read_in_child(path, what, read);
}

namespace {

// Reading a checkpoint, part by part, in the order its checks run: each part's checks bound what
// the next one reads (the config bounds the shapes, the shapes every allocation).

// The root's attributes and the stored config: 'format', format_version, step, /config/ini (against
// its hash), parsed, and the step within its own train.steps. Returns the parsed config.
Config read_header(hid_t root, const std::string& path, const std::string& what,
                   CheckpointInfo* info) {
  if (!hdf5::has_attr(root, "format"))
    throw Error("'" + path + "' is not a wte checkpoint: it has no attribute 'format'");
  const std::string format = hdf5::read_string_attr(root, "format", what, "attribute 'format'");
  if (format != kCheckpointFormat)
    throw Error("'" + path + "' is not a wte checkpoint: format is '" + format + "', expected '" +
                kCheckpointFormat + "'");
  info->format_version = read_int_attr(root, "", "format_version", path);
  if (info->format_version < kOldestCheckpointVersion || info->format_version > kCheckpointVersion)
    throw Error("checkpoint '" + path + "' has format_version " +
                std::to_string(info->format_version) + "; this build reads versions " +
                std::to_string(kOldestCheckpointVersion) + " to " + std::to_string(kCheckpointVersion) +
                (info->format_version == 1 ? " (version 1 has no data order or schedule state, "
                                             "so it cannot be resumed exactly)"
                                           : ""));
  info->step = read_int_attr(root, "", "step", path);
  if (info->step < 0)
    throw Error("checkpoint '" + path + "': step is " + std::to_string(info->step) +
                ", expected >= 0");
  info->config_ini = read_string(root, "config/ini", path);
  info->config_fnv1a64 = read_uint_attr(root, "", "config_fnv1a64", path);
  const uint64_t config_hash = fnv1a64(info->config_ini.data(), info->config_ini.size());
  if (config_hash != info->config_fnv1a64) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "config_fnv1a64 is %016llx but /config/ini hashes to %016llx",
                  static_cast<unsigned long long>(info->config_fnv1a64),
                  static_cast<unsigned long long>(config_hash));
    throw Error("checkpoint '" + path + "' is corrupt: " + buf);
  }
  Config cfg = parse_config(info->config_ini, "the config stored in '" + path + "'");
  if (static_cast<uint64_t>(info->step) > cfg.train.steps)
    throw Error("checkpoint '" + path + "': step " + std::to_string(info->step) +
                " is beyond its own train.steps = " + std::to_string(cfg.train.steps));
  return cfg;
}

// wte's and wpe's shapes against the stored config, and (checked against the storage the file
// really has) small enough for the file: they bound every allocation after this, so a forged
// config cannot make the loader allocate gigabytes.
void check_embedding_shapes(hid_t file, hid_t root, const ModelConfig& model,
                            const std::string& path, const std::string& what) {
  for (const auto& [name, shape] :
       {std::pair<std::string, std::vector<size_t>>{"wte", {model.vocab_size, model.d_model}},
        {"wpe", {model.n_ctx, model.d_model}}}) {
    hdf5::Id ds = hdf5::open_dataset(root, name, what);
    hdf5::Id space(H5Dget_space(ds.get()));
    const std::vector<size_t> got = hdf5::space_shape(space.get(), what, "dataset '" + name + "'");
    if (got != shape)
      throw Error("checkpoint '" + path + "': dataset '" + name + "' has shape " +
                  hdf5::shape_str(got) + ", expected " + hdf5::shape_str(shape));
    hsize_t file_size = 0;
    H5Fget_filesize(file, &file_size);
    if (static_cast<double>(shape[0]) * static_cast<double>(shape[1]) * 4.0 > static_cast<double>(file_size) * 1024.0)
      throw Error("checkpoint '" + path + "': dataset '" + name + "' claims " + hdf5::shape_str(shape) +
                  " float32 values in a file of " + std::to_string(file_size) + " bytes (corrupt?)");
  }
}

// Every parameter tensor of the stored config together (the blocks' too, not only wte and wpe),
// against the file's size, as check_embedding_shapes bounds the embeddings: a forged d_model or
// n_layer in a small file is refused before any buffer is sized by it (the loader allocates the
// parameters, and AdamW's m and v when it reads them, before it reads a tensor).
void check_parameter_sizes(hid_t file, const ModelConfig& model, const std::string& path) {
  const std::vector<TensorSpec> tensors = parameter_tensors(model);
  double floats = 0;
  for (const TensorSpec& t : tensors) floats += static_cast<double>(t.size);
  hsize_t file_size = 0;
  H5Fget_filesize(file, &file_size);
  if (floats * 4.0 > static_cast<double>(file_size) * 1024.0)
    throw Error("checkpoint '" + path + "': its config (d_model " +
                std::to_string(model.d_model) + ", n_layer " + std::to_string(model.n_layer) +
                ", vocab_size " + std::to_string(model.vocab_size) + ", n_ctx " +
                std::to_string(model.n_ctx) + ") claims " +
                std::to_string(static_cast<uint64_t>(floats)) + " float32 parameters in " +
                std::to_string(tensors.size()) + " tensors, in a file of " +
                std::to_string(file_size) + " bytes (corrupt?)");
}

// The stored tokenizer's encoder.json and vocab.bpe, against their hashes, and its size against
// the stored config's vocab_size.
void read_tokenizer_strings(hid_t root, const ModelConfig& model, const std::string& path,
                            const std::string& what, CheckpointInfo* info) {
  info->encoder_json = read_string(root, "tokenizer/encoder_json", path);
  info->vocab_bpe = read_string(root, "tokenizer/vocab_bpe", path);
  {
    // Version 3 stores the strings' hashes (their bytes have no checksum of HDF5's); version 2
    // has none.
    hdf5::Id tok = hdf5::open_group(root, "tokenizer", what);
    for (const auto& [name, text] : {std::pair<std::string, const std::string*>{"encoder_json", &info->encoder_json},
                                     {"vocab_bpe", &info->vocab_bpe}}) {
      const std::string attr = name + "_fnv1a64";
      if (info->format_version < 3 && !hdf5::has_attr(tok.get(), attr)) continue;
      const uint64_t stored = read_uint_attr(tok.get(), "/tokenizer", attr, path);
      const uint64_t hash = fnv1a64(text->data(), text->size());
      if (stored != hash) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "/tokenizer attribute '%s' is %016llx but /tokenizer/%s hashes to %016llx",
                      attr.c_str(), static_cast<unsigned long long>(stored), name.c_str(),
                      static_cast<unsigned long long>(hash));
        throw Error("checkpoint '" + path + "' is corrupt: " + buf);
      }
    }
  }
  const Tokenizer tok = Tokenizer::from_strings(info->encoder_json, info->vocab_bpe,
                                                "the tokenizer stored in '" + path + "'");
  if (tok.size() != model.vocab_size)
    throw Error("checkpoint '" + path + "': its tokenizer has " + std::to_string(tok.size()) +
                " tokens but its config has model.vocab_size = " +
                std::to_string(model.vocab_size));
}

// Every tensor's shape and dtype against the stored config, and AdamW's m and v if the file has
// /optimizer; reading the data also catches a file whose datasets are cut off. Into params, m and
// v (each sized to the parameter arena) where not null, else into a scratch buffer.
void read_tensors(hid_t root, const ModelConfig& model, const std::string& path,
                  const std::string& what, CheckpointInfo* info, std::vector<float>* params,
                  std::vector<float>* m, std::vector<float>* v) {
  // The canonical layout from the config alone (no model is built: nothing is allocated before
  // check_parameter_sizes has bounded the sizes by the file).
  info->tensors = parameter_tensors(model);
  const size_t n_floats = info->tensors.back().offset + info->tensors.back().size;
  std::vector<float> scratch;
  // Where tensor t goes: its offset in `out` (sized to the arena), or the start of `scratch`.
  auto destination = [&](std::vector<float>* out, const TensorSpec& t) {
    if (out != nullptr) return out->data() + t.offset;
    scratch.resize(t.size);
    return scratch.data();
  };
  if (params != nullptr) params->assign(n_floats, 0.0f);
  for (const TensorSpec& t : info->tensors)
    read_tensor(root, t.name, t.shape, destination(params, t), path);
  info->has_optimizer = hdf5::exists(root, "optimizer", what);
  if (info->has_optimizer) {
    hdf5::Id opt = hdf5::open_group(root, "optimizer", what);
    info->optimizer_step = read_int_attr(opt.get(), "/optimizer", "step", path);
    if (m != nullptr) m->assign(n_floats, 0.0f);
    if (v != nullptr) v->assign(n_floats, 0.0f);
    for (const TensorSpec& t : info->tensors) {
      // By their full names, so errors name 'optimizer/v/wpe', not 'v/wpe'.
      read_tensor(root, "optimizer/m/" + t.name, t.shape, destination(m, t), path);
      read_tensor(root, "optimizer/v/" + t.name, t.shape, destination(v, t), path,
                  /*nonnegative=*/true);
    }
  }
}

// /schedule and /data, both or neither: what an exact resume needs besides the parameters and
// AdamW (the schedule's position, the data order and the data's lengths and hashes), each checked
// against the root step and the others' bounds.
void read_resume_state(hid_t root, const std::string& path, const std::string& what,
                       CheckpointInfo* info) {
  const bool has_schedule = hdf5::exists(root, "schedule", what),
             has_data = hdf5::exists(root, "data", what);
  if (has_schedule != has_data)
    throw Error("checkpoint '" + path + "' has /" + (has_schedule ? "schedule" : "data") +
                " but no /" + (has_schedule ? "data" : "schedule") + "; both or neither");
  info->has_resume = has_schedule;
  if (!info->has_resume) return;
  ResumeState& rs = info->resume;
  hdf5::Id sched = hdf5::open_group(root, "schedule", what);
  const int64_t sched_step = read_int_attr(sched.get(), "/schedule", "step", path);
  if (sched_step != info->step)
    throw Error("checkpoint '" + path + "': /schedule step " + std::to_string(sched_step) +
                " differs from the root step " + std::to_string(info->step));
  if (info->has_optimizer && info->optimizer_step != info->step)
    throw Error("checkpoint '" + path + "': /optimizer step " +
                std::to_string(info->optimizer_step) + " differs from the root step " +
                std::to_string(info->step));
  const int64_t total = read_int_attr(sched.get(), "/schedule", "total_steps", path);
  rs.total_steps = static_cast<uint64_t>(std::max<int64_t>(total, 0));
  rs.lr = hdf5::read_float_attr(sched.get(), "lr", what, "/schedule attribute 'lr'");
  hdf5::Id data = hdf5::open_group(root, "data", what);
  auto nonneg = [&](const char* name) {
    const int64_t v = read_int_attr(data.get(), "/data", name, path);
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
  // Each sample is seq_len tokens of the train stream, and the order is stored as uint32.
  const uint64_t max_samples = std::min<uint64_t>(rs.train_tokens, UINT32_MAX);
  if (ls.num_samples > max_samples)
    throw Error("checkpoint '" + path + "': /data attribute 'num_samples' is " +
                std::to_string(ls.num_samples) + ", more than its train_tokens (" +
                std::to_string(rs.train_tokens) + ") or 2^32 - 1 allow");
  rs.train_tokens_fnv1a64 = read_uint_attr(data.get(), "/data", "train_tokens_fnv1a64", path);
  rs.val_tokens_fnv1a64 = read_uint_attr(data.get(), "/data", "val_tokens_fnv1a64", path);
  ls.order.resize(loader_order_words(ls.num_samples));
  hdf5::read_u32(data.get(), "order", ls.order.size(), ls.order.data(), what);
  hdf5::read_u64(data.get(), "rng_state", 4, ls.rng_state.data(), what);
  check_loader_state(ls, "checkpoint '" + path + "'");
}

CheckpointInfo read_checkpoint(const std::string& path, std::vector<float>* params,
                               std::vector<float>* m, std::vector<float>* v) {
  const std::string what = ckpt_what(path);
  // HDF5's earliest file format (version 2 checkpoints, files of other tools) has metadata
  // without checksums, which a damaged byte can turn into a crash or an endless loop inside
  // HDF5: such a file is read once in a child process first.
  isolate_unless_checksummed(path, what, [&] { read_checkpoint(path, nullptr, nullptr, nullptr); });
  hdf5::Id file = hdf5::open_readonly(path, what);
  hdf5::Id root_id = hdf5::open_group(file.get(), "/", what);
  const hid_t root = root_id.get();
  CheckpointInfo info;
  const Config cfg = read_header(root, path, what, &info);
  check_embedding_shapes(file.get(), root, cfg.model, path, what);
  check_parameter_sizes(file.get(), cfg.model, path);
  read_tokenizer_strings(root, cfg.model, path, what, &info);
  read_tensors(root, cfg.model, path, what, &info, params, m, v);
  read_resume_state(root, path, what, &info);
  check_datasets_explained(root, info.tensors, cfg.model.tie_embeddings, path);
  return info;
}

// Copies tensor by tensor from `from` (laid out as `stored`) into `to` (laid out as `model`):
// the model must have the stored tensors, by name and shape, in any layout. Throws wte::Error
// naming the first difference, before anything is copied.
void copy_tensors(const std::vector<TensorSpec>& stored, const float* from, const Model& model,
                  float* to, const std::string& path) {
  const std::vector<TensorSpec>& want = model.tensors();
  if (want.size() != stored.size())
    throw Error("checkpoint '" + path + "' holds " + std::to_string(stored.size()) +
                " tensors but the model has " + std::to_string(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i].name != stored[i].name || want[i].shape != stored[i].shape)
      throw Error("checkpoint '" + path + "': tensor " + std::to_string(i) + " is '" +
                  stored[i].name + "' " + hdf5::shape_str(stored[i].shape) +
                  " but the model's is '" + want[i].name + "' " + hdf5::shape_str(want[i].shape));
  for (size_t i = 0; i < want.size(); ++i)
    std::copy(from + stored[i].offset, from + stored[i].offset + stored[i].size, to + want[i].offset);
}

}  // namespace

CheckpointInfo read_checkpoint_info(const std::string& path) {
  return read_checkpoint(path, nullptr, nullptr, nullptr);
}

CheckpointInfo load_checkpoint(const std::string& path, Model& model, AdamW* optimizer) {
  std::vector<float> params, m, v;
  const bool want_opt = optimizer != nullptr;
  CheckpointInfo info =
      read_checkpoint(path, &params, want_opt ? &m : nullptr, want_opt ? &v : nullptr);
  // Every check before the first copy: on error the model and optimizer are unchanged.
  copy_tensors(info.tensors, params.data(), model, model.param_data(), path);  // checks, then copies
  if (want_opt && info.has_optimizer) {
    copy_tensors(info.tensors, m.data(), model, optimizer->m(), path);
    copy_tensors(info.tensors, v.data(), model, optimizer->v(), path);
    optimizer->set_step(info.optimizer_step);
  }
  return info;
}

CheckpointModel load_checkpoint_model(const std::string& path) {
  std::vector<float> params;
  CheckpointModel out;
  out.info = read_checkpoint(path, &params, nullptr, nullptr);
  out.config = parse_config(out.info.config_ini, "the config stored in '" + path + "'");
  out.model = std::make_unique<Model>(out.config.model);
  copy_tensors(out.info.tensors, params.data(), *out.model, out.model->param_data(), path);
  return out;
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

ResumeChoice choose_resume_checkpoint(const std::string& dir) {
  ResumeChoice choice;
  const auto found = list_checkpoints(dir);
  choice.considered = found.size();
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    try {
      validate_checkpoint_isolated(it->second);
      const CheckpointInfo info = read_checkpoint_info(it->second);
      if (!info.resumable()) throw Error("'" + it->second + "' is a weights-only checkpoint");
      if (info.step > choice.step) {
        choice.path = it->second;
        choice.step = info.step;
      }
    } catch (const Cancelled&) {
      throw;
    } catch (const hdf5::FileLockedError& e) {
      throw Error(std::string("--resume auto: a checkpoint cannot be read: ") + e.what() +
                  "\n(not resuming from an older checkpoint: that would lose the steps since)");
    } catch (const Error& e) {
      choice.skipped.push_back({it->first, it->second, e.what()});
    }
  }
  return choice;
}

const std::vector<std::string>& resume_mutable_keys() {
  static const std::vector<std::string> keys = {
      "train.steps",         "train.log_interval",  "train.eval_interval", "train.eval_tokens",
      "train.threads",       "train.snapshot_steps", "checkpoint.interval", "checkpoint.keep_last",
      "data.text",           "data.train_tokens",   "data.val_tokens",     "data.tokenizer",
      // How a step is cut into work (the same loss and gradient up to float rounding; memory
      // differs): a resume on a smaller machine may change them.
      "model.loss_chunk",    "model.loss_vocab_tile", "train.grad_accum_steps",
      // The GEMM library (the same products up to float rounding), like train.threads.
      "model.gemm"};
  return keys;
}

std::vector<std::string> resume_config_mismatches(const Config& stored, const Config& now) {
  const std::vector<std::pair<std::string, std::string>> stored_values = config_values(stored),
                                                       now_values = config_values(now);
  const std::map<std::string, std::string> a(stored_values.begin(), stored_values.end());
  const std::map<std::string, std::string> b(now_values.begin(), now_values.end());
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
