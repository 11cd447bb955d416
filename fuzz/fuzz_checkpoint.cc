// libFuzzer target: the checkpoint loaders (read_checkpoint_info, load_checkpoint, and
// load_model_file, which `wte grad`/`gradcheck` use), structure-aware: the input is a list of
// edits applied through the HDF5 API to a small valid checkpoint written at start-up (vocab_size
// 256 + merges, d_model 4, n_ctx 8, with optimizer and resume state): replace any dataset or
// attribute by one of another type, shape or size (string kinds, integer widths, float32/64,
// arrays where scalars are read, forged sizes with no storage), delete objects, turn them into
// soft or hard links to other objects, overwrite values (NaN, negative moments, bad orders),
// replace the stored config text (keeping its hash right, so parsing is reached) and add extra
// datasets. Every read of every dataset and attribute must end in a wte::Error or success.
// An input that starts with "FLIP" is byte-level damage instead: after "FLIP" and one byte that
// picks the file (even: the seed above, version 3, HDF5's checksummed format; odd: the committed
// version-2 checkpoint tests/io/fixtures/checkpoint_v2_step2.h5, HDF5's earliest format), each
// 5 bytes are an offset (uint32 LE, modulo the file's size) and a byte XORed into the file there.
// HDF5 must find the damage by its checksums (version 3), or the reader must survive HDF5
// crashing or looping on it in the child process it reads the file in first (version 2): an
// error or a valid load, never a crash or a hang of this process.
// Every input also goes through `wte train --resume auto`'s choice (choose_resume_checkpoint) in
// a run directory holding a valid, resumable checkpoint of step 0 (checkpoint_00000000.h5) and
// the damaged file as a newer one (checkpoint_00000002.h5): the choice must be the damaged file
// if it validates (read_checkpoint_info) and is resumable, and then it must load into a model of
// its stored config with its optimizer state; otherwise the choice must skip it, naming it, and
// be the step-0 checkpoint. Stored steps are never negative and the later file name wins a tie, so
// a valid damaged file is chosen whatever step it stores.
#include <H5Cpp.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "wte/tokenizer.h"
#include "src/analysis/gradcheck.h"
#include "src/io/hdf5_util.h"

namespace {

struct Seed {
  std::string path, work;  // work: the run directory's newest checkpoint, rewritten per input
  std::string run, older;  // the run directory; its valid step-0 checkpoint
  std::vector<std::string> datasets;                         // "wte", "optimizer/m/wte", ...
  std::vector<std::string> groups;                           // "/", "optimizer", ...
  std::vector<std::pair<std::string, std::string>> attrs;    // (object, attribute)
  wte::Config cfg;
};

herr_t collect(hid_t g, const char* name, const H5L_info_t*, void* data) {
  auto* seed = static_cast<Seed*>(data);
  hid_t obj = H5Oopen(g, name, H5P_DEFAULT);
  const bool is_ds = H5Iget_type(obj) == H5I_DATASET;
  (is_ds ? seed->datasets : seed->groups).push_back(name);
  const int n = H5Aget_num_attrs(obj);
  for (int i = 0; i < n; ++i) {
    char buf[256];
    hid_t a = H5Aopen_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, static_cast<hsize_t>(i), H5P_DEFAULT, H5P_DEFAULT);
    H5Aget_name(a, sizeof buf, buf);
    seed->attrs.emplace_back(name, buf);
    H5Aclose(a);
  }
  H5Oclose(obj);
  return 0;
}

const Seed& seed() {
  static Seed s = [] {
    Seed s;
    const std::string dir = "/dev/shm/wte_fuzz_ckpt_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    static const std::string remove_at_exit = dir;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(remove_at_exit, ec);
    });
    s.path = dir + "/seed.h5";
    s.run = dir + "/run";
    std::filesystem::create_directories(s.run);
    s.work = wte::checkpoint_path(s.run, 2);
    s.older = wte::checkpoint_path(s.run, 0);
    s.cfg = wte::parse_config("[model]\nvocab_size = 258\nd_model = 4\nn_ctx = 8\n[data]\nseq_len = 4\n"
                              "[train]\nsteps = 10\nbatch_size = 2\n",
                              "fuzz seed");
    std::string text;
    for (int i = 0; i < 50; ++i) text += "the king said unto them and the people went ";
    const wte::Tokenizer tok = wte::Tokenizer::train(text, 258);
    std::vector<int32_t> ids = tok.encode(text);
    wte::Model model(s.cfg.model);
    model.init_weights(1);
    wte::AdamW opt(model);
    wte::BatchLoader loader(&ids, 4, true, 5);
    wte::ResumeState rs0;
    rs0.data = loader.state();
    rs0.train_tokens = ids.size();
    rs0.val_tokens = ids.size();
    rs0.train_tokens_fnv1a64 = wte::fnv1a64(ids);
    rs0.val_tokens_fnv1a64 = rs0.train_tokens_fnv1a64;
    rs0.total_steps = 10;
    rs0.lr = 0.0f;
    wte::save_checkpoint(s.older, model, &opt, tok, s.cfg, 0, &rs0);
    std::vector<int32_t> in(8), tg(8);
    loader.next_batch(in.data(), tg.data(), 2, nullptr);
    model.forward(in.data(), tg.data(), 2, 4);
    model.backward();
    opt.update(model, 1e-3f, s.cfg.optim);
    wte::ResumeState rs;
    rs.data = loader.state();
    rs.train_tokens = ids.size();
    rs.val_tokens = ids.size();
    rs.train_tokens_fnv1a64 = wte::fnv1a64(ids);
    rs.val_tokens_fnv1a64 = rs.train_tokens_fnv1a64;
    rs.total_steps = 10;
    rs.lr = 1e-3f;
    wte::save_checkpoint(s.path, model, &opt, tok, s.cfg, 1, &rs);
    wte::hdf5::quiet();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t f = H5Fopen(s.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    s.groups.push_back("/");
    {
      // root attributes
      const int n = H5Aget_num_attrs(f);
      for (int i = 0; i < n; ++i) {
        char buf[256];
        hid_t a = H5Aopen_by_idx(f, ".", H5_INDEX_NAME, H5_ITER_INC, static_cast<hsize_t>(i), H5P_DEFAULT, H5P_DEFAULT);
        H5Aget_name(a, sizeof buf, buf);
        s.attrs.emplace_back("/", buf);
        H5Aclose(a);
      }
    }
    H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, collect, &s);
    H5Fclose(f);
    // The seed itself must load: otherwise the fuzzer explores nothing.
    wte::read_checkpoint_info(s.path);
    // Alone in the run directory, the step-0 checkpoint is --resume auto's choice.
    const wte::ResumeChoice alone = wte::choose_resume_checkpoint(s.run);
    if (alone.path != s.older || alone.step != 0 || !alone.skipped.empty()) {
      std::fprintf(stderr, "fuzz_checkpoint: --resume auto does not choose the valid step-0 "
                           "checkpoint '%s' alone in its run directory\n", s.older.c_str());
      std::abort();
    }
    return s;
  }();
  return s;
}

// Reads the input as a byte stream; past the end every read returns 0.
struct Input {
  const uint8_t* p;
  size_t n, i = 0;
  uint8_t byte() { return i < n ? p[i++] : 0; }
  uint32_t u32() { return byte() | (byte() << 8) | (byte() << 16) | (static_cast<uint32_t>(byte()) << 24); }
  std::string bytes(size_t k) {
    std::string s;
    for (size_t j = 0; j < k && i < n; ++j) s += static_cast<char>(p[i++]);
    return s;
  }
  bool done() const { return i >= n; }
};

hid_t pick_type(uint8_t t, Input& in) {
  switch (t % 12) {
    case 0: return H5Tcopy(H5T_IEEE_F32LE);
    case 1: return H5Tcopy(H5T_IEEE_F64LE);
    case 2: return H5Tcopy(H5T_STD_I32LE);
    case 3: return H5Tcopy(H5T_STD_U32LE);
    case 4: return H5Tcopy(H5T_STD_U64LE);
    case 5: return H5Tcopy(H5T_STD_I64LE);
    case 6: return H5Tcopy(H5T_STD_I8LE);
    case 7: return H5Tcopy(H5T_IEEE_F32BE);
    case 8: { hid_t s = H5Tcopy(H5T_C_S1); H5Tset_size(s, H5T_VARIABLE); return s; }
    case 9: { hid_t s = H5Tcopy(H5T_C_S1); H5Tset_size(s, 1 + in.byte() % 64); return s; }
    case 10: { hsize_t d[1] = {static_cast<hsize_t>(1 + in.byte() % 4)}; return H5Tarray_create2(H5T_STD_I64LE, 1, d); }
    default: { hid_t e = H5Tenum_create(H5T_STD_I32LE); int v = 0; H5Tenum_insert(e, "a", &v); return e; }
  }
}

hid_t pick_space(Input& in, size_t* count, bool* huge) {
  const uint8_t r = in.byte();
  *huge = false;
  if (r % 5 == 0) { *count = 1; return H5Screate(H5S_SCALAR); }
  if (r % 5 == 4 && (r & 0x80)) { *count = 0; return H5Screate(H5S_NULL); }
  const int rank = 1 + (r >> 3) % 3;
  hsize_t dims[3];
  size_t n = 1;
  for (int k = 0; k < rank; ++k) {
    const uint8_t d = in.byte();
    dims[k] = (d == 0xff) ? (hsize_t{1} << 24) : d % 9;
    if (d == 0xff) *huge = true;
    n *= dims[k];
  }
  *count = n;
  return H5Screate_simple(rank, dims, nullptr);
}

// Fills a buffer for `count` elements of `type` from the input (vlen strings get pointers into
// `strings`).
std::vector<char> fill_buffer(hid_t type, size_t count, Input& in, std::vector<std::string>& strings,
                              std::vector<const char*>& ptrs) {
  if (H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) > 0) {
    strings.clear();
    ptrs.clear();
    for (size_t i = 0; i < count; ++i) strings.push_back(in.bytes(in.byte()));
    for (auto& s : strings) ptrs.push_back(s.c_str());
    return {};
  }
  const size_t bytes = count * H5Tget_size(type);
  std::vector<char> buf(bytes);
  for (size_t i = 0; i < bytes; ++i) buf[i] = static_cast<char>(in.byte());
  return buf;
}

void make_dataset(hid_t f, const std::string& path, Input& in) {
  hid_t type = pick_type(in.byte(), in);
  size_t count = 0;
  bool huge = false;
  hid_t space = pick_space(in, &count, &huge);
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t ds = H5Dcreate2(f, path.c_str(), type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  if (ds >= 0 && !huge && count > 0 && count < 4096) {
    std::vector<std::string> strings;
    std::vector<const char*> ptrs;
    std::vector<char> buf = fill_buffer(type, count, in, strings, ptrs);
    H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.empty() ? static_cast<void*>(buf.data()) : static_cast<void*>(ptrs.data()));
  }
  if (ds >= 0) H5Dclose(ds);
  H5Pclose(lcpl);
  H5Sclose(space);
  H5Tclose(type);
}

void make_attr(hid_t f, const std::string& obj, const std::string& name, Input& in) {
  hid_t o = H5Oopen(f, obj.c_str(), H5P_DEFAULT);
  if (o < 0) return;
  if (H5Aexists(o, name.c_str()) > 0) H5Adelete(o, name.c_str());
  hid_t type = pick_type(in.byte(), in);
  size_t count = 0;
  bool huge = false;
  hid_t space = pick_space(in, &count, &huge);
  if (huge) {
    H5Sclose(space);
    space = H5Screate(H5S_SCALAR);
    count = 1;
  }
  hid_t a = H5Acreate2(o, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (a >= 0 && count > 0 && count < 4096) {
    std::vector<std::string> strings;
    std::vector<const char*> ptrs;
    std::vector<char> buf = fill_buffer(type, count, in, strings, ptrs);
    H5Awrite(a, type, ptrs.empty() ? static_cast<void*>(buf.data()) : static_cast<void*>(ptrs.data()));
  }
  if (a >= 0) H5Aclose(a);
  H5Sclose(space);
  H5Tclose(type);
  H5Oclose(o);
}

void overwrite_values(hid_t f, const std::string& path, Input& in) {
  hid_t ds = H5Dopen2(f, path.c_str(), H5P_DEFAULT);
  if (ds < 0) return;
  hid_t type = H5Dget_type(ds);
  hid_t space = H5Dget_space(ds);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (H5Tget_class(type) == H5T_STRING) {
    // The stored config: keep the root hash right so the parser is reached.
    std::string text = in.bytes(in.byte() | (in.byte() << 8));
    if (path == "config/ini" && (in.byte() & 1)) {
      // Start from the seed's text with the input's bytes inserted at a position.
      std::string ini = seed().cfg.to_ini();
      const size_t at = in.byte() % 200;
      text = ini.insert(at < ini.size() ? at : 0, text);
    }
    // An earlier edit may have made this a string dataset of any shape: one pointer per element
    // (H5Dwrite reads n of them).
    if (H5Tis_variable_str(type) > 0 && n > 0 && n < (1 << 20)) {
      const std::vector<const char*> ptrs(static_cast<size_t>(n), text.c_str());
      hid_t mem = H5Tcopy(H5T_C_S1);
      H5Tset_size(mem, H5T_VARIABLE);
      H5Dwrite(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data());
      H5Tclose(mem);
    }
    if (path == "config/ini" && !(in.byte() & 0x80)) {
      const uint64_t h = wte::fnv1a64(text.data(), text.size());
      hid_t a = H5Aopen(f, "config_fnv1a64", H5P_DEFAULT);
      if (a >= 0) {
        H5Awrite(a, H5T_NATIVE_UINT64, &h);
        H5Aclose(a);
      }
    }
  } else if (n > 0 && n < (1 << 20)) {
    const size_t elem = H5Tget_size(type);
    std::vector<char> buf(static_cast<size_t>(n) * elem);
    H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
    // Patch a few elements: special floats, or raw bytes from the input.
    const int patches = 1 + in.byte() % 4;
    for (int k = 0; k < patches; ++k) {
      const size_t at = (in.u32() % static_cast<size_t>(n)) * elem;
      const uint8_t kind = in.byte();
      if (H5Tget_class(type) == H5T_FLOAT && elem == 4 && kind < 128) {
        const float specials[] = {__builtin_nanf(""), __builtin_inff(), -1.0f, -0.0f, 1e30f, 1e-40f};
        std::memcpy(buf.data() + at, &specials[kind % 6], 4);
      } else {
        for (size_t b = 0; b < elem; ++b) buf[at + b] = static_cast<char>(in.byte());
      }
    }
    H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
  }
  H5Sclose(space);
  H5Tclose(type);
  H5Dclose(ds);
}

void apply_edits(const uint8_t* data, size_t size) {
  const Seed& s = seed();
  // A new file (a new inode) per input: validate_checkpoint_isolated remembers results by device,
  // inode, size and modification time, and two inputs written within one clock tick of the file
  // system's coarse timestamps would otherwise share a key.
  std::filesystem::remove(s.work);
  std::filesystem::copy_file(s.path, s.work);
  hid_t f = H5Fopen(s.work.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return;
  Input in{data, size};
  for (int edits = 0; edits < 8 && !in.done(); ++edits) {
    const uint8_t op = in.byte();
    const std::string& ds = s.datasets[in.byte() % s.datasets.size()];
    const std::string& other = s.datasets[in.byte() % s.datasets.size()];
    switch (op % 9) {
      case 0: H5Ldelete(f, ds.c_str(), H5P_DEFAULT); make_dataset(f, ds, in); break;
      case 1: { const auto& [obj, name] = s.attrs[in.byte() % s.attrs.size()]; make_attr(f, obj, name, in); break; }
      case 2: H5Ldelete(f, ds.c_str(), H5P_DEFAULT); break;
      case 3: H5Ldelete(f, ds.c_str(), H5P_DEFAULT); H5Lcreate_soft(("/" + other).c_str(), f, ds.c_str(), H5P_DEFAULT, H5P_DEFAULT); break;
      case 4: H5Ldelete(f, ds.c_str(), H5P_DEFAULT); H5Lcreate_hard(f, other.c_str(), f, ds.c_str(), H5P_DEFAULT, H5P_DEFAULT); break;
      case 5: case 6: overwrite_values(f, (op % 9 == 6) ? std::string(in.byte() & 1 ? "config/ini" : "data/order") : ds, in); break;
      case 7: {
        static const char* extra[] = {"lm_head", "extra", "optimizer/m/extra", "h0/attn/c_attn/w", "data/x"};
        make_dataset(f, extra[in.byte() % 5], in);
        break;
      }
      default: {
        const std::string& g = s.groups[in.byte() % s.groups.size()];
        if (g != "/") H5Ldelete(f, g.c_str(), H5P_DEFAULT);
        break;
      }
    }
  }
  H5Fclose(f);
  H5Eclear2(H5E_DEFAULT);
}

// The committed version-2 checkpoint's bytes (empty if it cannot be read).
const std::string& old_format_bytes() {
  static const std::string bytes = [] {
    std::FILE* f = std::fopen(WTE_SOURCE_DIR "/tests/io/fixtures/checkpoint_v2_step2.h5", "rb");
    std::string b;
    if (f == nullptr) return b;
    char buf[65536];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) b.append(buf, n);
    std::fclose(f);
    return b;
  }();
  return bytes;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_checkpoint: --resume auto: %s\n", what.c_str());
  std::abort();
}

// --resume auto's choice between the step-0 checkpoint and the damaged file (see the header);
// `valid`: read_checkpoint_info of the damaged file succeeded and it is resumable.
void check_resume_auto_choice(bool valid) {
  const Seed& s = seed();
  wte::ResumeChoice choice;
  try {
    choice = wte::choose_resume_checkpoint(s.run);
  } catch (const wte::Error& e) {
    fail(std::string("the choice threw: ") + e.what());
  }
  if (choice.considered != 2) fail("considered " + std::to_string(choice.considered) + " files, not 2");
  if (valid) {
    if (choice.path != s.work || !choice.skipped.empty())
      fail("a valid, resumable newer checkpoint was not chosen (chose '" + choice.path + "')");
    try {
      const wte::CheckpointInfo info = wte::read_checkpoint_info(choice.path);
      if (choice.step != info.step) fail("the chosen step is not the stored one");
      const wte::Config cfg = wte::parse_config(info.config_ini, "the chosen checkpoint");
      wte::Model model(cfg.model);
      wte::AdamW opt(model);
      wte::load_checkpoint(choice.path, model, &opt);
    } catch (const wte::Error& e) {
      fail(std::string("the chosen checkpoint does not load: ") + e.what());
    }
  } else {
    if (choice.path != s.older || choice.step != 0)
      fail("an invalid newer checkpoint was not skipped for the valid step-0 one (chose '" +
           choice.path + "', step " + std::to_string(choice.step) + ")");
    if (choice.skipped.size() != 1 || choice.skipped[0].path != s.work || choice.skipped[0].name_step != 2 ||
        choice.skipped[0].error.empty())
      fail("the skipped file is not reported as the invalid newer checkpoint with its error");
  }
}

// "FLIP" inputs: the picked file with the input's bytes XORed in, written to the work path.
void apply_flips(const uint8_t* data, size_t size) {
  const Seed& s = seed();
  std::string bytes;
  if (data[4] & 1) {
    bytes = old_format_bytes();
  } else {
    std::FILE* f = std::fopen(s.path.c_str(), "rb");
    char buf[65536];
    size_t n = 0;
    while (f != nullptr && (n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
    if (f != nullptr) std::fclose(f);
  }
  if (bytes.empty()) return;
  for (size_t i = 5; i + 5 <= size; i += 5) {
    const uint32_t at = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) |
                        (static_cast<uint32_t>(data[i + 3]) << 24);
    bytes[at % bytes.size()] = static_cast<char>(bytes[at % bytes.size()] ^ data[i + 4]);
  }
  std::filesystem::remove(s.work);  // a new inode per input, as in apply_edits
  std::FILE* out = std::fopen(s.work.c_str(), "wb");
  if (out == nullptr) return;
  std::fwrite(bytes.data(), 1, bytes.size(), out);
  std::fclose(out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Seed& s = seed();
  if (size >= 5 && std::memcmp(data, "FLIP", 4) == 0)
    apply_flips(data, size);
  else
    apply_edits(data, size);
  bool valid = false;
  try {
    valid = wte::read_checkpoint_info(s.work).resumable();
  } catch (const wte::Error&) {
  }
  try {
    wte::Model model(s.cfg.model);
    wte::AdamW opt(model);
    wte::load_checkpoint(s.work, model, &opt);
  } catch (const wte::Error&) {
  }
  try {
    wte::Config cfg;
    wte::load_model_file(s.work, &cfg);
  } catch (const wte::Error&) {
  }
  check_resume_auto_choice(valid);
  return 0;
}
