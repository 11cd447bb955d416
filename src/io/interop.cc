// import_hf_gpt2 and export_hf_gpt2 (include/wte/interop.h): the files around the name map
// (src/io/hf_gpt2.*) and the safetensors format (src/io/safetensors.*).
#include "wte/interop.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>

#include "src/io/file_checks.h"
#include "src/io/gguf.h"
#include "src/io/gguf_gpt2.h"
#include "src/profile/clock.h"
#include "src/io/hf_gpt2.h"
#include "src/io/safetensors.h"
#include "wte/checkpoint.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/tokenizer.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

// The tokenizer of a Hugging Face model directory: vocab.json + merges.txt, or GPT-2's own names
// for the same files, encoder.json + vocab.bpe.
Tokenizer load_hf_tokenizer(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  if (!fs::is_directory(d, ec))
    throw Error("tokenizer directory '" + dir + "' does not exist (it holds vocab.json and "
                "merges.txt, the tokenizer files of the Hugging Face model)");
  for (const auto& [json, merges] : {std::pair<const char*, const char*>{"vocab.json", "merges.txt"},
                                     {"encoder.json", "vocab.bpe"}}) {
    if (fs::is_regular_file(d / json, ec) && fs::is_regular_file(d / merges, ec))
      return Tokenizer::from_strings(read_text_file((d / json).string()),
                                     read_text_file((d / merges).string()),
                                     "tokenizer file '" + (d / json).string() + "'",
                                     "tokenizer file '" + (d / merges).string() + "'");
  }
  throw Error("tokenizer directory '" + dir + "' holds neither vocab.json + merges.txt (Hugging "
              "Face's names) nor encoder.json + vocab.bpe (GPT-2's names for the same files)");
}

void fsync_file(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '" + path + "' to fsync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw Error("fsync of '" + path + "' failed: " + std::strerror(err));
}

// A file being written as PATH.tmp, committed later (all of an export's files together).
class PendingFiles {
 public:
  ~PendingFiles() {
    for (const std::string& p : tmps_) ::unlink((p + ".tmp").c_str());  // not committed: removed
  }
  // Writes `head` then `n` bytes of `data` to path + ".tmp".
  void write(const std::string& path, const std::string& head, const void* data, uint64_t n) {
    write_with(path, head.size() + n, [&](const Emit& emit) {
      emit(head.data(), head.size());
      emit(data, n);
    });
  }
  // Bytes handed to a write_with producer's sink, in order.
  using Emit = std::function<void(const void* data, uint64_t n)>;
  // Writes path + ".tmp" of exactly `total` bytes (reserved first, so a full disk fails before
  // any byte is written), produced piece by piece by `fill` through the sink it is given.
  void write_with(const std::string& path, uint64_t total,
                  const std::function<void(const Emit&)>& fill) {
    const std::string tmp = path + ".tmp";
    tmps_.push_back(path);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error("cannot create '" + tmp + "': " + std::strerror(errno));
    // Throws the error of a failed system call; the catch below closes fd.
    auto fail = [&](const char* what) {
      const int err = errno;
      throw Error("writing '" + path + "' failed: " + what + ": " + std::strerror(err) +
                  (err == ENOSPC ? " (the disk is full)" : "") + "; nothing was written");
    };
    uint64_t written = 0;
    try {
      if (total > 0) {
        const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(total));
        if (err != 0 && err != EOPNOTSUPP && err != EINVAL) {
          errno = err;
          fail("reserving space");
        }
      }
      fill([&](const void* data, uint64_t len) {
        const char* c = static_cast<const char*>(data);
        uint64_t left = len;
        while (left > 0) {
          const ssize_t w = ::write(fd, c, std::min<uint64_t>(left, uint64_t{1} << 30));
          if (w < 0) {
            if (errno == EINTR) continue;
            fail("write");
          }
          c += w;
          left -= static_cast<uint64_t>(w);
        }
        written += len;
      });
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (written != total) {
      ::close(fd);
      throw Error("internal error: '" + path + "' got " + std::to_string(written) + " bytes, " +
                  std::to_string(total) + " expected");
    }
    if (::close(fd) != 0) {
      const int err = errno;
      throw Error("writing '" + path + "' failed: close: " + std::strerror(err) +
                  (err == ENOSPC ? " (the disk is full)" : "") + "; nothing was written");
    }
  }
  // A file another writer left finished at path + ".tmp" (safetensors::write_file, commit=false).
  void adopt(const std::string& path) { tmps_.push_back(path); }
  // Puts every file in place, all or none: each target is checked (a special file there is
  // refused, as commit_file does) and each PATH.tmp fsynced before the first rename; a file the
  // renames replace is kept as PATH.old.tmp until all are in place, and a rename that fails puts
  // back every file renamed before it. Then the directory is fsynced.
  void commit_all() {
    std::error_code ec;
    for (const std::string& p : tmps_) {
      if (fs::exists(p, ec) && !fs::is_regular_file(p, ec))
        throw Error("'" + p + "' exists and " + io::input_file_problem(p) + ": wte writes '" + p +
                    ".tmp' and renames it into place, which would replace it; nothing was written");
      fsync_file(p + ".tmp", O_RDONLY);
    }
    struct Done {
      std::string path;
      bool had_old;
    };
    std::vector<Done> done;
    auto roll_back = [&] {
      for (auto it = done.rbegin(); it != done.rend(); ++it) {
        ::rename(it->path.c_str(), (it->path + ".tmp").c_str());  // removed by the destructor
        if (it->had_old) ::rename((it->path + ".old.tmp").c_str(), it->path.c_str());
      }
    };
    for (const std::string& p : tmps_) {
      const std::string old = p + ".old.tmp";
      const bool had_old = fs::exists(p, ec);
      if (had_old && ::rename(p.c_str(), old.c_str()) != 0) {
        const int err = errno;
        roll_back();
        throw Error("cannot rename '" + p + "' to '" + old + "': " + std::strerror(err) +
                    "; every file in the directory is as it was");
      }
      if (::rename((p + ".tmp").c_str(), p.c_str()) != 0) {
        const int err = errno;
        if (had_old) ::rename(old.c_str(), p.c_str());
        roll_back();
        throw Error("cannot rename '" + p + ".tmp' to '" + p + "': " + std::strerror(err) +
                    "; every file in the directory is as it was");
      }
      done.push_back({p, had_old});
    }
    for (const Done& d : done)
      if (d.had_old) ::unlink((d.path + ".old.tmp").c_str());
    tmps_.clear();
    if (!done.empty()) {
      const fs::path dir = fs::path(done.front().path).parent_path();
      fsync_file(dir.empty() ? "." : dir.string(), O_RDONLY | O_DIRECTORY);
    }
  }

 private:
  std::vector<std::string> tmps_;
};

// NumPy's .npy format 1.0 header for a C-order little-endian float32 array of `shape`
// (numpy/lib/format.py: magic, version, header length, a dict literal padded to 64 bytes).
std::string npy_header(const std::vector<size_t>& shape) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) dims += ", ";
    dims += std::to_string(shape[i]);
  }
  if (shape.size() == 1) dims += ",";
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = 10 + dict.size() + 1;  // magic 6 + version 2 + length 2, dict, '\n'
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  const uint16_t len = static_cast<uint16_t>(dict.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  return out + dict;
}

gguf::TensorType gguf_tensor_type(GgufType t) {
  switch (t) {
    case GgufType::kF32: return gguf::TensorType::kF32;
    case GgufType::kF16: return gguf::TensorType::kF16;
    case GgufType::kQ8_0: return gguf::TensorType::kQ8_0;
  }
  return gguf::TensorType::kF32;
}

// model.gguf of `model` (src/io/gguf_gpt2.h) into `pending`: the header, then each tensor
// converted to its type in ggml's layout, one tensor at a time, each padded to the alignment.
// Returns the number of tensors.
size_t write_gguf(PendingFiles& pending, const std::string& path, const Model& model,
                const ModelConfig& config, const Tokenizer& tokenizer, GgufType type,
                const std::string& name) {
  const gguf::TensorType tt = gguf_tensor_type(type);
  const gguf::Metadata meta = gguf::gpt2_metadata(config, tokenizer, tt, name);
  const std::vector<gguf::Gpt2Tensor> tensors = gguf::gpt2_tensors(config, tt);
  std::vector<gguf::TensorInfo> infos;
  uint64_t total = 0;
  for (const gguf::Gpt2Tensor& t : tensors) {
    infos.push_back(t.info);
    total += gguf::align(gguf::data_bytes(t.info));
  }
  const std::string head = gguf::header(meta, infos);
  total += head.size();
  std::vector<float> values;
  std::vector<uint8_t> bytes;
  const char zeros[gguf::kAlignment] = {};
  pending.write_with(path, total, [&](const PendingFiles::Emit& emit) {
    emit(head.data(), head.size());
    for (const gguf::Gpt2Tensor& t : tensors) {
      const size_t n = t.rows * t.cols;
      values.resize(n);
      gguf::gpt2_values(model, t, values.data());
      const uint64_t nb = gguf::data_bytes(t.info);
      bytes.resize(nb);
      const size_t bad = gguf::convert(values.data(), n, t.info.type, bytes.data());
      if (bad != n) {
        char v[32];
        std::snprintf(v, sizeof v, "%.9g", values[bad]);
        throw Error("tensor '" + t.wte_name + "' (" + t.info.name + ") holds " + v +
                    " at index " + std::to_string(bad) + " (in ggml's order), which " +
                    gguf::type_name(t.info.type) +
                    " cannot hold (float16's largest value is 65504); export with --gguf-type "
                    "f32; nothing was written");
      }
      emit(bytes.data(), nb);
      emit(zeros, gguf::align(nb) - nb);
    }
  });
  return tensors.size();
}

}  // namespace

HfImportSummary import_hf_gpt2(const HfImportSource& source, const std::string& out_checkpoint) {
  const auto t0 = Clock::now();
  HfImportSummary s;
  const std::string config_text = read_text_file(source.config_json);
  s.model = hf::parse_config_json(config_text, "config.json '" + source.config_json + "'");
  const Tokenizer tokenizer = load_hf_tokenizer(source.tokenizer);
  if (tokenizer.size() != s.model.vocab_size)
    throw Error("the tokenizer in '" + source.tokenizer + "' has " +
                std::to_string(tokenizer.size()) + " tokens but config.json '" +
                source.config_json + "' has vocab_size " + std::to_string(s.model.vocab_size) +
                "; they must be equal");
  const safetensors::MappedFile file(source.safetensors);
  s.safetensors_bytes = file.size();
  const hf::FileLayout layout = hf::check_tensors(file.view(), s.model);  // before any allocation
  Model model(s.model);
  hf::load_tensors(file.view(), layout, model);
  for (const safetensors::TensorInfo* t : layout.tensors) {
    s.f32 += t->dtype == safetensors::Dtype::F32;
    s.f16 += t->dtype == safetensors::Dtype::F16;
    s.bf16 += t->dtype == safetensors::Dtype::BF16;
  }
  s.tensors = layout.tensors.size();
  s.parameters = model.num_parameters();
  s.prefixed = layout.prefixed;
  s.lm_head_in_file = layout.lm_head != nullptr;
  s.ignored = layout.ignored;
  s.read_seconds = seconds_since(t0);
  Config cfg;
  cfg.model = s.model;
  cfg.data.seq_len = std::min<size_t>(64, s.model.n_ctx);
  const auto t1 = Clock::now();
  save_checkpoint(out_checkpoint, model, /*optimizer=*/nullptr, tokenizer, cfg, /*step=*/0);
  s.write_seconds = seconds_since(t1);
  return s;
}

ExportSummary export_hf_gpt2(const std::string& checkpoint, ExportFormat format,
                             const std::string& out_dir, GgufType gguf_type) {
  const CheckpointModel ck = load_checkpoint_model(checkpoint);
  const CheckpointInfo& info = ck.info;
  const Config& cfg = ck.config;
  const Model& model = *ck.model;
  const Tokenizer tokenizer = Tokenizer::from_strings(info.encoder_json, info.vocab_bpe,
                                                      "the tokenizer stored in '" + checkpoint + "'");
  std::string config_json;
  try {
    config_json = hf::config_json(cfg.model, tokenizer);
  } catch (const Error& e) {
    throw Error("checkpoint '" + checkpoint + "': " + e.what());
  }

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (!fs::is_directory(out_dir, ec))
    throw Error("--out '" + out_dir + "': cannot create the directory" +
                (ec ? ": " + ec.message() : std::string()));
  const fs::path dir(out_dir);
  ExportSummary s;
  PendingFiles pending;
  std::vector<safetensors::OutTensor> tensors;
  for (const hf::NamePair& p : hf::gpt2_names(cfg.model)) {
    const float* data = model.param(p.wte);
    const TensorSpec* spec = nullptr;
    for (const TensorSpec& t : model.tensors())
      if (t.name == p.wte) spec = &t;
    if (data == nullptr || spec == nullptr)
      throw Error("checkpoint '" + checkpoint + "': internal error: no tensor " + p.wte);
    tensors.push_back({hf::state_dict_name(p), spec->shape, data});
  }
  s.tensors = tensors.size();
  if (format == ExportFormat::kSafetensors) {
    const std::string path = (dir / "model.safetensors").string();
    pending.adopt(path);
    safetensors::write_file(path, tensors, {{"format", "pt"}}, /*commit=*/false);
    s.files.push_back(path);
  } else if (format == ExportFormat::kGguf) {
    const std::string path = (dir / "model.gguf").string();
    // general.name: the run directory's name (a checkpoint beside its run's config.ini), else
    // the checkpoint file's stem.
    const fs::path ck_path = fs::absolute(checkpoint, ec);
    std::string name = ck_path.stem().string();
    if (fs::is_regular_file(ck_path.parent_path() / "config.ini", ec) &&
        !ck_path.parent_path().filename().empty())
      name = ck_path.parent_path().filename().string();
    try {
      s.tensors = write_gguf(pending, path, model, cfg.model, tokenizer, gguf_type, name);
    } catch (const Error& e) {
      throw Error("checkpoint '" + checkpoint + "': " + e.what());
    }
    s.files.push_back(path);
  } else {
    for (const safetensors::OutTensor& t : tensors) {
      const std::string path = (dir / (t.name + ".npy")).string();
      size_t n = 1;
      for (size_t d : t.shape) n *= d;
      pending.write(path, npy_header(t.shape), t.data, 4 * uint64_t{n});
      s.files.push_back(path);
    }
  }
  for (const auto& [name, text] :
       {std::pair<const char*, std::string>{"config.json", config_json},
        {"vocab.json", tokenizer.encoder_json()},
        {"merges.txt", tokenizer.vocab_bpe()},
        {"tokenizer.json", hf::tokenizer_json(tokenizer)}}) {
    const std::string path = (dir / name).string();
    pending.write(path, text, nullptr, 0);
    s.files.push_back(path);
  }
  pending.commit_all();
  for (const std::string& f : s.files) s.bytes += fs::file_size(f, ec);
  return s;
}

}  // namespace wte
