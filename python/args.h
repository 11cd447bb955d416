// Argument checks shared by the extension's source files (python/wte_module.cc: kernels,
// checkpoints, tokenizer; python/model.cc: wte.Model and wte.train). Every argument is converted
// and checked through an Args before any work, so every error reads "<function>: <argument> ..."
// and is a TypeError, ValueError or IndexError (python/wte_module.cc's header lists the rules).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "train/memory.h"  // available_memory_bytes

namespace wte_python {

namespace py = pybind11;

// ---- argument checks ---------------------------------------------------------------------------

enum class Kind { kFloat32, kInt32 };

inline const char* kind_name(Kind k) { return k == Kind::kFloat32 ? "float32" : "int32"; }

inline std::string shape_str(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    if (i) s += ", ";
    s += std::to_string(a.shape(i));
  }
  return s + (a.ndim() == 1 ? ",)" : ")");
}

inline std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  return buf;
}

inline std::string type_name(const py::handle& obj) {
  return py::str(py::type::of(obj).attr("__name__"));
}

// The range a real hyper-parameter must lie in (every one must also be finite as a float32).
struct Range {
  double lo, hi;
  bool lo_open, hi_open;
  const char* text;  // "" for any finite value
  bool contains(double x) const {
    return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  }
};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr Range kAnyFinite{-kInf, kInf, false, false, ""};
constexpr Range kNonNegative{0.0, kInf, false, false, ">= 0"};
constexpr Range kPositive{0.0, kInf, true, false, "> 0"};
constexpr Range kUnit{0.0, 1.0, false, true, "in [0, 1)"};

// The arguments of one call of a Python function. Every argument is converted and checked through
// it before any work, so every error reads "<function>: <argument> ..." and is a TypeError,
// ValueError or IndexError. Arrays the kernel writes (outputs) are checked against every other
// array of the call as they are taken: two arrays, at least one of them written, must not share a
// byte (the kernels assume restrict; an output over the ids would move the lookups mid-kernel).
class Args {
 public:
  explicit Args(std::string function) : fn_(std::move(function)) {}

  [[noreturn]] void type_error(const std::string& what) const {
    throw py::type_error(fn_ + ": " + what);
  }
  [[noreturn]] void value_error(const std::string& what) const {
    throw py::value_error(fn_ + ": " + what);
  }
  [[noreturn]] void index_error(const std::string& what) const {
    throw py::index_error(fn_ + ": " + what);
  }
  [[noreturn]] void memory_error(const std::string& what) const {
    PyErr_SetString(PyExc_MemoryError, (fn_ + ": " + what).c_str());
    throw py::error_already_set();
  }

  // Raises MemoryError, before anything is allocated, when `bytes` exceed what this process may
  // still allocate (wte::available_memory_bytes, train/memory.h: MemAvailable capped by the
  // cgroup's limit, as `wte train` checks; nothing is checked when that is unknown). `what` says
  // what the bytes hold and which argument sizes them; `lower` what to pass instead.
  void check_memory(double bytes, const std::string& what, const std::string& lower) const {
    const uint64_t available = wte::available_memory_bytes();
    if (available == 0 || bytes <= static_cast<double>(available)) return;
    memory_error(what + ": about " + gib(bytes) + " of memory, but " +
                 gib(static_cast<double>(available)) + " is available; " + lower);
  }

  // The ndarray `obj` as argument `name`: exact dtype, C-contiguous, `ndim` dimensions (-1: any),
  // writeable if `output` (then it must not overlap any other array argument). Never converts or
  // copies.
  py::array array(const py::handle& obj, const std::string& name, Kind kind, int ndim,
                  bool output) {
    if (!py::isinstance<py::array>(obj))
      type_error(name + " is a " + type_name(obj) + ", need a numpy.ndarray of " + kind_name(kind));
    py::array a = py::reinterpret_borrow<py::array>(obj);
    const bool dtype_ok = kind == Kind::kFloat32 ? a.dtype().is(py::dtype::of<float>())
                                                 : a.dtype().is(py::dtype::of<int32_t>());
    if (!dtype_ok)
      type_error(name + " has dtype " + std::string(py::str(a.dtype())) + ", need " +
                 kind_name(kind) + " (convert with .astype(numpy." + kind_name(kind) + "))");
    if (ndim >= 0 && a.ndim() != ndim)
      value_error(name + " has shape " + shape_str(a) + ", " + std::to_string(a.ndim()) +
                  " dimensions, need " + std::to_string(ndim));
    if (!(a.flags() & py::array::c_style))
      value_error(name + " is not C-contiguous (shape " + shape_str(a) +
                  "); pass numpy.ascontiguousarray(" + name + ")");
    if (output && !a.writeable())
      value_error(name + " is a read-only array; " + fn_ + " writes into it");
    for (const Taken& t : arrays_)
      if ((output || t.output) && overlap(a, t.array))
        value_error(output ? name + " overlaps " + t.name + " in memory (" + fn_ + " writes " +
                                 name + ")"
                           : t.name + " overlaps " + name + " in memory (" + fn_ + " writes " +
                                 t.name + ")");
    arrays_.push_back(Taken{name, a, output});
    return a;
  }

  // a.shape[axis] == want ("need <what> = want in dimension axis").
  void dim(const py::array& a, const std::string& name, int axis, size_t want,
           const char* what) const {
    if (static_cast<size_t>(a.shape(axis)) != want)
      value_error(name + " has shape " + shape_str(a) + ", need " + what + " = " +
                  std::to_string(want) + " in dimension " + std::to_string(axis));
  }

  // Every id of `ids` (an owned copy, owned_ids) in [0, V); IndexError naming the first one that
  // is not.
  void ids(const std::vector<int32_t>& ids, const std::string& name, size_t V,
           const char* table) const {
    const int32_t* p = ids.data();
    const size_t n = ids.size();
    for (size_t i = 0; i < n; ++i)
      if (p[i] < 0 || static_cast<size_t>(p[i]) >= V)
        index_error(name + "[" + std::to_string(i) + "] = " + std::to_string(p[i]) +
                    " is outside [0, " + std::to_string(V) + "), the rows of " + table);
  }

  // The kernels number positions with int32_t: fewer than 2^31 ids.
  void id_count(const py::array& ids, const std::string& name) const {
    if (static_cast<uint64_t>(ids.size()) > static_cast<uint64_t>(INT32_MAX))
      value_error(name + " has " + std::to_string(ids.size()) + " ids, at most 2^31 - 1");
  }

  // A real number (float, int, numpy scalar, anything with __float__) that is finite as a float32
  // and, rounded to float32, inside `range`. Returned unrounded (real() rounds).
  double real_value(const py::handle& obj, const std::string& name, const Range& range) const {
    if (PyUnicode_Check(obj.ptr()) || PyBytes_Check(obj.ptr()))
      type_error(name + " is a " + type_name(obj) + ", need a real number");
    const double x = PyFloat_AsDouble(obj.ptr());
    if (x == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      type_error(name + " is a " + type_name(obj) + ", need a real number");
    }
    const std::string shown = py::repr(py::float_(x));
    if (!std::isfinite(x)) value_error(name + " = " + shown + " is not finite");
    const float f = static_cast<float>(x);
    if (!std::isfinite(f))
      value_error(name + " = " + shown + " is not finite as a float32 (|x| <= 3.4e38)");
    if (!range.contains(f)) value_error(name + " = " + shown + ", need " + range.text);
    return x;
  }
  float real(const py::handle& obj, const std::string& name, const Range& range) const {
    return static_cast<float>(real_value(obj, name, range));
  }

  // An integer (int, numpy integer, anything with __index__; not a float, not a bool: True is not
  // a count) in [lo, hi].
  int64_t integer(const py::handle& obj, const std::string& name, int64_t lo, int64_t hi) const {
    if (PyBool_Check(obj.ptr()))
      type_error(name + " is a bool (" + std::string(py::repr(obj)) + "), need an integer");
    PyObject* index = PyNumber_Index(obj.ptr());
    if (!index) {
      PyErr_Clear();
      type_error(name + " is a " + type_name(obj) + ", need an integer");
    }
    const py::object owned = py::reinterpret_steal<py::object>(index);
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(index, &overflow);
    if (x == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      type_error(name + " is a " + type_name(obj) + ", need an integer");
    }
    if (overflow || x < lo || x > hi)
      value_error(name + " = " + std::string(py::repr(owned)) + ", need " +
                  (hi == std::numeric_limits<int64_t>::max()
                       ? ">= " + std::to_string(lo)
                       : "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"));
    return x;
  }

  // (beta1, beta2): a sequence of two reals, each in [0, 1). Returned unrounded.
  std::pair<double, double> betas_value(const py::handle& obj, const std::string& name) const {
    if (!PySequence_Check(obj.ptr()) || PyUnicode_Check(obj.ptr()) || PyBytes_Check(obj.ptr()))
      type_error(name + " is a " + type_name(obj) + ", need a pair (beta1, beta2)");
    const py::ssize_t n = PySequence_Size(obj.ptr());
    if (n < 0) {
      PyErr_Clear();
      type_error(name + " is a " + type_name(obj) + ", need a pair (beta1, beta2)");
    }
    if (n != 2) value_error(name + " has " + std::to_string(n) + " items, need 2 (beta1, beta2)");
    const py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
    return {real_value(seq[0], name + "[0]", kUnit), real_value(seq[1], name + "[1]", kUnit)};
  }

  // str or bytes; a str is encoded as UTF-8 (a lone surrogate is a ValueError).
  std::string text(const py::handle& obj, const std::string& name) const {
    if (PyBytes_Check(obj.ptr())) return py::reinterpret_borrow<py::bytes>(obj);
    if (!PyUnicode_Check(obj.ptr()))
      type_error(name + " is a " + type_name(obj) + ", need str or bytes");
    py::ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(obj.ptr(), &size);
    if (!data) {
      PyErr_Clear();
      value_error(name + " is not encodable as UTF-8 (a lone surrogate?)");
    }
    return std::string(data, static_cast<size_t>(size));
  }

  // A file system path: str, bytes or os.PathLike, without NUL bytes (the C library would stop
  // at the first one and open another file).
  std::string path(const py::handle& obj, const std::string& name) const {
    PyObject* fs = PyOS_FSPath(obj.ptr());
    if (!fs) {
      PyErr_Clear();
      type_error(name + " is a " + type_name(obj) + ", need a path (str, bytes or os.PathLike)");
    }
    py::object p = py::reinterpret_steal<py::object>(fs);
    if (PyUnicode_Check(fs)) {
      PyObject* encoded = PyUnicode_EncodeFSDefault(fs);
      if (!encoded) {
        PyErr_Clear();
        value_error(name + " is not encodable in the file system's encoding");
      }
      p = py::reinterpret_steal<py::object>(encoded);
    }
    const std::string s = py::reinterpret_borrow<py::bytes>(p);
    const size_t nul = s.find('\0');
    if (nul != std::string::npos)
      value_error(name + " contains a NUL byte (at offset " + std::to_string(nul) +
                  "), which no file name can hold");
    return s;
  }

  // A str without NUL bytes.
  std::string str(const py::handle& obj, const std::string& name) const {
    if (!PyUnicode_Check(obj.ptr())) type_error(name + " is a " + type_name(obj) + ", need a str");
    std::string s = text(obj, name);
    if (s.find('\0') != std::string::npos) value_error(name + " contains a NUL byte");
    return s;
  }

 private:
  // The byte ranges of two C-contiguous arrays intersect.
  static bool overlap(const py::array& a, const py::array& b) {
    if (a.nbytes() == 0 || b.nbytes() == 0) return false;
    const auto a0 = reinterpret_cast<uintptr_t>(a.data());
    const auto b0 = reinterpret_cast<uintptr_t>(b.data());
    return a0 < b0 + static_cast<uintptr_t>(b.nbytes()) &&
           b0 < a0 + static_cast<uintptr_t>(a.nbytes());
  }

  struct Taken {
    std::string name;
    py::array array;
    bool output;
  };
  std::string fn_;
  std::vector<Taken> arrays_;
};


// bytes, bytearray and memoryview (and str) hold text or raw bytes, not token ids: iterating one
// would take each byte (or character) as an id. TypeError naming `name`.
inline void refuse_bytes_as_ids(const Args& args, const py::handle& obj, const std::string& name) {
  if (PyBytes_Check(obj.ptr()) || PyByteArray_Check(obj.ptr()) || PyMemoryView_Check(obj.ptr()) ||
      PyUnicode_Check(obj.ptr()))
    args.type_error(name + " is a " + type_name(obj) + ", need token ids (a list or an integer "
                    "numpy array; encode text with the tokenizer's encode)");
}

// A copy of the int32 C-contiguous array `a` (an argument Args::array took), made while the GIL is
// held. The GIL is released while a kernel runs, so another Python thread may change the caller's
// array meanwhile: kernels index with this copy (checked by Args::ids), never with the caller's
// memory, and such a change can alter only the values a kernel reads, not where it reads or writes.
inline std::vector<int32_t> owned_ids(const py::array& a) {
  const int32_t* p = static_cast<const int32_t*>(a.data());
  return std::vector<int32_t>(p, p + a.size());
}

// Token ids: an iterable of integers (a list, a numpy integer array, ...), each an int32.
inline std::vector<int32_t> ids_of(const Args& args, const py::handle& ids_obj) {
  refuse_bytes_as_ids(args, ids_obj, "ids");
  if (py::isinstance<py::array>(ids_obj)) {
    py::array a = py::reinterpret_borrow<py::array>(ids_obj);
    if (a.dtype().kind() != 'i' && a.dtype().kind() != 'u')
      args.type_error("ids has dtype " + std::string(py::str(a.dtype())) + ", need integers");
    if (a.ndim() != 1) args.value_error("ids has shape " + shape_str(a) + ", need one dimension");
  }
  PyObject* it = PyObject_GetIter(ids_obj.ptr());
  if (!it) {
    PyErr_Clear();
    args.type_error("ids is a " + type_name(ids_obj) + ", need a sequence of token ids");
  }
  const py::iterator iter = py::reinterpret_steal<py::iterator>(it);
  std::vector<int32_t> ids;
  for (const py::handle& h : iter) {
    const std::string name = "ids[" + std::to_string(ids.size()) + "]";
    ids.push_back(static_cast<int32_t>(args.integer(h, name, INT32_MIN, INT32_MAX)));
  }
  return ids;
}


}  // namespace wte_python
