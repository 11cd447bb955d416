// wte.Model and wte.train (python/wte/__init__.py documents both for users).
//
// Model holds what wte::load_model returns (config, parameters, tokenizer) and runs the code the
// command line runs, so results are the command line's bit for bit:
//   __call__   decode_hidden_states (include/wte/decoder.h): the KV-cache decoder's
//              prefill of each row, as `wte hidden-states --out` writes logits and hidden states
//   generate   wte::generate (include/wte/generate.h) on a SlidingDecoder, as `wte sample` prints
//   loss       wte::evaluate_windows over the rows, in batches of the config's micro-batch: the
//              trainer's evaluation
// Arguments are checked before any work (python/args.h: TypeError, ValueError, IndexError naming
// the argument). Compute runs with the GIL released, one call at a time per model (a mutex).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "python/args.h"
#include "src/model/finite_check.h"
#include "src/model/memory_plan.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/decoder.h"
#include "wte/error.h"
#include "wte/evaluate.h"
#include "wte/generate.h"
#include "wte/model.h"
#include "wte/rng.h"
#include "wte/tokenizer.h"
#include "wte/train.h"

namespace wte_python {
namespace {

// A loaded model and the decoder its forward passes use (made on first use).
class PyModel {
 public:
  explicit PyModel(wte::LoadedModel m) : m_(std::move(m)) {}
  const wte::LoadedModel& loaded() const { return m_; }
  const wte::ModelConfig& mc() const { return m_.config.model; }

  py::object call(const py::object& ids_obj, const py::object& output_hidden_states);
  double loss(const py::object& ids_obj, const py::object& batch_size_obj);
  py::object generate(const py::object& prompt, const py::object& max_new_tokens,
                      const py::object& temperature, const py::object& top_k,
                      const py::object& top_p, const py::object& seed, const py::object& stop,
                      const py::object& ignore_eos, const py::object& slide);

 private:
  wte::Decoder& decoder() {  // under mu_
    if (!dec_) dec_ = std::make_unique<wte::Decoder>(*m_.model);
    return *dec_;
  }
  wte::LoadedModel m_;
  std::unique_ptr<wte::Decoder> dec_;
  std::mutex mu_;
};

bool truthy(const Args& args, const py::object& obj, const std::string& name) {
  if (!PyBool_Check(obj.ptr()) && !py::isinstance<py::int_>(obj))
    args.type_error(name + " is a " + type_name(obj) + ", need a bool");
  return PyObject_IsTrue(obj.ptr()) == 1;
}

// Token ids copied into memory the call owns, with their shape. The GIL is released while the
// model runs, so another thread may change the caller's array meanwhile: the model reads only this
// copy, checked after it was taken.
struct TokenIds {
  std::vector<int32_t> ids;  // (B, T) row-major
  size_t B = 1, T = 0;
  int ndim = 1;
  std::string shape;  // as numpy prints it, for messages
  // The output shape (B, T, last), or (T, last) for one dimension.
  std::vector<py::ssize_t> out_shape(size_t last) const {
    std::vector<py::ssize_t> s;
    if (ndim == 2) s.push_back(static_cast<py::ssize_t>(B));
    s.push_back(static_cast<py::ssize_t>(T));
    s.push_back(static_cast<py::ssize_t>(last));
    return s;
  }
};

// Token ids of 1 or 2 dimensions (a numpy integer array or a nested list; not bytes, bytearray,
// memoryview or str), every id in [0, V) (IndexError naming the first one that is not), copied
// (TokenIds).
TokenIds token_ids(const Args& args, const py::object& obj, const std::string& name, size_t V) {
  refuse_bytes_as_ids(args, obj, name);
  using namespace pybind11::literals;
  const py::module_ np = py::module_::import("numpy");
  py::array a;
  if (py::isinstance<py::array>(obj)) {
    a = py::reinterpret_borrow<py::array>(obj);
  } else {
    try {
      a = py::reinterpret_borrow<py::array>(np.attr("asarray")(obj));
    } catch (const py::error_already_set&) {
      args.type_error(name + " is a " + type_name(obj) + " that is not a rectangular array of "
                      "integers");
    }
  }
  const char kind = a.dtype().kind();
  if (a.size() > 0 && kind != 'i' && kind != 'u')
    args.type_error(name + " has dtype " + std::string(py::str(a.dtype())) +
                    ", need integers (token ids)");
  if (a.ndim() != 1 && a.ndim() != 2)
    args.value_error(name + " has shape " + shape_str(a) + ", need (T,) or (B, T)");
  if (a.size() == 0) args.value_error(name + " has shape " + shape_str(a) + ": no tokens");
  // Checked in the caller's dtype first (an int64 id of 2^32 would wrap to 0 as an int32).
  const py::object bad = np.attr("logical_or")(np.attr("less")(a, 0),
                                                np.attr("greater_equal")(a, py::int_(V)));
  if (bad.attr("any")().cast<bool>()) {
    const py::tuple at = py::reinterpret_borrow<py::tuple>(
        np.attr("unravel_index")(np.attr("argmax")(bad), a.attr("shape")));
    std::string where;
    for (size_t i = 0; i < at.size(); ++i) {
      if (i > 0) where += ", ";
      where += std::string(py::str(at[i]));
    }
    args.index_error(name + "[" + where + "] = " + std::string(py::str(py::object(a[at]))) +
                     " is outside [0, " + std::to_string(V) + "), the model's vocab_size");
  }
  TokenIds t;
  t.shape = shape_str(a);
  t.ndim = static_cast<int>(a.ndim());
  if (a.ndim() == 2) t.B = static_cast<size_t>(a.shape(0));
  t.T = static_cast<size_t>(a.shape(a.ndim() - 1));
  const py::array c = py::reinterpret_borrow<py::array>(
      np.attr("ascontiguousarray")(a, "dtype"_a = np.attr("int32")));
  const int32_t* p = static_cast<const int32_t*>(c.data());
  t.ids.assign(p, p + c.size());
  // The copy again: the caller's array may have changed since it was checked.
  for (size_t i = 0; i < t.ids.size(); ++i)
    if (t.ids[i] < 0 || static_cast<size_t>(t.ids[i]) >= V)
      args.index_error(name + " changed while it was read: its id " + std::to_string(t.ids[i]) +
                       " (flat index " + std::to_string(i) + ") is outside [0, " +
                       std::to_string(V) + "), the model's vocab_size");
  return t;
}

py::object PyModel::call(const py::object& ids_obj, const py::object& hidden_obj) {
  const Args args("Model.__call__");
  const bool want_hidden = truthy(args, hidden_obj, "output_hidden_states");
  const TokenIds ids = token_ids(args, ids_obj, "ids", mc().vocab_size);
  const size_t B = ids.B, T = ids.T;
  if (T > mc().n_ctx)
    args.value_error("ids has shape " + ids.shape + ": " + std::to_string(T) +
                     " positions, more than the model's n_ctx = " + std::to_string(mc().n_ctx));
  const size_t V = mc().vocab_size, C = mc().d_model, L = wte::hidden_state_layers(mc().n_layer);
  const double tokens = static_cast<double>(B) * static_cast<double>(T);
  args.check_memory(4.0 * tokens * static_cast<double>(V + (want_hidden ? L * C : 0)),
                    std::string("the logits") + (want_hidden ? " and hidden states" : "") +
                        " of ids (shape " + ids.shape + ", " +
                        std::to_string(static_cast<uint64_t>(tokens)) + " tokens)",
                    "pass fewer rows of ids per call");
  py::array_t<float> logits(ids.out_shape(V));
  std::vector<py::array_t<float>> hidden;
  std::vector<float*> base(L);
  if (want_hidden)
    for (size_t l = 0; l < L; ++l) {
      hidden.emplace_back(ids.out_shape(C));
      base[l] = hidden.back().mutable_data();
    }
  const int32_t* in = ids.ids.data();
  float* lg = logits.mutable_data();
  {
    py::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(mu_);
    wte::Decoder& dec = decoder();
    std::vector<float*> layers(L);
    for (size_t b = 0; b < B; ++b) {
      for (size_t l = 0; l < L; ++l) layers[l] = want_hidden ? base[l] + b * T * C : nullptr;
      wte::decode_hidden_states(dec, in + b * T, T, want_hidden ? layers.data() : nullptr,
                                lg + b * T * V);
    }
  }
  if (!want_hidden) return logits;
  py::tuple hs(L);
  for (size_t l = 0; l < L; ++l) hs[l] = hidden[l];
  return py::make_tuple(logits, hs);
}

double PyModel::loss(const py::object& ids_obj, const py::object& batch_size_obj) {
  const Args args("Model.loss");
  const wte::TrainConfig& tc = m_.config.train;
  const size_t B_micro =
      std::max<size_t>(1, tc.batch_size / std::max<size_t>(1, tc.grad_accum_steps));
  const size_t rows_asked =
      batch_size_obj.is_none()
          ? B_micro
          : static_cast<size_t>(args.integer(batch_size_obj, "batch_size", 1, 1 << 20));
  const TokenIds ids = token_ids(args, ids_obj, "ids", mc().vocab_size);
  const size_t B = ids.B, T1 = ids.T;
  if (T1 < 2 || T1 - 1 > mc().n_ctx)
    args.value_error("ids has shape " + ids.shape + ", need T + 1 tokens per row with T in "
                     "[1, n_ctx = " + std::to_string(mc().n_ctx) + "] (inputs ids[..., :-1], "
                     "targets ids[..., 1:])");
  const size_t T = T1 - 1;
  // Buffers for the rows actually given: batch_size only caps the rows of one forward.
  const size_t rows_per_pass = std::min(rows_asked, B);
  // The forward's activations by the memory plan `wte train` checks (src/model/memory_plan.h),
  // beyond what the model holds without any (its parameters and gradients), plus this call's ids
  // and losses.
  const double forward_bytes =
      static_cast<double>(wte::plan_memory(mc(), wte::PlanShape{rows_per_pass, T, 1, false, false})
                              .bytes()) -
      static_cast<double>(wte::plan_memory(mc(), wte::PlanShape{0, 0, 1, false, false}).bytes()) +
      12.0 * static_cast<double>(rows_per_pass * T);
  args.check_memory(forward_bytes,
                    "a forward of " + std::to_string(rows_per_pass) + " rows of " +
                        std::to_string(T) + " tokens (batch_size = " +
                        (batch_size_obj.is_none() ? "the config's micro-batch, " : "") +
                        std::to_string(rows_asked) + ", ids of shape " + ids.shape + ")",
                    "pass a smaller batch_size");
  const int32_t* p = ids.ids.data();
  double mean = 0.0;
  size_t bad_at = SIZE_MAX;  // flat index (b * T + t) of the first non-finite token loss
  float bad_loss = 0.0f;
  {
    py::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(mu_);
    // The trainer's evaluation over rows of T + 1 tokens (include/wte/evaluate.h).
    mean = wte::evaluate_windows(*m_.model, p, B, T, T1, rows_per_pass);
    if (!std::isfinite(mean)) {
      // Only to name the first token whose loss is not finite: each row again, in order.
      std::vector<float> losses(T);
      for (size_t b = 0; b < B && bad_at == SIZE_MAX; ++b) {
        const int32_t* row = p + b * T1;
        m_.model->forward_losses(row, row + 1, 1, T, losses.data());
        for (size_t t = 0; t < T; ++t)
          if (!std::isfinite(losses[t])) {
            bad_at = b * T + t;
            bad_loss = losses[t];
            break;
          }
      }
    }
  }
  if (!std::isfinite(mean)) {
    const size_t b = bad_at == SIZE_MAX ? 0 : bad_at / T, t = bad_at == SIZE_MAX ? 0 : bad_at % T;
    const std::string at = ids.ndim == 2 ? std::to_string(b) + ", " + std::to_string(t + 1)
                                         : std::to_string(t + 1);
    const std::string first =
        bad_at == SIZE_MAX ? "the sum of the token losses overflowed"
                           : "the loss of target ids[" + at + "] is " +
                                 std::string(py::repr(py::float_(bad_loss)));
    const std::string msg = "Model.loss: the loss is " + std::string(py::repr(py::float_(mean))) +
                            ", not finite: " + first + "; " +
                            wte::non_finite_loss_cause(*m_.model);
    PyErr_SetString(PyExc_FloatingPointError, msg.c_str());
    throw py::error_already_set();
  }
  return mean;
}

// stop: None, a str, or a sequence of str; each non-empty.
std::vector<std::string> stop_strings(const Args& args, const py::object& obj) {
  std::vector<std::string> out;
  if (obj.is_none()) return out;
  if (PyUnicode_Check(obj.ptr()) || PyBytes_Check(obj.ptr())) {
    out.push_back(args.text(obj, "stop"));
  } else {
    if (!PySequence_Check(obj.ptr()))
      args.type_error("stop is a " + type_name(obj) + ", need a str or a list of str");
    const py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
    for (size_t i = 0; i < seq.size(); ++i)
      out.push_back(args.text(seq[i], "stop[" + std::to_string(i) + "]"));
  }
  for (const std::string& s : out)
    if (s.empty()) args.value_error("stop contains an empty string (every text contains it)");
  return out;
}

uint64_t seed_value(const Args& args, const py::object& obj) {
  if (PyBool_Check(obj.ptr()) || !PyIndex_Check(obj.ptr()))
    args.type_error("seed is a " + type_name(obj) + ", need an integer");
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  const unsigned long long v = PyLong_AsUnsignedLongLong(index.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    args.value_error("seed = " + std::string(py::repr(obj)) + ", need an integer in [0, 2^64 - 1]");
  }
  return v;
}

py::object PyModel::generate(const py::object& prompt, const py::object& max_new_tokens,
                             const py::object& temperature, const py::object& top_k,
                             const py::object& top_p, const py::object& seed,
                             const py::object& stop, const py::object& ignore_eos,
                             const py::object& slide) {
  const Args args("Model.generate");
  wte::GenerateOptions opt;
  opt.max_new_tokens =
      static_cast<size_t>(args.integer(max_new_tokens, "max_new_tokens", 0, 1 << 20));
  opt.sampling.temperature =
      args.real_value(temperature, "temperature", Range{0, 1e6, false, false, "in [0, 1e6]"});
  opt.sampling.top_k = static_cast<size_t>(args.integer(top_k, "top_k", 0, 1 << 24));
  opt.sampling.top_p = args.real_value(top_p, "top_p", Range{0, 1, true, false, "in (0, 1]"});
  const uint64_t rng_seed = seed_value(args, seed);
  opt.stops = stop_strings(args, stop);
  opt.ignore_eos = truthy(args, ignore_eos, "ignore_eos");
  const size_t n_ctx = mc().n_ctx;
  const size_t slide_n =
      static_cast<size_t>(args.integer(slide, "slide", 0, static_cast<int64_t>(n_ctx)));
  const wte::Tokenizer& tok = m_.tokenizer;
  opt.eot = wte::end_of_text_id(tok, mc().vocab_size);
  const bool text_in = PyUnicode_Check(prompt.ptr()) || PyBytes_Check(prompt.ptr());
  std::string prompt_text;
  std::vector<int32_t> ids;
  if (text_in) {
    prompt_text = args.text(prompt, "prompt");
    ids = tok.encode(prompt_text);
  } else {
    TokenIds a = token_ids(args, prompt, "prompt", mc().vocab_size);
    if (a.ndim != 1) args.value_error("prompt has shape " + a.shape + ", need one sequence (T,)");
    ids = std::move(a.ids);
  }
  if (ids.empty()) {
    if (opt.eot < 0)
      args.value_error("prompt is empty: it encodes to no tokens, and the model's vocabulary has "
                       "no <|endoftext|> token to start from; give at least one character");
    ids.push_back(opt.eot);  // unconditional: as GPT-2 starts a document
  }
  wte::check_token_ids(ids.data(), ids.size(), mc().vocab_size, "prompt");
  if (ids.size() > n_ctx) {
    const std::string note = "Model.generate: the prompt is " + std::to_string(ids.size()) +
                             " tokens, more than the model's n_ctx = " + std::to_string(n_ctx) +
                             ": the model sees its last " + std::to_string(n_ctx) + " tokens";
    if (PyErr_WarnEx(PyExc_UserWarning, note.c_str(), 1) < 0) throw py::error_already_set();
  }
  wte::Generation g;
  {
    py::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(mu_);
    wte::SlidingDecoder dec(*m_.model,
                            slide_n == 0 ? wte::SlidingDecoder::default_drop(n_ctx) : slide_n);
    wte::Rng rng(rng_seed);
    g = wte::generate(dec, ids, tok, opt, rng);
  }
  if (text_in) {
    const std::string s = prompt_text + g.text;
    if (PyBytes_Check(prompt.ptr())) return py::bytes(s);  // the bytes `wte sample` prints
    return py::reinterpret_steal<py::str>(
        PyUnicode_DecodeUTF8(s.data(), static_cast<py::ssize_t>(s.size()), "replace"));
  }
  std::vector<int32_t> all = ids;
  all.insert(all.end(), g.ids.begin(), g.ids.end());
  py::array_t<int32_t> out(static_cast<py::ssize_t>(all.size()));
  std::memcpy(out.mutable_data(), all.data(), all.size() * sizeof(int32_t));
  return out;
}

// ---- wte.train ---------------------------------------------------------------------------------

// Python's SIGINT/SIGTERM handlers, put back when training ends (the trainer's own handlers
// finish the step and write a checkpoint on Ctrl-C while it runs).
class KeepPythonSignals {
 public:
  KeepPythonSignals() {
    sigaction(SIGINT, nullptr, &int_);
    sigaction(SIGTERM, nullptr, &term_);
  }
  ~KeepPythonSignals() {
    sigaction(SIGINT, &int_, nullptr);
    sigaction(SIGTERM, &term_, nullptr);
  }

 private:
  struct sigaction int_ {}, term_ {};
};

py::dict progress_dict(const wte::TrainProgress& p) {
  py::dict d;
  d["step"] = p.step;
  d["steps"] = p.steps;
  d["loss"] = p.loss;
  d["val_loss"] = p.val_loss >= 0 ? py::object(py::float_(p.val_loss)) : py::none();
  d["lr"] = p.lr;
  d["grad_norm"] = p.grad_norm;
  d["tokens_per_second"] = p.tokens_per_second;
  d["elapsed_seconds"] = p.elapsed_seconds;
  return d;
}

// _train(config, overrides, out, overwrite, quiet, progress, resume, init_from) -> summary dict,
// through wte::train (include/wte/train.h) as `wte train`. config, out, resume, init_from: a path
// or None; resume may be "auto"; overrides: "--section.key=value" strings.
py::dict train(const py::object& config_obj, const std::vector<std::string>& overrides,
               const py::object& out_obj, const py::object& overwrite_obj,
               const py::object& quiet_obj, const py::object& progress,
               const py::object& resume_obj, const py::object& init_from_obj) {
  const Args args("train");
  wte::TrainRequest req;
  auto path_or_empty = [&](const py::object& obj, const char* name) {
    return obj.is_none() ? std::string() : args.path(obj, name);
  };
  req.config = path_or_empty(config_obj, "config");
  req.out_dir = path_or_empty(out_obj, "out");
  req.resume = path_or_empty(resume_obj, "resume");
  req.init_from = path_or_empty(init_from_obj, "init_from");
  req.overrides = overrides;
  req.overrides_from = wte::OverridesFrom::keyword_arguments;
  req.overwrite = truthy(args, overwrite_obj, "overwrite");
  req.quiet = truthy(args, quiet_obj, "quiet");
  if (!progress.is_none() && !PyCallable_Check(progress.ptr()))
    args.type_error("progress is a " + type_name(progress) + ", need a callable (or None)");
  std::optional<py::error_already_set> raised;  // the progress callback's exception
  if (!progress.is_none())
    req.progress = [&progress, &raised](const wte::TrainProgress& p) {
      const py::gil_scoped_acquire gil;
      try {
        const py::object r = progress(progress_dict(p));
        return r.is_none() || PyObject_IsTrue(r.ptr()) == 1;  // False stops the run
      } catch (py::error_already_set& e) {
        raised.emplace(std::move(e));
        return false;
      }
    };
  wte::TrainSummary summary;
  std::string interrupted;  // a start-up stopped by Ctrl-C: wte::Interrupted's message
  {
    py::gil_scoped_release release;
    const KeepPythonSignals python_signals;
    try {
      summary = wte::train(req);
    } catch (const wte::Interrupted& e) {
      interrupted = std::string("train: ") + e.what();
    }
  }
  if (raised) throw std::move(*raised);
  if (summary.signal != 0 && summary.stopped)
    interrupted = "train: stopped by a signal after writing " + summary.last_checkpoint +
                  "; continue it with wte.train(..., resume=\"auto\", out=\"" + summary.out_dir +
                  "\") or: wte train --resume auto --out " + summary.out_dir;
  if (!interrupted.empty()) {
    PyErr_SetString(PyExc_KeyboardInterrupt, interrupted.c_str());
    throw py::error_already_set();
  }
  py::dict d;
  d["out"] = summary.out_dir;
  d["final_val_loss"] = summary.final_val_loss;
  d["unigram_baseline"] = summary.unigram_baseline;
  d["tokens_per_second"] = summary.tokens_per_second;
  d["train_seconds"] = summary.train_seconds;
  d["last_checkpoint"] = summary.last_checkpoint;
  d["stopped"] = summary.stopped;
  d["start_step"] = summary.start_step;
  d["step"] = summary.finished_step;
  d["already_complete"] = summary.already_complete;
  return d;
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<PyModel>(m, "Model", "A trained model (see wte.Model's documentation).")
      .def_static("load",
                  [](const py::object& path) {
                    const std::string p = Args("Model.load").path(path, "path");
                    py::gil_scoped_release release;
                    // Validated in a child process first, as in wte_module.cc's load_checkpoint.
                    wte::validate_checkpoint_isolated(wte::resolve_checkpoint(p));
                    return std::make_unique<PyModel>(wte::load_model(p));
                  },
                  py::arg("path"))
      .def("__call__", &PyModel::call, py::arg("ids"), py::arg("output_hidden_states") = false)
      .def("loss", &PyModel::loss, py::arg("ids"), py::arg("batch_size") = py::none())
      .def("generate", &PyModel::generate, py::arg("prompt") = "",
           py::arg("max_new_tokens") = 256, py::arg("temperature") = 1.0, py::arg("top_k") = 40,
           py::arg("top_p") = 1.0, py::arg("seed") = 1337, py::arg("stop") = py::none(),
           py::arg("ignore_eos") = false, py::arg("slide") = 0)
      .def_property_readonly("tokenizer", [](const PyModel& pm) -> const wte::Tokenizer& {
        return pm.loaded().tokenizer;
      }, py::return_value_policy::reference_internal)
      .def_property_readonly("path", [](const PyModel& pm) { return pm.loaded().path; })
      .def_property_readonly("step", [](const PyModel& pm) { return pm.loaded().info.step; })
      .def_property_readonly("config_ini",
                             [](const PyModel& pm) { return pm.loaded().info.config_ini; })
      .def_property_readonly("vocab_size", [](const PyModel& pm) { return pm.mc().vocab_size; })
      .def_property_readonly("d_model", [](const PyModel& pm) { return pm.mc().d_model; })
      .def_property_readonly("n_ctx", [](const PyModel& pm) { return pm.mc().n_ctx; })
      .def_property_readonly("n_layer", [](const PyModel& pm) { return pm.mc().n_layer; })
      .def_property_readonly("n_head", [](const PyModel& pm) { return pm.mc().n_head; })
      .def("__repr__", [](const PyModel& pm) {
        const wte::ModelConfig& c = pm.mc();
        return "wte.Model('" + pm.loaded().path + "', step " +
               std::to_string(pm.loaded().info.step) +
               ": vocab_size " + std::to_string(c.vocab_size) + ", d_model " +
               std::to_string(c.d_model) + ", n_layer " + std::to_string(c.n_layer) + ", n_head " +
               std::to_string(c.n_head) + ", n_ctx " + std::to_string(c.n_ctx) + ")";
      });
  m.def("_train", &train, py::arg("config"), py::arg("overrides"), py::arg("out"),
        py::arg("overwrite"), py::arg("quiet"), py::arg("progress"), py::arg("resume"),
        py::arg("init_from"));
}

}  // namespace wte_python
