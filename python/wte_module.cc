// wte._wte: the pybind11 extension behind `import wte` (python/wte/__init__.py re-exports it).
//
// Kernels work on numpy arrays in place, without copies: every array argument must already be a
// numpy.ndarray of the exact dtype (float32 tables and gradients, int32 ids), C-contiguous, with the
// documented shape, and writeable where the kernel writes. Anything else raises before any work:
//   TypeError   not an ndarray, or the wrong dtype            ("table: dtype float64, need float32")
//   ValueError  wrong shape, not C-contiguous, read-only, overlapping arrays
//   IndexError  an id outside [0, V)                          ("ids[3] = 50257 is outside [0, 50257)")
//   wte.Error   (a ValueError) from the library: bad files, bad tokenizer ids
// Each message starts with the argument's name. The GIL is released while a kernel runs; kernels
// use OpenMP threads (wte.set_num_threads, or OMP_NUM_THREADS).
#include <omp.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/error.h"
#include "wte/kernels.h"
#include "wte/model.h"
#include "wte/tokenizer.h"

namespace py = pybind11;

namespace {

// ---- argument checks ---------------------------------------------------------------------------

enum class Kind { kFloat32, kInt32 };

const char* kind_name(Kind k) { return k == Kind::kFloat32 ? "float32" : "int32"; }

std::string shape_str(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    if (i) s += ", ";
    s += std::to_string(a.shape(i));
  }
  return s + (a.ndim() == 1 ? ",)" : ")");
}

// The ndarray `obj` as argument `name`: exact dtype, C-contiguous, writeable if `writable`, and
// `ndim` dimensions (-1: any). Never converts or copies.
py::array check_array(const py::handle& obj, const char* name, Kind kind, int ndim, bool writable) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(std::string(name) + ": need a numpy.ndarray of " + kind_name(kind) +
                         ", got " + std::string(py::str(py::type::of(obj).attr("__name__"))));
  py::array a = py::reinterpret_borrow<py::array>(obj);
  const bool dtype_ok = kind == Kind::kFloat32 ? a.dtype().is(py::dtype::of<float>())
                                               : a.dtype().is(py::dtype::of<int32_t>());
  if (!dtype_ok)
    throw py::type_error(std::string(name) + ": dtype " + std::string(py::str(a.dtype())) +
                         ", need " + kind_name(kind) + " (convert with .astype(numpy." +
                         kind_name(kind) + "))");
  if (ndim >= 0 && a.ndim() != ndim)
    throw py::value_error(std::string(name) + ": shape " + shape_str(a) + " has " +
                          std::to_string(a.ndim()) + " dimensions, need " + std::to_string(ndim));
  if (!(a.flags() & py::array::c_style))
    throw py::value_error(std::string(name) + ": not C-contiguous (shape " + shape_str(a) +
                          "); pass numpy.ascontiguousarray(" + name + ")");
  if (writable && !a.writeable())
    throw py::value_error(std::string(name) + ": read-only array; the kernel writes into it");
  return a;
}

float* fptr(py::array& a) { return static_cast<float*>(a.mutable_data()); }
const float* cfptr(const py::array& a) { return static_cast<const float*>(a.data()); }
const int32_t* iptr(const py::array& a) { return static_cast<const int32_t*>(a.data()); }

void check_dim(const py::array& a, const char* name, int axis, size_t want, const char* what) {
  if (static_cast<size_t>(a.shape(axis)) != want)
    throw py::value_error(std::string(name) + ": shape " + shape_str(a) + ", need " + what + " = " +
                          std::to_string(want) + " in dimension " + std::to_string(axis));
}

// Every id in [0, V); IndexError naming the first one that is not.
void check_ids(const py::array& ids, const char* name, size_t V, const char* table) {
  const int32_t* p = iptr(ids);
  const size_t n = static_cast<size_t>(ids.size());
  for (size_t i = 0; i < n; ++i) {
    if (p[i] < 0 || static_cast<size_t>(p[i]) >= V)
      throw py::index_error(std::string(name) + "[" + std::to_string(i) + "] = " +
                            std::to_string(p[i]) + " is outside [0, " + std::to_string(V) +
                            "), the rows of " + table);
  }
}

// Output and input memory must not overlap (the kernels assume restrict).
void check_disjoint(const py::array& a, const char* a_name, const py::array& b, const char* b_name) {
  const char* a0 = static_cast<const char*>(a.data());
  const char* b0 = static_cast<const char*>(b.data());
  const char* a1 = a0 + a.nbytes();
  const char* b1 = b0 + b.nbytes();
  if (a.nbytes() > 0 && b.nbytes() > 0 && a0 < b1 && b0 < a1)
    throw py::value_error(std::string(a_name) + " and " + b_name + " overlap in memory");
}

size_t rows_of(const py::array& a, size_t C) {  // a (..., C) seen as (N, C)
  return C == 0 ? 0 : static_cast<size_t>(a.size()) / C;
}

wte::ScatterWorkspace& workspace() {
  thread_local wte::ScatterWorkspace ws;  // sort buffers reused across calls, one per thread
  return ws;
}

wte::AdamWParams adamw_params(float lr, std::pair<float, float> betas, float eps,
                              float weight_decay, int64_t step) {
  if (step < 1) throw py::value_error("step: " + std::to_string(step) + ", need >= 1 (1-based)");
  if (!(lr >= 0.0f)) throw py::value_error("lr: " + std::to_string(lr) + ", need >= 0");
  if (!(betas.first >= 0.0f && betas.first < 1.0f && betas.second >= 0.0f && betas.second < 1.0f))
    throw py::value_error("betas: need both in [0, 1)");
  if (!(eps > 0.0f)) throw py::value_error("eps: " + std::to_string(eps) + ", need > 0");
  return wte::AdamWParams{lr, betas.first, betas.second, eps, weight_decay, step};
}

// A (V, C) float32 table argument; returns (V, C).
std::pair<size_t, size_t> table_shape(const py::array& t) {
  return {static_cast<size_t>(t.shape(0)), static_cast<size_t>(t.shape(1))};
}

// ---- kernels -----------------------------------------------------------------------------------

py::array gather(const py::object& table_obj, const py::object& ids_obj, const py::object& out_obj) {
  py::array table = check_array(table_obj, "table", Kind::kFloat32, 2, false);
  py::array ids = check_array(ids_obj, "ids", Kind::kInt32, -1, false);
  const auto [V, C] = table_shape(table);
  check_ids(ids, "ids", V, "table");
  std::vector<py::ssize_t> out_shape(ids.shape(), ids.shape() + ids.ndim());
  out_shape.push_back(static_cast<py::ssize_t>(C));
  py::array out;
  if (out_obj.is_none()) {
    out = py::array(py::dtype::of<float>(), out_shape);
  } else {
    out = check_array(out_obj, "out", Kind::kFloat32, static_cast<int>(out_shape.size()), true);
    for (size_t i = 0; i < out_shape.size(); ++i)
      if (out.shape(static_cast<py::ssize_t>(i)) != out_shape[i])
        throw py::value_error("out: shape " + shape_str(out) + ", need ids.shape + (C,)");
    check_disjoint(out, "out", table, "table");
  }
  const size_t N = static_cast<size_t>(ids.size());
  {
    py::gil_scoped_release release;
    wte::embedding_gather(fptr(out), iptr(ids), cfptr(table), N, C);
  }
  return out;
}

py::array embedding_forward(const py::object& ids_obj, const py::object& wte_obj,
                            const py::object& wpe_obj, const py::object& out_obj) {
  py::array ids = check_array(ids_obj, "ids", Kind::kInt32, 2, false);
  py::array wte = check_array(wte_obj, "wte", Kind::kFloat32, 2, false);
  py::array wpe = check_array(wpe_obj, "wpe", Kind::kFloat32, 2, false);
  const auto [V, C] = table_shape(wte);
  const size_t B = static_cast<size_t>(ids.shape(0)), T = static_cast<size_t>(ids.shape(1));
  check_dim(wpe, "wpe", 1, C, "d_model");
  if (static_cast<size_t>(wpe.shape(0)) < T)
    throw py::value_error("wpe: " + std::to_string(wpe.shape(0)) + " position rows, need >= T = " +
                          std::to_string(T) + " (ids.shape[1])");
  check_ids(ids, "ids", V, "wte");
  py::array out;
  if (out_obj.is_none()) {
    out = py::array(py::dtype::of<float>(), std::vector<py::ssize_t>{ids.shape(0), ids.shape(1),
                                                                    static_cast<py::ssize_t>(C)});
  } else {
    out = check_array(out_obj, "out", Kind::kFloat32, 3, true);
    check_dim(out, "out", 0, B, "B");
    check_dim(out, "out", 1, T, "T");
    check_dim(out, "out", 2, C, "d_model");
    check_disjoint(out, "out", wte, "wte");
    check_disjoint(out, "out", wpe, "wpe");
  }
  {
    py::gil_scoped_release release;
    wte::embedding_forward(fptr(out), iptr(ids), cfptr(wte), cfptr(wpe), B, T, C);
  }
  return out;
}

wte::ScatterStrategy strategy_of(const std::string& name) {
  wte::ScatterStrategy s;
  if (!wte::parse_scatter_strategy(name.c_str(), &s))
    throw py::value_error("strategy: '" + name +
                          "' is not one of auto, serial, sorted, row-range, private-hot");
  return s;
}

// dtable[ids[n]] += dout[n]. dout (..., C) with ids.size rows.
void scatter(const py::object& dtable_obj, const py::object& dout_obj, const py::object& ids_obj,
             const std::string& strategy_name) {
  const wte::ScatterStrategy strategy = strategy_of(strategy_name);
  py::array dtable = check_array(dtable_obj, "dtable", Kind::kFloat32, 2, true);
  py::array dout = check_array(dout_obj, "dout", Kind::kFloat32, -1, false);
  py::array ids = check_array(ids_obj, "ids", Kind::kInt32, -1, false);
  const auto [V, C] = table_shape(dtable);
  const size_t N = static_cast<size_t>(ids.size());
  if (dout.ndim() < 1 || static_cast<size_t>(dout.shape(dout.ndim() - 1)) != C ||
      rows_of(dout, C) != N)
    throw py::value_error("dout: shape " + shape_str(dout) + ", need ids.shape + (C,) = " +
                          std::to_string(N) + " rows of " + std::to_string(C));
  check_ids(ids, "ids", V, "dtable");
  check_disjoint(dtable, "dtable", dout, "dout");
  {
    py::gil_scoped_release release;
    wte::embedding_backward_wte_strategy(strategy, fptr(dtable), cfptr(dout), iptr(ids), N, C, V,
                                         &workspace());
  }
}

void scatter_wpe(const py::object& dwpe_obj, const py::object& dout_obj) {
  py::array dwpe = check_array(dwpe_obj, "dwpe", Kind::kFloat32, 2, true);
  py::array dout = check_array(dout_obj, "dout", Kind::kFloat32, 3, false);
  const size_t B = static_cast<size_t>(dout.shape(0)), T = static_cast<size_t>(dout.shape(1)),
               C = static_cast<size_t>(dout.shape(2));
  check_dim(dwpe, "dwpe", 1, C, "d_model");
  if (static_cast<size_t>(dwpe.shape(0)) < T)
    throw py::value_error("dwpe: " + std::to_string(dwpe.shape(0)) + " rows, need >= T = " +
                          std::to_string(T));
  check_disjoint(dwpe, "dwpe", dout, "dout");
  py::gil_scoped_release release;
  wte::embedding_backward_wpe(fptr(dwpe), cfptr(dout), B, T, C);
}

// (grad_rows (K, C), touched (K,) int32): the touched rows' gradient sums, ids increasing.
py::tuple backward_rows(const py::object& dout_obj, const py::object& ids_obj, size_t V) {
  py::array dout = check_array(dout_obj, "dout", Kind::kFloat32, -1, false);
  py::array ids = check_array(ids_obj, "ids", Kind::kInt32, -1, false);
  const size_t N = static_cast<size_t>(ids.size());
  if (dout.ndim() < 1) throw py::value_error("dout: need at least one dimension (C)");
  const size_t C = static_cast<size_t>(dout.shape(dout.ndim() - 1));
  if (rows_of(dout, C) != N)
    throw py::value_error("dout: shape " + shape_str(dout) + ", need ids.shape + (C,)");
  check_ids(ids, "ids", V, "the table (num_embeddings)");
  const size_t cap = std::min(N, V);
  std::vector<float> rows(cap * C);
  std::vector<int32_t> touched(cap);
  size_t k = 0;
  {
    py::gil_scoped_release release;
    wte::embedding_backward_rows(rows.data(), touched.data(), &k, cfptr(dout), iptr(ids), N, C, V,
                                 &workspace());
  }
  py::array_t<float> grad_rows({static_cast<py::ssize_t>(k), static_cast<py::ssize_t>(C)});
  py::array_t<int32_t> ids_out(static_cast<py::ssize_t>(k));
  if (k) {
    std::memcpy(grad_rows.mutable_data(), rows.data(), k * C * sizeof(float));
    std::memcpy(ids_out.mutable_data(), touched.data(), k * sizeof(int32_t));
  }
  return py::make_tuple(grad_rows, ids_out);
}

// params, m, v: (V, C) float32, writable, same shape, disjoint.
std::pair<size_t, size_t> check_moments(py::array& params, py::array& m, py::array& v) {
  const auto [V, C] = table_shape(params);
  for (auto* p : {&m, &v}) {
    const char* name = p == &m ? "m" : "v";
    check_dim(*p, name, 0, V, "params.shape[0]");
    check_dim(*p, name, 1, C, "params.shape[1]");
  }
  check_disjoint(params, "params", m, "m");
  check_disjoint(params, "params", v, "v");
  check_disjoint(m, "m", v, "v");
  return {V, C};
}

void adamw_update_rows(const py::object& params_obj, const py::object& m_obj,
                       const py::object& v_obj, const py::object& grad_rows_obj,
                       const py::object& rows_obj, float lr, std::pair<float, float> betas,
                       float eps, float weight_decay, int64_t step) {
  const wte::AdamWParams hp = adamw_params(lr, betas, eps, weight_decay, step);
  py::array params = check_array(params_obj, "params", Kind::kFloat32, 2, true);
  py::array m = check_array(m_obj, "m", Kind::kFloat32, 2, true);
  py::array v = check_array(v_obj, "v", Kind::kFloat32, 2, true);
  py::array grad_rows = check_array(grad_rows_obj, "grad_rows", Kind::kFloat32, 2, false);
  py::array rows = check_array(rows_obj, "rows", Kind::kInt32, 1, false);
  const auto [V, C] = check_moments(params, m, v);
  const size_t K = static_cast<size_t>(rows.size());
  check_dim(grad_rows, "grad_rows", 0, K, "len(rows)");
  check_dim(grad_rows, "grad_rows", 1, C, "params.shape[1]");
  check_ids(rows, "rows", V, "params");
  {  // rows must be distinct (two updates of one row would race)
    std::vector<bool> seen(V, false);
    for (size_t k = 0; k < K; ++k) {
      const size_t r = static_cast<size_t>(iptr(rows)[k]);
      if (seen[r])
        throw py::value_error("rows[" + std::to_string(k) + "] = " + std::to_string(r) +
                              " repeats an earlier row; rows must be distinct");
      seen[r] = true;
    }
  }
  py::gil_scoped_release release;
  wte::adamw_update_rows(fptr(params), fptr(m), fptr(v), cfptr(grad_rows), iptr(rows), K, C, hp);
}

void adamw_lazy(const py::object& params_obj, const py::object& m_obj, const py::object& v_obj,
                const py::object& dout_obj, const py::object& ids_obj, float lr,
                std::pair<float, float> betas, float eps, float weight_decay, int64_t step) {
  const wte::AdamWParams hp = adamw_params(lr, betas, eps, weight_decay, step);
  py::array params = check_array(params_obj, "params", Kind::kFloat32, 2, true);
  py::array m = check_array(m_obj, "m", Kind::kFloat32, 2, true);
  py::array v = check_array(v_obj, "v", Kind::kFloat32, 2, true);
  py::array dout = check_array(dout_obj, "dout", Kind::kFloat32, -1, false);
  py::array ids = check_array(ids_obj, "ids", Kind::kInt32, -1, false);
  const auto [V, C] = check_moments(params, m, v);
  const size_t N = static_cast<size_t>(ids.size());
  if (dout.ndim() < 1 || static_cast<size_t>(dout.shape(dout.ndim() - 1)) != C ||
      rows_of(dout, C) != N)
    throw py::value_error("dout: shape " + shape_str(dout) + ", need ids.shape + (C,) with C = " +
                          std::to_string(C));
  check_ids(ids, "ids", V, "params");
  check_disjoint(params, "params", dout, "dout");
  py::gil_scoped_release release;
  wte::embedding_backward_adamw_lazy(fptr(params), fptr(m), fptr(v), cfptr(dout), iptr(ids), N, C,
                                     V, hp, &workspace());
}

void adamw(const py::object& params_obj, const py::object& grads_obj, const py::object& m_obj,
           const py::object& v_obj, float lr, std::pair<float, float> betas, float eps,
           float weight_decay, int64_t step) {
  const wte::AdamWParams hp = adamw_params(lr, betas, eps, weight_decay, step);
  py::array params = check_array(params_obj, "params", Kind::kFloat32, -1, true);
  py::array grads = check_array(grads_obj, "grads", Kind::kFloat32, -1, false);
  py::array m = check_array(m_obj, "m", Kind::kFloat32, -1, true);
  py::array v = check_array(v_obj, "v", Kind::kFloat32, -1, true);
  const py::ssize_t n = params.size();
  for (auto [a, name] : {std::pair<py::array*, const char*>{&grads, "grads"}, {&m, "m"}, {&v, "v"}})
    if (a->size() != n)
      throw py::value_error(std::string(name) + ": " + std::to_string(a->size()) +
                            " elements, need params.size = " + std::to_string(n));
  check_disjoint(params, "params", m, "m");
  check_disjoint(params, "params", v, "v");
  check_disjoint(m, "m", v, "v");
  py::gil_scoped_release release;
  wte::adamw_update(fptr(params), cfptr(grads), fptr(m), fptr(v), static_cast<size_t>(n), hp);
}

// In place: logits (N, V) become dlogits; returns the per-row losses (N,).
py::array softmax_cross_entropy(const py::object& logits_obj, const py::object& targets_obj,
                                float grad_scale) {
  py::array logits = check_array(logits_obj, "logits", Kind::kFloat32, 2, true);
  py::array targets = check_array(targets_obj, "targets", Kind::kInt32, 1, false);
  const size_t N = static_cast<size_t>(logits.shape(0)), V = static_cast<size_t>(logits.shape(1));
  check_dim(targets, "targets", 0, N, "logits.shape[0]");
  check_ids(targets, "targets", V, "logits (its columns)");
  py::array_t<float> losses(static_cast<py::ssize_t>(N));
  {
    py::gil_scoped_release release;
    wte::softmax_cross_entropy(fptr(logits), losses.mutable_data(), iptr(targets), N, V,
                               grad_scale);
  }
  return losses;
}

py::array cross_entropy_loss(const py::object& logits_obj, const py::object& targets_obj) {
  py::array logits = check_array(logits_obj, "logits", Kind::kFloat32, 2, false);
  py::array targets = check_array(targets_obj, "targets", Kind::kInt32, 1, false);
  const size_t N = static_cast<size_t>(logits.shape(0)), V = static_cast<size_t>(logits.shape(1));
  check_dim(targets, "targets", 0, N, "logits.shape[0]");
  check_ids(targets, "targets", V, "logits (its columns)");
  py::array_t<float> losses(static_cast<py::ssize_t>(N));
  {
    py::gil_scoped_release release;
    wte::cross_entropy_loss(losses.mutable_data(), cfptr(logits), iptr(targets), N, V);
  }
  return losses;
}

// ---- checkpoints -------------------------------------------------------------------------------

// (tensors: {name: ndarray}, config_ini, step, encoder_json, vocab_bpe). wte/__init__.py turns
// this into load_checkpoint's dict.
py::tuple load_checkpoint_raw(const std::string& path) {
  wte::CheckpointInfo info;
  std::unique_ptr<wte::Model> model;
  {
    py::gil_scoped_release release;
    wte::CheckpointModel ck = wte::load_checkpoint_model(path);
    info = std::move(ck.info);
    model = std::move(ck.model);
  }
  py::dict tensors;
  for (const wte::TensorSpec& t : model->tensors()) {
    std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
    py::array_t<float> a(shape);
    std::memcpy(a.mutable_data(), model->param_data() + t.offset, t.size * sizeof(float));
    tensors[py::str(t.name)] = a;
  }
  return py::make_tuple(tensors, info.config_ini, info.step, py::bytes(info.encoder_json),
                        py::bytes(info.vocab_bpe));
}

std::vector<int32_t> ids_of(const py::handle& ids_obj) {
  if (py::isinstance<py::array>(ids_obj)) {
    py::array a = py::reinterpret_borrow<py::array>(ids_obj);
    if (a.dtype().kind() != 'i' && a.dtype().kind() != 'u')
      throw py::type_error("ids: dtype " + std::string(py::str(a.dtype())) + ", need integers");
  }
  std::vector<int32_t> ids;
  for (const py::handle& h : ids_obj) {
    const long long x = h.cast<long long>();
    if (x < INT32_MIN || x > INT32_MAX)
      throw py::index_error("ids[" + std::to_string(ids.size()) + "] = " + std::to_string(x) +
                            " is not a token id");
    ids.push_back(static_cast<int32_t>(x));
  }
  return ids;
}

std::string text_bytes(const py::handle& text) {
  if (py::isinstance<py::bytes>(text)) return text.cast<std::string>();
  if (py::isinstance<py::str>(text)) return text.cast<std::string>();  // UTF-8
  throw py::type_error("text: need str or bytes, got " +
                       std::string(py::str(py::type::of(text).attr("__name__"))));
}

}  // namespace

PYBIND11_MODULE(_wte, m) {
  m.doc() = "wte's kernels, checkpoints and tokenizer (see the wte package for the documentation)";
  py::register_exception<wte::Error>(m, "Error", PyExc_ValueError);

  const py::object none = py::none();
  m.def("gather", &gather, py::arg("table"), py::arg("ids"), py::arg("out") = none,
        "out[..., :] = table[ids[...], :]. table (V, C) float32; ids int32, any shape; out "
        "ids.shape + (C,) float32 (allocated if None). Returns out.");
  m.def("embedding_forward", &embedding_forward, py::arg("ids"), py::arg("wte"), py::arg("wpe"),
        py::arg("out") = none,
        "hidden_states[b, t] = wte[ids[b, t]] + wpe[t]. ids (B, T) int32; wte (V, C); wpe (>= T, C); "
        "out (B, T, C). Returns out.");
  m.def("scatter", &scatter, py::arg("dtable"), py::arg("dout"), py::arg("ids"),
        py::arg("strategy") = "auto",
        "dtable[ids[n]] += dout[n] (duplicates accumulate), in place. dtable (V, C) float32; dout "
        "ids.shape + (C,); strategy: auto, serial, sorted, row-range (deterministic for any thread "
        "count) or private-hot (deterministic for a fixed thread count).");
  m.def("scatter_wpe", &scatter_wpe, py::arg("dwpe"), py::arg("dout"),
        "dwpe[t] += sum_b dout[b, t], in place. dwpe (>= T, C); dout (B, T, C).");
  m.def("embedding_backward_rows", &backward_rows, py::arg("dout"), py::arg("ids"),
        py::arg("num_embeddings"),
        "Row-sparse lookup backward: returns (grad_rows (K, C), rows (K,) int32), the distinct ids "
        "in increasing order and each one's summed gradient.");
  m.def("adamw_update_rows", &adamw_update_rows, py::arg("params"), py::arg("m"), py::arg("v"),
        py::arg("grad_rows"), py::arg("rows"), py::kw_only(), py::arg("lr"),
        py::arg("betas") = std::pair<float, float>(0.9f, 0.999f), py::arg("eps") = 1e-8f,
        py::arg("weight_decay") = 0.0f, py::arg("step"),
        "Lazy AdamW on the listed rows of params/m/v (V, C), in place; other rows untouched. "
        "step is the global 1-based step (bias correction).");
  m.def("adamw_lazy", &adamw_lazy, py::arg("params"), py::arg("m"), py::arg("v"), py::arg("dout"),
        py::arg("ids"), py::kw_only(), py::arg("lr"),
        py::arg("betas") = std::pair<float, float>(0.9f, 0.999f), py::arg("eps") = 1e-8f,
        py::arg("weight_decay") = 0.0f, py::arg("step"),
        "Fused lookup backward + lazy AdamW of an untied table: the rows that ids touch get their "
        "summed gradient's AdamW update; no gradient is stored. Same bits as "
        "embedding_backward_rows followed by adamw_update_rows.");
  m.def("adamw", &adamw, py::arg("params"), py::arg("grads"), py::arg("m"), py::arg("v"),
        py::kw_only(), py::arg("lr"), py::arg("betas") = std::pair<float, float>(0.9f, 0.999f),
        py::arg("eps") = 1e-8f, py::arg("weight_decay") = 0.0f, py::arg("step"),
        "Dense AdamW (torch.optim.AdamW's formula), in place on float32 arrays of one size.");
  m.def("softmax_cross_entropy", &softmax_cross_entropy, py::arg("logits"), py::arg("targets"),
        py::arg("grad_scale") = 1.0f,
        "Per-row losses (N,); logits (N, V) are overwritten with grad_scale * (softmax - onehot).");
  m.def("cross_entropy_loss", &cross_entropy_loss, py::arg("logits"), py::arg("targets"),
        "Per-row losses (N,) of logits (N, V) and targets (N,) int32; logits unchanged.");
  m.def("scatter_strategies", [] {
    std::vector<std::string> names;
    for (auto s : {wte::ScatterStrategy::kAuto, wte::ScatterStrategy::kSerial,
                   wte::ScatterStrategy::kSorted, wte::ScatterStrategy::kRowRange,
                   wte::ScatterStrategy::kPrivateHot})
      names.emplace_back(wte::scatter_strategy_name(s));
    return names;
  });
  m.def("simd_target", [] { return std::string(hwy::TargetName(wte::simd_dispatch_target())); },
        "The Highway target dynamic dispatch picked on this CPU (e.g. AVX3).");
  m.def("set_num_threads", [](int n) {
    if (n < 1) throw py::value_error("n: " + std::to_string(n) + ", need >= 1");
    omp_set_num_threads(n);
  }, py::arg("n"), "OpenMP threads for the kernels (as OMP_NUM_THREADS).");
  m.def("get_num_threads", [] { return omp_get_max_threads(); });

  m.def("_load_checkpoint", &load_checkpoint_raw, py::arg("path"));

  py::class_<wte::Tokenizer>(m, "Tokenizer",
                             "GPT-2's byte-level BPE (include/wte/tokenizer.h). Tokenizer(dir) "
                             "loads dir/encoder.json and dir/vocab.bpe.")
      .def(py::init([](const std::string& dir) { return wte::Tokenizer::load(dir); }),
           py::arg("dir"))
      .def_static("from_strings",
                  [](const py::bytes& encoder_json, const py::bytes& vocab_bpe) {
                    return wte::Tokenizer::from_strings(encoder_json.cast<std::string>(),
                                                        vocab_bpe.cast<std::string>(), "strings");
                  },
                  py::arg("encoder_json"), py::arg("vocab_bpe"))
      .def("encode",
           [](const wte::Tokenizer& t, const py::object& text) { return t.encode(text_bytes(text)); },
           py::arg("text"), "Token ids (list of int) of a str (UTF-8) or bytes.")
      .def("decode_bytes",
           [](const wte::Tokenizer& t, const py::object& ids) {
             return py::bytes(t.decode(ids_of(ids)));
           },
           py::arg("ids"))
      .def("decode",
           [](const wte::Tokenizer& t, const py::object& ids) {
             const std::string s = t.decode(ids_of(ids));
             return py::reinterpret_steal<py::str>(
                 PyUnicode_DecodeUTF8(s.data(), static_cast<py::ssize_t>(s.size()), "replace"));
           },
           py::arg("ids"), "The text of ids (invalid UTF-8 replaced by U+FFFD; decode_bytes keeps it).")
      .def("piece", [](const wte::Tokenizer& t, int32_t id) { return py::bytes(t.piece(id)); },
           py::arg("id"))
      .def("id_of", [](const wte::Tokenizer& t, const py::object& b) { return t.id_of(text_bytes(b)); },
           py::arg("piece"))
      .def("__len__", &wte::Tokenizer::size)
      .def_property_readonly("vocab_size", &wte::Tokenizer::size);
}
