// wte._wte: the pybind11 extension behind `import wte` (python/wte/__init__.py re-exports it).
//
// Kernels work on numpy arrays in place: every array argument must already be a numpy.ndarray of
// the exact dtype (float32 tables and gradients, int32 ids), C-contiguous, with the documented
// shape, and writeable where the kernel writes. Only the ids (and rows, targets: every array a
// kernel indexes with) are copied, before the GIL is released, and the copy is checked and used:
// a thread changing the caller's arrays during a call changes at worst the result, never where a
// kernel reads or writes. An array the kernel writes (an output)
// must not share a byte with any other array argument, ids included. Hyper-parameters must be
// finite real numbers in their range, sizes and steps integers in theirs, paths free of NUL bytes.
// Anything else raises before any work:
//   TypeError   not an ndarray, the wrong dtype, not a number
//               ("gather: table has dtype float64, need float32")
//   ValueError  wrong shape, not C-contiguous, read-only, an output overlapping another argument
//               ("gather: out overlaps ids"), a value not finite or out of range
//               ("adamw: lr = inf is not finite"), a NUL byte in a path
//   IndexError  an id outside [0, V)  ("gather: ids[3] = 50257 is outside [0, 50257), ...")
//   MemoryError an output the call allocates larger than the memory available, naming the
//               argument that sizes it
//   wte.Error   (a ValueError) from the library: bad files, bad tokenizer ids
// Each message starts with the function and then the argument's name. The GIL is released while a
// kernel runs; kernels use OpenMP threads (wte.set_num_threads, or OMP_NUM_THREADS).
#include <omp.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hwy/targets.h"
#include "python/args.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/error.h"
#include "wte/kernels.h"
#include "wte/simd_target.h"
#include "wte/model.h"
#include "wte/tokenizer.h"

namespace py = pybind11;

namespace {

using namespace wte_python;  // Args, Kind, Range (python/args.h)

float* fptr(py::array& a) { return static_cast<float*>(a.mutable_data()); }
const float* cfptr(const py::array& a) { return static_cast<const float*>(a.data()); }

size_t rows_of(const py::array& a, size_t C) {  // a (..., C) seen as (N, C)
  return C == 0 ? 0 : static_cast<size_t>(a.size()) / C;
}

wte::ScatterWorkspace& workspace() {
  thread_local wte::ScatterWorkspace ws;  // sort buffers reused across calls, one per thread
  return ws;
}

// AdamW's hyper-parameters: lr >= 0, betas in [0, 1), eps > 0, weight_decay >= 0 (the ranges of
// wte's [optim] config and of torch.optim.AdamW), all finite.
const Range& adamw_range(const std::string& name) {
  return name == "eps" ? kPositive : kNonNegative;  // lr, weight_decay
}

wte::AdamWParams adamw_params(const Args& args, const py::object& lr, const py::object& betas,
                              const py::object& eps, const py::object& weight_decay,
                              const py::object& step) {
  wte::AdamWParams hp{};
  hp.step = args.integer(step, "step", 1, std::numeric_limits<int64_t>::max());  // 1-based
  hp.lr = args.real(lr, "lr", adamw_range("lr"));
  const auto [b1, b2] = args.betas_value(betas, "betas");
  hp.beta1 = static_cast<float>(b1);
  hp.beta2 = static_cast<float>(b2);
  hp.eps = args.real(eps, "eps", adamw_range("eps"));
  hp.weight_decay = args.real(weight_decay, "weight_decay", adamw_range("weight_decay"));
  return hp;
}

// A (V, C) float32 table argument; returns (V, C).
std::pair<size_t, size_t> table_shape(const py::array& t) {
  return {static_cast<size_t>(t.shape(0)), static_cast<size_t>(t.shape(1))};
}

// ---- kernels -----------------------------------------------------------------------------------

py::array gather(const py::object& table_obj, const py::object& ids_obj,
                 const py::object& out_obj) {
  Args args("gather");
  py::array table = args.array(table_obj, "table", Kind::kFloat32, 2, false);
  py::array ids = args.array(ids_obj, "ids", Kind::kInt32, -1, false);
  const auto [V, C] = table_shape(table);
  const std::vector<int32_t> own = owned_ids(ids);
  args.ids(own, "ids", V, "table");
  if (ids.ndim() >= 32)  // numpy's dimension limit (1.x), out has one more
    args.value_error("ids has " + std::to_string(ids.ndim()) + " dimensions, at most 31");
  std::vector<py::ssize_t> out_shape(ids.shape(), ids.shape() + ids.ndim());
  out_shape.push_back(static_cast<py::ssize_t>(C));
  py::array out;
  if (out_obj.is_none()) {
    args.check_memory(4.0 * static_cast<double>(ids.size()) * static_cast<double>(C),
                      "out (ids.size x C float32, for " + std::to_string(ids.size()) + " ids)",
                      "pass fewer ids, or an out array");
    out = py::array(py::dtype::of<float>(), out_shape);
  } else {
    out = args.array(out_obj, "out", Kind::kFloat32, static_cast<int>(out_shape.size()), true);
    for (size_t i = 0; i < out_shape.size(); ++i)
      if (out.shape(static_cast<py::ssize_t>(i)) != out_shape[i])
        args.value_error("out has shape " + shape_str(out) + ", need ids.shape + (C,)");
  }
  const size_t N = static_cast<size_t>(ids.size());
  {
    py::gil_scoped_release release;
    wte::embedding_gather(fptr(out), own.data(), cfptr(table), N, C);
  }
  return out;
}

py::array embedding_forward(const py::object& ids_obj, const py::object& wte_obj,
                            const py::object& wpe_obj, const py::object& out_obj) {
  Args args("embedding_forward");
  py::array ids = args.array(ids_obj, "ids", Kind::kInt32, 2, false);
  py::array wte = args.array(wte_obj, "wte", Kind::kFloat32, 2, false);
  py::array wpe = args.array(wpe_obj, "wpe", Kind::kFloat32, 2, false);
  const auto [V, C] = table_shape(wte);
  const size_t B = static_cast<size_t>(ids.shape(0)), T = static_cast<size_t>(ids.shape(1));
  args.dim(wpe, "wpe", 1, C, "d_model");
  if (static_cast<size_t>(wpe.shape(0)) < T)
    args.value_error("wpe has " + std::to_string(wpe.shape(0)) +
                     " position rows, need >= T = " + std::to_string(T) + " (ids.shape[1])");
  const std::vector<int32_t> own = owned_ids(ids);
  args.ids(own, "ids", V, "wte");
  py::array out;
  if (out_obj.is_none()) {
    args.check_memory(4.0 * static_cast<double>(B * T) * static_cast<double>(C),
                      "out (B x T x C float32, ids.shape " + shape_str(ids) + ")",
                      "pass fewer ids, or an out array");
    out = py::array(py::dtype::of<float>(), std::vector<py::ssize_t>{ids.shape(0), ids.shape(1),
                                                                    static_cast<py::ssize_t>(C)});
  } else {
    out = args.array(out_obj, "out", Kind::kFloat32, 3, true);
    args.dim(out, "out", 0, B, "B");
    args.dim(out, "out", 1, T, "T");
    args.dim(out, "out", 2, C, "d_model");
  }
  {
    py::gil_scoped_release release;
    wte::embedding_forward(fptr(out), own.data(), cfptr(wte), cfptr(wpe), B, T, C);
  }
  return out;
}

wte::ScatterStrategy strategy_of(const Args& args, const py::object& obj) {
  const std::string name = args.str(obj, "strategy");
  wte::ScatterStrategy s;
  if (!wte::parse_scatter_strategy(name.c_str(), &s))
    args.value_error("strategy = " + std::string(py::repr(obj)) +
                     " is not one of auto, serial, sorted, row-range, private-hot");
  return s;
}

// dtable[ids[n]] += dout[n]. dout (..., C) with ids.size rows.
void scatter(const py::object& dtable_obj, const py::object& dout_obj, const py::object& ids_obj,
             const py::object& strategy_obj) {
  Args args("scatter");
  const wte::ScatterStrategy strategy = strategy_of(args, strategy_obj);
  py::array dtable = args.array(dtable_obj, "dtable", Kind::kFloat32, 2, true);
  py::array dout = args.array(dout_obj, "dout", Kind::kFloat32, -1, false);
  py::array ids = args.array(ids_obj, "ids", Kind::kInt32, -1, false);
  args.id_count(ids, "ids");
  const auto [V, C] = table_shape(dtable);
  const size_t N = static_cast<size_t>(ids.size());
  if (dout.ndim() < 1 || static_cast<size_t>(dout.shape(dout.ndim() - 1)) != C ||
      rows_of(dout, C) != N)
    args.value_error("dout has shape " + shape_str(dout) + ", need ids.shape + (C,) = " +
                     std::to_string(N) + " rows of " + std::to_string(C));
  const std::vector<int32_t> own = owned_ids(ids);
  args.ids(own, "ids", V, "dtable");
  {
    py::gil_scoped_release release;
    wte::embedding_backward_wte_strategy(strategy, fptr(dtable), cfptr(dout), own.data(), N, C, V,
                                         &workspace());
  }
}

void scatter_wpe(const py::object& dwpe_obj, const py::object& dout_obj) {
  Args args("scatter_wpe");
  py::array dwpe = args.array(dwpe_obj, "dwpe", Kind::kFloat32, 2, true);
  py::array dout = args.array(dout_obj, "dout", Kind::kFloat32, 3, false);
  const size_t B = static_cast<size_t>(dout.shape(0)), T = static_cast<size_t>(dout.shape(1)),
               C = static_cast<size_t>(dout.shape(2));
  args.dim(dwpe, "dwpe", 1, C, "d_model");
  if (static_cast<size_t>(dwpe.shape(0)) < T)
    args.value_error("dwpe has " + std::to_string(dwpe.shape(0)) + " rows, need >= T = " +
                     std::to_string(T));
  py::gil_scoped_release release;
  wte::embedding_backward_wpe(fptr(dwpe), cfptr(dout), B, T, C);
}

// (grad_rows (K, C), touched (K,) int32): the touched rows' gradient sums, ids increasing.
py::tuple backward_rows(const py::object& dout_obj, const py::object& ids_obj,
                        const py::object& num_embeddings) {
  Args args("embedding_backward_rows");
  py::array dout = args.array(dout_obj, "dout", Kind::kFloat32, -1, false);
  py::array ids = args.array(ids_obj, "ids", Kind::kInt32, -1, false);
  args.id_count(ids, "ids");
  const int64_t V = args.integer(num_embeddings, "num_embeddings", 0,
                                 std::numeric_limits<int64_t>::max());
  const size_t N = static_cast<size_t>(ids.size());
  if (dout.ndim() < 1) args.value_error("dout has no dimensions, need at least one (C)");
  const size_t C = static_cast<size_t>(dout.shape(dout.ndim() - 1));
  if (rows_of(dout, C) != N)
    args.value_error("dout has shape " + shape_str(dout) + ", need ids.shape + (C,)");
  const std::vector<int32_t> own = owned_ids(ids);
  args.ids(own, "ids", static_cast<size_t>(V), "the table (num_embeddings)");
  // The rows past the largest id are untouched: the kernel's sort buffers need max id + 1 rows,
  // not num_embeddings (which may be far larger).
  size_t rows_needed = 0;
  for (size_t n = 0; n < N; ++n) rows_needed = std::max(rows_needed, size_t(own[n]) + 1);
  const size_t cap = std::min(N, rows_needed);
  args.check_memory(4.0 * static_cast<double>(cap) * static_cast<double>(C + 1),
                    "the gradient rows (" + std::to_string(cap) + " distinct ids x C float32)",
                    "pass fewer ids");
  std::vector<float> rows(cap * C);
  std::vector<int32_t> touched(cap);
  size_t k = 0;
  {
    py::gil_scoped_release release;
    wte::embedding_backward_rows(rows.data(), touched.data(), &k, cfptr(dout), own.data(), N, C,
                                 rows_needed, &workspace());
  }
  py::array_t<float> grad_rows({static_cast<py::ssize_t>(k), static_cast<py::ssize_t>(C)});
  py::array_t<int32_t> ids_out(static_cast<py::ssize_t>(k));
  if (k) {
    std::memcpy(grad_rows.mutable_data(), rows.data(), k * C * sizeof(float));
    std::memcpy(ids_out.mutable_data(), touched.data(), k * sizeof(int32_t));
  }
  return py::make_tuple(grad_rows, ids_out);
}

// params, m, v: (V, C) float32, written, same shape (disjoint: Args::array checks that).
std::pair<size_t, size_t> moments(Args& args, const py::object& params_obj, const py::object& m_obj,
                                  const py::object& v_obj, py::array* params, py::array* m,
                                  py::array* v) {
  *params = args.array(params_obj, "params", Kind::kFloat32, 2, true);
  *m = args.array(m_obj, "m", Kind::kFloat32, 2, true);
  *v = args.array(v_obj, "v", Kind::kFloat32, 2, true);
  const auto [V, C] = table_shape(*params);
  for (auto [a, name] : {std::pair<py::array*, const char*>{m, "m"}, {v, "v"}}) {
    args.dim(*a, name, 0, V, "params.shape[0]");
    args.dim(*a, name, 1, C, "params.shape[1]");
  }
  return {V, C};
}

void adamw_update_rows(const py::object& params_obj, const py::object& m_obj,
                       const py::object& v_obj, const py::object& grad_rows_obj,
                       const py::object& rows_obj, const py::object& lr, const py::object& betas,
                       const py::object& eps, const py::object& weight_decay,
                       const py::object& step) {
  Args args("adamw_update_rows");
  const wte::AdamWParams hp = adamw_params(args, lr, betas, eps, weight_decay, step);
  py::array params, m, v;
  const auto [V, C] = moments(args, params_obj, m_obj, v_obj, &params, &m, &v);
  py::array grad_rows = args.array(grad_rows_obj, "grad_rows", Kind::kFloat32, 2, false);
  py::array rows = args.array(rows_obj, "rows", Kind::kInt32, 1, false);
  const size_t K = static_cast<size_t>(rows.size());
  args.dim(grad_rows, "grad_rows", 0, K, "len(rows)");
  args.dim(grad_rows, "grad_rows", 1, C, "params.shape[1]");
  const std::vector<int32_t> own = owned_ids(rows);
  args.ids(own, "rows", V, "params");
  {  // rows must be distinct (two updates of one row would race)
    std::vector<bool> seen(V, false);
    for (size_t k = 0; k < K; ++k) {
      const size_t r = static_cast<size_t>(own[k]);
      if (seen[r])
        args.value_error("rows[" + std::to_string(k) + "] = " + std::to_string(r) +
                         " repeats an earlier row; rows must be distinct");
      seen[r] = true;
    }
  }
  py::gil_scoped_release release;
  wte::adamw_update_rows(fptr(params), fptr(m), fptr(v), cfptr(grad_rows), own.data(), K, C, hp);
}

void adamw_lazy(const py::object& params_obj, const py::object& m_obj, const py::object& v_obj,
                const py::object& dout_obj, const py::object& ids_obj, const py::object& lr,
                const py::object& betas, const py::object& eps, const py::object& weight_decay,
                const py::object& step) {
  Args args("adamw_lazy");
  const wte::AdamWParams hp = adamw_params(args, lr, betas, eps, weight_decay, step);
  py::array params, m, v;
  const auto [V, C] = moments(args, params_obj, m_obj, v_obj, &params, &m, &v);
  py::array dout = args.array(dout_obj, "dout", Kind::kFloat32, -1, false);
  py::array ids = args.array(ids_obj, "ids", Kind::kInt32, -1, false);
  args.id_count(ids, "ids");
  const size_t N = static_cast<size_t>(ids.size());
  if (dout.ndim() < 1 || static_cast<size_t>(dout.shape(dout.ndim() - 1)) != C ||
      rows_of(dout, C) != N)
    args.value_error("dout has shape " + shape_str(dout) +
                     ", need ids.shape + (C,) with C = " + std::to_string(C));
  const std::vector<int32_t> own = owned_ids(ids);
  args.ids(own, "ids", V, "params");
  py::gil_scoped_release release;
  wte::embedding_backward_adamw_lazy(fptr(params), fptr(m), fptr(v), cfptr(dout), own.data(), N, C,
                                     V, hp, &workspace());
}

void adamw(const py::object& params_obj, const py::object& grads_obj, const py::object& m_obj,
           const py::object& v_obj, const py::object& lr, const py::object& betas,
           const py::object& eps, const py::object& weight_decay, const py::object& step) {
  Args args("adamw");
  const wte::AdamWParams hp = adamw_params(args, lr, betas, eps, weight_decay, step);
  py::array params = args.array(params_obj, "params", Kind::kFloat32, -1, true);
  py::array grads = args.array(grads_obj, "grads", Kind::kFloat32, -1, false);
  py::array m = args.array(m_obj, "m", Kind::kFloat32, -1, true);
  py::array v = args.array(v_obj, "v", Kind::kFloat32, -1, true);
  const py::ssize_t n = params.size();
  for (auto [a, name] : {std::pair<py::array*, const char*>{&grads, "grads"}, {&m, "m"}, {&v, "v"}})
    if (a->size() != n)
      args.value_error(std::string(name) + " has " + std::to_string(a->size()) +
                       " elements, need params.size = " + std::to_string(n));
  py::gil_scoped_release release;
  wte::adamw_update(fptr(params), cfptr(grads), fptr(m), fptr(v), static_cast<size_t>(n), hp);
}

// In place: logits (N, V) become dlogits; returns the per-row losses (N,).
py::array softmax_cross_entropy(const py::object& logits_obj, const py::object& targets_obj,
                                const py::object& grad_scale_obj) {
  Args args("softmax_cross_entropy");
  const float grad_scale = args.real(grad_scale_obj, "grad_scale", kAnyFinite);
  py::array logits = args.array(logits_obj, "logits", Kind::kFloat32, 2, true);
  py::array targets = args.array(targets_obj, "targets", Kind::kInt32, 1, false);
  const size_t N = static_cast<size_t>(logits.shape(0)), V = static_cast<size_t>(logits.shape(1));
  args.dim(targets, "targets", 0, N, "logits.shape[0]");
  const std::vector<int32_t> own = owned_ids(targets);
  args.ids(own, "targets", V, "logits (its columns)");
  py::array_t<float> losses(static_cast<py::ssize_t>(N));
  {
    py::gil_scoped_release release;
    wte::softmax_cross_entropy(fptr(logits), losses.mutable_data(), own.data(), N, V,
                               grad_scale);
  }
  return losses;
}

py::array cross_entropy_loss(const py::object& logits_obj, const py::object& targets_obj) {
  Args args("cross_entropy_loss");
  py::array logits = args.array(logits_obj, "logits", Kind::kFloat32, 2, false);
  py::array targets = args.array(targets_obj, "targets", Kind::kInt32, 1, false);
  const size_t N = static_cast<size_t>(logits.shape(0)), V = static_cast<size_t>(logits.shape(1));
  args.dim(targets, "targets", 0, N, "logits.shape[0]");
  const std::vector<int32_t> own = owned_ids(targets);
  args.ids(own, "targets", V, "logits (its columns)");
  py::array_t<float> losses(static_cast<py::ssize_t>(N));
  {
    py::gil_scoped_release release;
    wte::cross_entropy_loss(losses.mutable_data(), cfptr(logits), own.data(), N, V);
  }
  return losses;
}

// One AdamW hyper-parameter (lr, betas, eps or weight_decay) checked as the optimizers check it,
// errors under `function` (wte.torch.LazyAdamW's attributes): a float, or (beta1, beta2).
py::object adamw_hyperparameter(const std::string& function, const std::string& name,
                                const py::object& value) {
  const Args args(function);
  if (name == "betas") {
    const auto [b1, b2] = args.betas_value(value, name);
    return py::make_tuple(b1, b2);
  }
  if (name != "lr" && name != "eps" && name != "weight_decay")
    args.value_error(name + " is not an AdamW hyper-parameter (lr, betas, eps, weight_decay)");
  return py::float_(args.real_value(value, name, adamw_range(name)));
}

// ---- checkpoints -------------------------------------------------------------------------------

// (tensors: {name: ndarray}, config_ini, step, encoder_json, vocab_bpe). wte/__init__.py turns
// this into load_checkpoint's dict. `function` names the caller in errors.
py::tuple load_checkpoint_raw(const py::object& path_obj, const std::string& function) {
  const std::string path = Args(function).path(path_obj, "path");
  wte::CheckpointInfo info;
  std::unique_ptr<wte::Model> model;
  {
    py::gil_scoped_release release;
    // Read in a child process first, as wte train --resume auto reads checkpoints, with its time
    // limits: a file that hangs or crashes HDF5 is an error, not a hung interpreter.
    wte::validate_checkpoint_isolated(path);
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

}  // namespace

namespace wte_python {
void bind_model(py::module_& m);  // python/model.cc: wte.Model, wte._train
}  // namespace wte_python

namespace wte_python {

// The module's contents: the extension's (PYBIND11_MODULE below) and those of the copy that
// fuzz/fuzz_python_threads.cc embeds in its own interpreter (built with WTE_PYTHON_EMBEDDED).
void define_module(py::module_& m) {
  m.doc() = "wte's kernels, checkpoints and tokenizer (see the wte package for the documentation)";
  py::register_exception<wte::Error>(m, "Error", PyExc_ValueError);

  const py::object none = py::none();
  const py::object default_betas = py::make_tuple(0.9, 0.999);
  m.def("gather", &gather, py::arg("table"), py::arg("ids"), py::arg("out") = none,
        "out[..., :] = table[ids[...], :]. table (V, C) float32; ids int32, any shape; out "
        "ids.shape + (C,) float32 (allocated if None; must not overlap table or ids). Returns "
        "out.");
  m.def("embedding_forward", &embedding_forward, py::arg("ids"), py::arg("wte"), py::arg("wpe"),
        py::arg("out") = none,
        "hidden_states[b, t] = wte[ids[b, t]] + wpe[t]. ids (B, T) int32; wte (V, C); wpe (>= T, C); "
        "out (B, T, C), overlapping no input. Returns out.");
  m.def("scatter", &scatter, py::arg("dtable"), py::arg("dout"), py::arg("ids"),
        py::arg("strategy") = "auto",
        "dtable[ids[n]] += dout[n] (duplicates accumulate), in place. dtable (V, C) float32, "
        "overlapping neither dout nor ids; dout ids.shape + (C,); strategy: auto, serial, sorted, "
        "row-range (deterministic for any thread count) or private-hot (deterministic for a fixed "
        "thread count).");
  m.def("scatter_wpe", &scatter_wpe, py::arg("dwpe"), py::arg("dout"),
        "dwpe[t] += sum_b dout[b, t], in place. dwpe (>= T, C), not overlapping dout; dout "
        "(B, T, C).");
  m.def("embedding_backward_rows", &backward_rows, py::arg("dout"), py::arg("ids"),
        py::arg("num_embeddings"),
        "Row-sparse lookup backward: returns (grad_rows (K, C), rows (K,) int32), the distinct ids "
        "in increasing order and each one's summed gradient. num_embeddings: an int >= 0, above "
        "every id.");
  m.def("adamw_update_rows", &adamw_update_rows, py::arg("params"), py::arg("m"), py::arg("v"),
        py::arg("grad_rows"), py::arg("rows"), py::kw_only(), py::arg("lr"),
        py::arg("betas") = default_betas, py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.0,
        py::arg("step"),
        "Lazy AdamW on the listed rows of params/m/v (V, C), in place; other rows untouched. "
        "params, m and v overlap no other argument. lr >= 0, betas in [0, 1), eps > 0, "
        "weight_decay >= 0, all finite; step (an int >= 1) is the global 1-based step (bias "
        "correction).");
  m.def("adamw_lazy", &adamw_lazy, py::arg("params"), py::arg("m"), py::arg("v"), py::arg("dout"),
        py::arg("ids"), py::kw_only(), py::arg("lr"), py::arg("betas") = default_betas,
        py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.0, py::arg("step"),
        "Fused lookup backward + lazy AdamW of an untied table: the rows that ids touch get their "
        "summed gradient's AdamW update; no gradient is stored. Same bits as "
        "embedding_backward_rows followed by adamw_update_rows, and the same argument rules.");
  m.def("adamw", &adamw, py::arg("params"), py::arg("grads"), py::arg("m"), py::arg("v"),
        py::kw_only(), py::arg("lr"), py::arg("betas") = default_betas, py::arg("eps") = 1e-8,
        py::arg("weight_decay") = 0.0, py::arg("step"),
        "Dense AdamW (torch.optim.AdamW's formula), in place on float32 arrays of one size; "
        "params, m and v overlap no other argument. Hyper-parameters as adamw_update_rows.");
  m.def("softmax_cross_entropy", &softmax_cross_entropy, py::arg("logits"), py::arg("targets"),
        py::arg("grad_scale") = 1.0,
        "Per-row losses (N,); logits (N, V) are overwritten with grad_scale * (softmax - onehot). "
        "targets (N,) int32 must not overlap logits; grad_scale finite.");
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
  m.def("simd_target", &wte::simd_target_name,
        "The Highway target the kernels run on (e.g. AVX3): the best this CPU supports, or no better "
        "than the WTE_MAX_SIMD cap (see simd_target_cap).");
  m.def("simd_target_cap", &wte::simd_target_cap,
        "The cap on the kernels' Highway target that the environment variable WTE_MAX_SIMD set when "
        "the module loaded (e.g. 'AVX2'), or '' for none.");
  m.def("set_num_threads", [](const py::object& n) {
    // More threads than this only oversubscribes the CPU, and a thread count the system cannot
    // start would end the process inside OpenMP.
    const int64_t most = std::max<int64_t>(64, 4 * static_cast<int64_t>(omp_get_num_procs()));
    omp_set_num_threads(static_cast<int>(Args("set_num_threads").integer(n, "n", 1, most)));
  }, py::arg("n"), "OpenMP threads for the kernels (as OMP_NUM_THREADS): 1 to max(64, 4 x CPUs).");
  m.def("get_num_threads", [] { return omp_get_max_threads(); });

  m.def("_load_checkpoint", &load_checkpoint_raw, py::arg("path"),
        py::arg("function") = "load_checkpoint");
  m.def("_adamw_hyperparameter", &adamw_hyperparameter, py::arg("function"), py::arg("name"),
        py::arg("value"));

  py::class_<wte::Tokenizer>(m, "Tokenizer",
                             "GPT-2's byte-level BPE (include/wte/tokenizer.h). Tokenizer(dir) "
                             "loads dir/encoder.json and dir/vocab.bpe.")
      .def(py::init([](const py::object& dir) {
             return wte::Tokenizer::load(Args("Tokenizer").path(dir, "dir"));
           }),
           py::arg("dir"))
      .def_static("from_strings",
                  [](const py::object& encoder_json, const py::object& vocab_bpe) {
                    const Args args("Tokenizer.from_strings");
                    return wte::Tokenizer::from_strings(args.text(encoder_json, "encoder_json"),
                                                        args.text(vocab_bpe, "vocab_bpe"),
                                                        "strings");
                  },
                  py::arg("encoder_json"), py::arg("vocab_bpe"),
                  "A tokenizer from the contents (bytes or str) of encoder.json and vocab.bpe.")
      .def("encode",
           [](const wte::Tokenizer& t, const py::object& text) {
             return t.encode(Args("Tokenizer.encode").text(text, "text"));
           },
           py::arg("text"), "Token ids (list of int) of a str (UTF-8) or bytes.")
      .def("decode_bytes",
           [](const wte::Tokenizer& t, const py::object& ids) {
             return py::bytes(t.decode(ids_of(Args("Tokenizer.decode_bytes"), ids)));
           },
           py::arg("ids"))
      .def("decode",
           [](const wte::Tokenizer& t, const py::object& ids) {
             const std::string s = t.decode(ids_of(Args("Tokenizer.decode"), ids));
             return py::reinterpret_steal<py::str>(
                 PyUnicode_DecodeUTF8(s.data(), static_cast<py::ssize_t>(s.size()), "replace"));
           },
           py::arg("ids"), "The text of ids (invalid UTF-8 replaced by U+FFFD; decode_bytes keeps it).")
      .def("piece",
           [](const wte::Tokenizer& t, const py::object& id) {
             const int64_t i = Args("Tokenizer.piece").integer(id, "id", INT32_MIN, INT32_MAX);
             return py::bytes(t.piece(static_cast<int32_t>(i)));  // wte.Error outside the vocab
           },
           py::arg("id"))
      .def("id_of",
           [](const wte::Tokenizer& t, const py::object& b) {
             return t.id_of(Args("Tokenizer.id_of").text(b, "piece"));
           },
           py::arg("piece"))
      .def("__len__", &wte::Tokenizer::size)
      .def_property_readonly("vocab_size", &wte::Tokenizer::size);

  wte_python::bind_model(m);
}

}  // namespace wte_python

#ifndef WTE_PYTHON_EMBEDDED
PYBIND11_MODULE(_wte, m) { wte_python::define_module(m); }
#endif
