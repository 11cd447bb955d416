#include "src/analysis/gradcheck.h"

#include <H5Cpp.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "wte/data.h"
#include "wte/error.h"
#include "wte/tokenizer.h"
#include "src/io/checkpoint_checks.h"
#include "src/io/file_checks.h"
#include "src/io/hdf5_util.h"
#include "wte/rng.h"

namespace fs = std::filesystem;

namespace wte {

// ------------------------------------------------------------------------------------------------
// Batches

TokenBatch read_token_batch(const std::string& path, size_t vocab_size, size_t n_ctx) {
  io::require_input_file("token file ", path);  // a directory, /dev/null, a FIFO: named
  std::istringstream in([&] {
    try {
      return read_text_file(path);  // a read error (EIO) names the file, not a short file
    } catch (const Error& e) {
      throw Error("token file: " + std::string(e.what()));
    }
  }());
  TokenBatch batch;
  std::vector<int32_t> all;  // (B, L)
  size_t L = 0, line_no = 0, first_line = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++line_no;
    std::istringstream words(line);
    std::vector<int32_t> ids;
    std::string word;
    while (words >> word) {
      long long v = 0;
      size_t used = 0;
      try {
        v = std::stoll(word, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != word.size())
        throw Error("token file '" + path + "', line " + std::to_string(line_no) + ", position " +
                    std::to_string(ids.size() + 1) + ": '" + escape_piece(word) +
                    "' is not an integer token id; allowed: ids in [0, vocab_size=" +
                    std::to_string(vocab_size) + ") separated by spaces");
      if (v < 0 || static_cast<unsigned long long>(v) >= vocab_size)
        throw Error("token file '" + path + "', line " + std::to_string(line_no) + ", position " +
                    std::to_string(ids.size() + 1) + ": token id " + word +
                    " is outside [0, vocab_size=" + std::to_string(vocab_size) + ")");
      ids.push_back(static_cast<int32_t>(v));
    }
    if (ids.empty()) continue;  // blank line
    if (ids.size() < 2)
      throw Error("token file '" + path + "', line " + std::to_string(line_no) +
                  " has 1 id; a line needs at least 2 (inputs are ids[:-1], targets ids[1:])");
    if (L == 0) {
      L = ids.size();
      first_line = line_no;
    } else if (ids.size() != L) {
      throw Error("token file '" + path + "', line " + std::to_string(line_no) + " has " +
                  std::to_string(ids.size()) + " ids but line " + std::to_string(first_line) +
                  " has " + std::to_string(L) + "; every line of a batch must have the same length");
    }
    all.insert(all.end(), ids.begin(), ids.end());
  }
  if (L == 0) throw Error("token file '" + path + "' has no token ids (one sequence per line)");
  batch.B = all.size() / L;
  batch.T = L - 1;
  if (batch.T > n_ctx)
    throw Error("token file '" + path + "': lines of " + std::to_string(L) + " ids give T=" +
                std::to_string(batch.T) + ", which exceeds n_ctx=" + std::to_string(n_ctx) +
                " (at most n_ctx + 1 ids per line)");
  for (size_t b = 0; b < batch.B; ++b) {
    batch.inputs.insert(batch.inputs.end(), all.begin() + b * L, all.begin() + b * L + L - 1);
    batch.targets.insert(batch.targets.end(), all.begin() + b * L + 1, all.begin() + b * L + L);
  }
  return batch;
}

TokenBatch random_batch(size_t B, size_t T, size_t V, uint64_t seed) {
  if (B == 0 || T == 0 || V == 0)
    throw Error("random batch: B=" + std::to_string(B) + ", T=" + std::to_string(T) +
                ", vocab_size=" + std::to_string(V) + " must all be >= 1");
  TokenBatch batch;
  batch.B = B;
  batch.T = T;
  Rng rng(seed);
  const size_t used = std::max<size_t>(1, V / 2);
  batch.inputs.resize(B * T);
  batch.targets.resize(B * T);
  for (int32_t& id : batch.inputs) id = static_cast<int32_t>(rng.below(used));
  for (int32_t& id : batch.targets) id = static_cast<int32_t>(rng.below(V));
  if (B * T >= 2) batch.inputs[1] = batch.inputs[0];
  return batch;
}

// ------------------------------------------------------------------------------------------------
// Model files

using hdf5::shape_str;

std::unique_ptr<Model> load_model_file(const std::string& path, Config* config_out) {
  const std::string what = "model file '" + path + "'";
  // A file in HDF5's earliest format (no metadata checksums) is read in a child process first,
  // so a damaged one cannot crash or hang this process (src/io/checkpoint_checks.h).
  isolate_unless_checksummed(path, what, [&] { load_model_file(path, nullptr); });
  hdf5::Id file = hdf5::open_readonly(path, what);
  hdf5::Id root = hdf5::open_group(file.get(), "/", what);
  std::string format;
  if (hdf5::has_attr(root.get(), "format"))
    format = hdf5::read_string_attr(root.get(), "format", what, "attribute 'format'");
  if (format != "wte-checkpoint")
    throw Error("'" + path + "' is not a wte checkpoint: its root attribute 'format' is '" +
                format + "', expected 'wte-checkpoint' (docs/checkpoint.md)");
  if (!hdf5::exists(root.get(), "config/ini", what))
    throw Error("'" + path + "' has no dataset 'config/ini' (the model's configuration)");
  const std::string ini = hdf5::read_string(root.get(), "config/ini", what);
  auto float_shape = [&](const std::string& name) {
    hdf5::Id ds = hdf5::open_dataset(root.get(), name, what);
    hdf5::Id type(H5Dget_type(ds.get()));
    if (H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
      throw Error("'" + path + "': dataset '" + name + "' is not float32");
    hdf5::Id space(H5Dget_space(ds.get()));
    return hdf5::space_shape(space.get(), what, "dataset '" + name + "'");
  };
  const std::vector<size_t> wte_shape = float_shape("wte");
  const std::vector<size_t> wpe_shape = float_shape("wpe");
  if (wte_shape.size() != 2 || wpe_shape.size() != 2 || wte_shape[0] == 0 ||
      wte_shape[1] == 0 || wpe_shape[0] == 0 || wpe_shape[1] != wte_shape[1] ||
      wte_shape[0] > (size_t{1} << 24) || wte_shape[1] > (size_t{1} << 16) ||
      wpe_shape[0] > (size_t{1} << 20))
    throw Error("'" + path + "': wte has shape " + shape_str(wte_shape) + " and wpe " +
                shape_str(wpe_shape) +
                "; expected (vocab_size, d_model) and (n_ctx, d_model), all >= 1 (vocab_size <= "
                "2^24, d_model <= 2^16, n_ctx <= 2^20)");
  // The shapes come from the tensors; the stored config's shape keys are replaced (never parsed),
  // so a model smaller than config validation allows (vocab_size < 256) loads. d_model is the
  // tensors' own, so the check that model.n_head divides it sees the real width.
  Config cfg = parse_config(ini, "the config stored in '" + path + "'",
                            {"--model.vocab_size=256",
                             "--model.d_model=" + std::to_string(wte_shape[1]),
                             "--model.n_ctx=1", "--data.seq_len=1"});
  cfg.model.vocab_size = wte_shape[0];
  cfg.model.d_model = wte_shape[1];
  cfg.model.n_ctx = wpe_shape[0];
  cfg.data.seq_len = std::min(cfg.data.seq_len, cfg.model.n_ctx);
  // wte's storage is checked against the file before the model is allocated.
  {
    std::vector<float> probe;
    hdf5::Id ds = hdf5::open_dataset(root.get(), "wte", what);
    hsize_t file_size = 0;
    H5Fget_filesize(file.get(), &file_size);
    if (static_cast<double>(wte_shape[0]) * static_cast<double>(wte_shape[1]) * 4.0 >
        1024.0 * static_cast<double>(file_size))
      throw Error("'" + path + "': dataset 'wte' claims " + shape_str(wte_shape) +
                  " float32 values in a file of " + std::to_string(file_size) + " bytes (corrupt?)");
  }
  auto model = std::make_unique<Model>(cfg.model);
  for (const TensorSpec& t : model->tensors())
    read_tensor(root.get(), t.name, t.shape, model->param_data() + t.offset, path);
  check_datasets_explained(root.get(), model->tensors(), cfg.model.tie_embeddings, path);
  if (config_out != nullptr) *config_out = cfg;
  return model;
}

double configured_ln_eps(float ln_eps) {
  // config.ini holds model.ln_eps as the shortest decimal that reads back as this float32 (what a
  // user writes: 1e-5, 1e-6, 3e-5, ...); that decimal read as a double is the configured value.
  char text[32];
  const auto r = std::to_chars(text, text + sizeof text - 1, ln_eps);
  *r.ptr = '\0';
  return std::strtod(text, nullptr);
}

ref::ModelParams<double> reference_params(const Model& model) {
  const ModelConfig& cfg = model.config();
  ref::ModelParams<double> p(cfg.vocab_size, cfg.d_model, cfg.n_ctx, cfg.ln_f,
                             configured_ln_eps(cfg.ln_eps), cfg.n_layer, cfg.n_head);
  if (!cfg.tie_embeddings) p.lm_head.assign(cfg.vocab_size * cfg.d_model, 0.0);
  auto named = ref::named_tensors(p);
  for (const TensorSpec& t : model.tensors()) {
    std::vector<double>* dst = nullptr;
    for (auto& nt : named)
      if (nt.name == t.name) dst = nt.data;
    if (dst == nullptr || dst->size() != t.size)
      throw Error("the double reference model has no tensor '" + t.name + "' of " +
                  std::to_string(t.size) + " entries (it has wte, wpe, ln_f/g, ln_f/b, lm_head "
                  "and h{l}/... for n_layer=" + std::to_string(cfg.n_layer) + " blocks)");
    const float* src = model.param_data() + t.offset;
    dst->assign(src, src + t.size);
  }
  return p;
}

std::vector<float> dense_gradient(Model& model, const TensorSpec& t) {
  if (!t.sparse_grad)
    return std::vector<float>(model.grad_data() + t.offset, model.grad_data() + t.offset + t.size);
  std::vector<float> dense(t.size, 0.0f);
  const SparseRowGrad rows = model.wte_grad_rows();
  for (size_t k = 0; k < rows.count; ++k)
    std::copy(rows.rows + k * rows.C, rows.rows + (k + 1) * rows.C,
              dense.begin() + static_cast<size_t>(rows.ids[k]) * rows.C);
  return dense;
}

// ------------------------------------------------------------------------------------------------
// Finite differences

namespace {

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", v);
  return buf;
}

std::string entry_name(const std::string& name, size_t index, size_t width, bool matrix) {
  if (!matrix) return name + "[" + std::to_string(index) + "]";
  return name + "[" + std::to_string(index / width) + "," + std::to_string(index % width) + "]";
}

// Central differences of model_loss(p) with respect to `theta` (one tensor of p), at the entries of
// `rows` (each row `width` entries). must_be_zero(row): the loss does not read that row, so both
// values must be exactly 0.
CheckLine fd_tensor(ref::ModelParams<double>& p, std::vector<double>& theta,
                    const std::vector<double>& analytic, const std::vector<size_t>& rows,
                    size_t width, bool matrix, const std::function<bool(size_t)>& must_be_zero,
                    const std::string& name, const TokenBatch& batch,
                    const GradcheckOptions& opt) {
  CheckLine line;
  line.check = "fd";
  line.name = name;
  double worst_ratio = -1;
  for (size_t r : rows) {
    const bool zero = must_be_zero(r);
    for (size_t c = 0; c < width; ++c) {
      const size_t i = r * width + c;
      const double saved = theta[i];
      theta[i] = saved + opt.eps;
      const double up = ref::model_loss(p, batch.inputs.data(), batch.targets.data(), batch.B,
                                        batch.T);
      theta[i] = saved - opt.eps;
      const double down = ref::model_loss(p, batch.inputs.data(), batch.targets.data(), batch.B,
                                          batch.T);
      theta[i] = saved;
      const double numeric = (up - down) / (2 * opt.eps);
      const double a = analytic[i];
      const double err = std::fabs(a - numeric);
      const double scale = std::max(std::fabs(a), std::fabs(numeric));
      const double rel = scale > 0 ? err / scale : (err == 0 ? 0 : INFINITY);
      ++line.entries;
      bool pass;
      double ratio;
      if (zero) {
        ++line.exact_zero;
        pass = a == 0.0 && numeric == 0.0;
        ratio = pass ? 0 : INFINITY;
      } else {
        const double bound = opt.atol + opt.rtol * std::fabs(numeric);
        pass = err <= bound;  // NaN fails
        ratio = std::isnan(err) ? INFINITY : err / bound;
      }
      line.max_abs_err = std::max(line.max_abs_err, std::isnan(err) ? INFINITY : err);
      line.max_rel_err = std::max(line.max_rel_err, std::isnan(rel) ? INFINITY : rel);
      line.max_ref = std::max(line.max_ref, std::fabs(numeric));
      if (!pass) ++line.failures;
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        line.worst = entry_name(name.substr(0, name.find(':')), i, width, matrix) + ": analytic " +
                     fmt(a) + " numeric " + fmt(numeric) + (zero ? " (must be exactly 0)" : "");
      }
    }
  }
  return line;
}

std::vector<size_t> iota_rows(size_t n) {
  std::vector<size_t> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = i;
  return r;
}

// The rows of wte (and of an untied lm_head) the finite differences visit: the one selection that
// finite_difference_check and finite_difference_entries share.
struct FdRows {
  std::set<size_t> touched;      // the rows the batch looks up
  size_t sampled = 0;            // rows outside the batch, sampled
  std::vector<size_t> wte;       // touched and sampled rows, ascending
  std::vector<size_t> lm_head;   // untied: the wte rows and every target row, ascending
};

FdRows fd_rows(const ref::ModelParams<double>& p, const TokenBatch& batch,
               const GradcheckOptions& opt) {
  FdRows r;
  r.touched.insert(batch.inputs.begin(), batch.inputs.end());
  std::vector<size_t> untouched;
  for (size_t v = 0; v < p.V; ++v)
    if (!r.touched.count(v)) untouched.push_back(v);
  // A sample of the untouched rows: a partial Fisher-Yates shuffle from Rng(seed).
  Rng rng(opt.seed);
  r.sampled = std::min(opt.untouched_rows, untouched.size());
  for (size_t i = 0; i < r.sampled; ++i)
    std::swap(untouched[i], untouched[i + rng.below(untouched.size() - i)]);
  untouched.resize(r.sampled);
  r.wte.assign(r.touched.begin(), r.touched.end());
  r.wte.insert(r.wte.end(), untouched.begin(), untouched.end());
  std::sort(r.wte.begin(), r.wte.end());
  if (!p.tied()) {
    std::set<size_t> rows(r.wte.begin(), r.wte.end());
    rows.insert(batch.targets.begin(), batch.targets.end());
    r.lm_head.assign(rows.begin(), rows.end());
  }
  return r;
}

}  // namespace

size_t finite_difference_entries(const ref::ModelParams<double>& params, const TokenBatch& batch,
                                 const GradcheckOptions& opt) {
  const FdRows rows = fd_rows(params, batch, opt);
  const size_t C = params.C;
  // wte (three lines when tied: wte, wte:lookup, wte:unembedding), lm_head, wpe, ln_f/g, ln_f/b.
  size_t n = rows.wte.size() * C * (params.tied() ? 3 : 1) + rows.lm_head.size() * C +
             params.n_ctx * C + 2 * C;
  for (const auto& t : ref::named_tensors(params))  // every entry of every block tensor
    if (t.name[0] == 'h') n += t.data->size();
  return n;
}

std::vector<CheckLine> finite_difference_check(const ref::ModelParams<double>& params,
                                               const TokenBatch& batch,
                                               const GradcheckOptions& opt) {
  ref::check_model_inputs(params, batch.inputs.data(), batch.targets.data(), batch.B, batch.T);
  const size_t V = params.V, C = params.C;
  const FdRows fd = fd_rows(params, batch, opt);  // also counted by finite_difference_entries
  const std::set<size_t>& touched = fd.touched;
  const std::vector<size_t>& wte_rows = fd.wte;
  const std::string rows_detail = std::to_string(touched.size()) + " rows in the batch, " +
                                  std::to_string(fd.sampled) + " of " +
                                  std::to_string(V - touched.size()) + " rows outside it";
  auto outside = [&](size_t row) { return touched.count(row) == 0; };
  auto never = [](size_t) { return false; };

  std::vector<CheckLine> lines;
  ref::ModelParams<double> p = params;
  ref::ModelGrads<double> g;
  ref::model_forward_backward(p, batch.inputs.data(), batch.targets.data(), batch.B, batch.T, &g);

  if (p.tied()) {
    lines.push_back(fd_tensor(p, p.wte, g.wte, wte_rows, C, true, never, "wte", batch, opt));
    lines.back().detail = rows_detail;
    // The two paths of the tied sum: the untied model at lm_head = wte.
    ref::ModelParams<double> u = params;
    u.lm_head = u.wte;
    ref::ModelGrads<double> gu;
    ref::model_forward_backward(u, batch.inputs.data(), batch.targets.data(), batch.B, batch.T,
                                &gu);
    lines.push_back(
        fd_tensor(u, u.wte, gu.wte, wte_rows, C, true, outside, "wte:lookup", batch, opt));
    lines.back().detail = rows_detail + "; rows outside: exactly 0";
    lines.push_back(fd_tensor(u, u.lm_head, gu.lm_head, wte_rows, C, true, never,
                              "wte:unembedding", batch, opt));
    lines.back().detail = rows_detail;
  } else {
    lines.push_back(fd_tensor(p, p.wte, g.wte, wte_rows, C, true, outside, "wte", batch, opt));
    lines.back().detail = rows_detail + " (lookup only): rows outside exactly 0";
  }
  lines.push_back(fd_tensor(p, p.wpe, g.wpe, iota_rows(p.n_ctx), C, true,
                            [&](size_t row) { return row >= batch.T; }, "wpe", batch, opt));
  lines.back().detail = "every position row" +
                        (p.n_ctx > batch.T ? "; rows >= T=" + std::to_string(batch.T) +
                                                 ": exactly 0"
                                           : std::string());
  const bool ln_f = p.ln_f;
  auto ln_zero = [ln_f](size_t) { return !ln_f; };
  lines.push_back(fd_tensor(p, p.ln_f_g, g.ln_f_g, iota_rows(C), 1, false, ln_zero, "ln_f/g",
                            batch, opt));
  lines.back().detail = ln_f ? "every entry" : "every entry; ln_f off: exactly 0";
  lines.push_back(fd_tensor(p, p.ln_f_b, g.ln_f_b, iota_rows(C), 1, false, ln_zero, "ln_f/b",
                            batch, opt));
  lines.back().detail = lines[lines.size() - 2].detail;
  if (!p.tied()) {
    lines.push_back(fd_tensor(p, p.lm_head, g.lm_head, fd.lm_head, C, true, never, "lm_head",
                              batch, opt));
    lines.back().detail = "the wte rows above and every target row";
  }
  // Every entry of every block tensor, in arena order (h0/ln_1/g ... h{L-1}/mlp/c_proj/b).
  auto p_named = ref::named_tensors(p);
  auto g_named = ref::named_tensors(g);
  for (size_t k = 0; k < p_named.size(); ++k) {
    const std::string& name = p_named[k].name;
    if (name[0] != 'h') continue;
    // Linear weights (in, out): rows are inputs (4C for mlp/c_proj/w, else C); the rest are vectors.
    const size_t size = p_named[k].data->size();
    const bool matrix = name.size() > 2 && name.compare(name.size() - 2, 2, "/w") == 0;
    const size_t width =
        matrix ? size / (name.find("mlp/c_proj/w") != std::string::npos ? 4 * C : C) : size;
    lines.push_back(fd_tensor(p, *p_named[k].data, *g_named[k].data, iota_rows(size / width),
                              width, matrix, never, name, batch, opt));
    lines.back().detail = "every entry";
  }
  return lines;
}

// ------------------------------------------------------------------------------------------------
// float32 model vs the double reference

namespace {

CheckLine compare(const std::string& name, const float* actual, const double* expected, size_t n,
                  size_t width, const GradcheckOptions& opt) {
  CheckLine line;
  line.check = "f32";
  line.name = name;
  line.entries = n;
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    line.max_ref = std::max(line.max_ref, std::fabs(expected[i]));
    double err = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    if (std::isnan(err)) err = INFINITY;
    if (err > line.max_abs_err) {
      line.max_abs_err = err;
      at = i;
    }
  }
  line.max_rel_err = line.max_ref > 0 ? line.max_abs_err / line.max_ref
                                      : (line.max_abs_err == 0 ? 0 : INFINITY);
  const double bound = opt.f32_atol + opt.f32_rtol * line.max_ref;
  if (!(line.max_abs_err <= bound)) line.failures = 1;
  if (n > 0)
    line.worst = entry_name(name, at, width, width > 1 && n > width) + ": float32 " +
                 fmt(actual[at]) + " reference " + fmt(expected[at]);
  line.detail = "bound " + fmt(bound);
  return line;
}

}  // namespace

std::vector<CheckLine> compare_float_model(Model& model, const TokenBatch& batch,
                                           const GradcheckOptions& opt) {
  const ref::ModelParams<double> p = reference_params(model);
  ref::ModelGrads<double> g;
  ref::ModelActivations<double> act;
  const double ref_loss = ref::model_forward_backward(p, batch.inputs.data(), batch.targets.data(),
                                                      batch.B, batch.T, &g, &act);
  const size_t N = batch.B * batch.T, V = p.V;
  const float* logits_ptr = model.forward_logits(batch.inputs.data(), batch.B, batch.T);
  const std::vector<float> logits(logits_ptr, logits_ptr + N * V);
  model.zero_grad();  // the gradient adds up (the fused loss adds in forward): this batch's alone
  const float loss = model.forward(batch.inputs.data(), batch.targets.data(), batch.B, batch.T);
  std::vector<std::vector<float>> residual;  // after each block, copied before backward runs
  for (size_t l = 1; l <= p.n_layer(); ++l)
    residual.emplace_back(model.residual(l), model.residual(l) + N * p.C);
  model.backward();

  std::vector<CheckLine> lines;
  lines.push_back(compare("loss", &loss, &ref_loss, 1, 1, opt));
  lines.push_back(compare("logits", logits.data(), act.logits.data(), N * V, V, opt));
  // The residual stream after each block (residual(0) is the lookup, exact on both sides).
  for (size_t l = 1; l <= p.n_layer(); ++l)
    lines.push_back(compare("residual(" + std::to_string(l) + ")", residual[l - 1].data(),
                            act.residual[l].data(), N * p.C, p.C, opt));
  auto named = ref::named_tensors(g);
  for (const TensorSpec& t : model.tensors()) {
    const std::vector<double>* expected = nullptr;
    for (const auto& nt : named)
      if (t.name == nt.name) expected = nt.data;
    if (expected == nullptr || expected->size() != t.size)
      throw Error("the double reference has no gradient '" + t.name + "' of size " +
                  std::to_string(t.size));
    const size_t width = t.shape.size() == 2 ? t.shape[1] : 1;
    const std::vector<float> actual = dense_gradient(model, t);
    lines.push_back(compare(t.name, actual.data(), expected->data(), t.size, width, opt));
  }
  return lines;
}

std::string format_check_line(const CheckLine& l) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-4s %-16s entries %6zu  max_abs %-10.3g max_rel %-10.3g %s",
                l.check.c_str(), l.name.c_str(), l.entries, l.max_abs_err, l.max_rel_err,
                l.ok() ? "ok  " : "FAIL");
  std::string s = buf;
  if (!l.detail.empty()) s += "  (" + l.detail + ")";
  if (!l.ok())
    s += "\n         " + std::to_string(l.failures) + (l.check == "fd" ? " entries" : " tensor") +
         " past the tolerance; worst " + l.worst;
  return s;
}

}  // namespace wte
