// libFuzzer target: every kernel and model call of the Python module while a second thread
// rewrites the call's argument arrays. The module's sources (python/wte_module.cc, python/model.cc)
// are compiled into this program with ASan+UBSan and registered as the embedded module `_wte` of
// an interpreter this program starts (Debian's libpython3 and numpy), so every byte the calls
// touch is checked. A call releases the GIL while it computes; the mutating thread (C++, never
// holding the GIL) writes into the arrays' memory all along the call, from before its arguments
// are checked until it returns. Property: every call returns or raises IndexError or ValueError
// (a changed id can be refused or give a wrong result); no sanitizer report, no crash.
// Input: byte 0 picks the call (the kernels, each scatter strategy, Model.__call__ with and
// without hidden states, Model.loss, Model.generate); byte 1 a size, byte 2 the width C; the rest
// holds the initial ids and the int32 and float32 values the mutating thread cycles through
// (valid ids, 2^30, -1, INT32_MIN, NaN, ...).
#include <pybind11/embed.h>
#include <pybind11/numpy.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/model.h"
#include "wte/tokenizer.h"

namespace py = pybind11;

namespace wte_python {
void define_module(py::module_& m);  // python/wte_module.cc
}  // namespace wte_python

PYBIND11_EMBEDDED_MODULE(_wte, m) { wte_python::define_module(m); }

namespace {

// The mutating thread: writes `ints` into every int32 array and `floats` into every float32
// array, cyclically, element by element, until stopped. The arrays stay referenced (alive) until
// stop() joins it.
class Mutator {
 public:
  void start(const py::list& arrays, const py::bytes& ints, const py::bytes& floats) {
    const std::string i = ints, f = floats;
    ints_.assign(i.size() / 4, 0);
    if (!ints_.empty()) std::memcpy(ints_.data(), i.data(), ints_.size() * 4);
    floats_.assign(f.size() / 4, 0.0f);
    if (!floats_.empty()) std::memcpy(floats_.data(), f.data(), floats_.size() * 4);
    for (const py::handle h : arrays) {
      py::array a = py::reinterpret_borrow<py::array>(h);
      const bool is_int = a.dtype().is(py::dtype::of<int32_t>());
      if (!is_int && !a.dtype().is(py::dtype::of<float>())) continue;
      targets_.push_back({a, a.mutable_data(), static_cast<size_t>(a.size()), is_int});
    }
    stop_ = false;
    thread_ = std::thread([this] { run(); });
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    targets_.clear();
  }

 private:
  struct Target {
    py::array keep;  // touched only under the GIL (start and stop)
    void* data;
    size_t n;
    bool is_int;
  };
  void run() {
    size_t k = 0;
    while (!stop_.load(std::memory_order_relaxed))
      for (const Target& t : targets_) {
        if (t.n == 0) continue;
        const size_t i = k % t.n;
        if (t.is_int && !ints_.empty())
          static_cast<volatile int32_t*>(t.data)[i] = ints_[k % ints_.size()];
        else if (!t.is_int && !floats_.empty())
          static_cast<volatile float*>(t.data)[i] = floats_[k % floats_.size()];
        ++k;
      }
  }
  std::vector<Target> targets_;
  std::vector<int32_t> ints_;
  std::vector<float> floats_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

Mutator g_mutator;

PYBIND11_EMBEDDED_MODULE(_fuzz_mutator, m) {
  m.def("start", [](const py::list& arrays, const py::bytes& ints, const py::bytes& floats) {
    g_mutator.start(arrays, ints, floats);
  });
  m.def("stop", [] { g_mutator.stop(); });
}

// The harness: builds the call's arguments from the input, starts the mutator on them, calls.
constexpr const char* kHarness = R"PY(
import numpy as np
import _wte as wte
import _fuzz_mutator as mut

MODEL = wte.Model.load(CHECKPOINT)
STRATEGIES = wte.scatter_strategies()
HP = {"lr": 1e-3, "step": 1}


def calls(n, C, ids, f):
    """name -> (arrays the mutator rewrites, call)."""
    V = 64
    table = f((V, C))
    dout = f((n, C))
    tid = ids(n, V)
    rows = np.arange(min(n, V), dtype=np.int32)  # distinct, as adamw_update_rows needs
    out = {
        "gather": ([tid, table], lambda: wte.gather(table, tid)),
        "gather out": ([tid, table, dout], lambda: wte.gather(table, tid, dout)),
        "embedding_forward": ([tid, table], lambda: wte.embedding_forward(tid.reshape(1, n), table, f((n, C)))),
        "embedding_backward_rows": ([tid, dout], lambda: wte.embedding_backward_rows(dout, tid, V)),
        "adamw_lazy": ([tid, dout, table], lambda: wte.adamw_lazy(table, f((V, C)), np.abs(f((V, C))), dout, tid, **HP)),
        "adamw_update_rows": ([rows, dout], lambda: wte.adamw_update_rows(
            table, f((V, C)), np.abs(f((V, C))), dout[:len(rows)], rows, **HP)),
        "softmax_cross_entropy": ([tid], lambda: wte.softmax_cross_entropy(f((n, V)), tid)),
        "cross_entropy_loss": ([tid], lambda: wte.cross_entropy_loss(f((n, V)), tid)),
        "scatter_wpe": ([dout], lambda: wte.scatter_wpe(f((n, C)), dout.reshape(1, n, C))),
        "adamw": ([dout], lambda: wte.adamw(f((n, C)), dout, f((n, C)), np.abs(f((n, C))), **HP)),
    }
    for s in STRATEGIES:
        out["scatter " + s] = ([tid, dout], lambda s=s: wte.scatter(table, dout, tid, s))
    T = 1 + n % MODEL.n_ctx
    mid = ids(2 * (T + 1), MODEL.vocab_size)
    out["Model.__call__"] = ([mid], lambda: MODEL(mid[:2 * T].reshape(2, T)))
    out["Model.__call__ hidden"] = ([mid], lambda: MODEL(mid[:T], output_hidden_states=True))
    out["Model.loss"] = ([mid], lambda: MODEL.loss(mid.reshape(2, T + 1), batch_size=1))
    out["Model.generate"] = ([mid], lambda: MODEL.generate(mid[:T], max_new_tokens=3, seed=n))
    return out


NAMES = sorted(calls(1, 1, lambda n, hi: np.zeros(n, np.int32), lambda s: np.zeros(s, np.float32)))


def run(data):
    if len(data) < 3:
        return
    op, n, C = data[0] % len(NAMES), 1 + data[1] % 48, 1 + data[2] % 16
    rest = data[3:]
    half = (len(rest) // 8) * 4
    ints, floats = rest[:half], rest[half:2 * half]
    rng = np.random.default_rng(len(data))

    def ids(k, hi):
        # Valid ids (the call must start from arguments it accepts), seeded by the input.
        return rng.integers(0, hi, size=k).astype(np.int32)

    def f(shape):
        return rng.standard_normal(shape).astype(np.float32)

    arrays, call = calls(n, C, ids, f)[NAMES[op]]
    mut.start(arrays, ints, floats)
    try:
        call()
    except (IndexError, ValueError):
        pass
    finally:
        mut.stop()
)PY";

py::object g_run;

// A tiny trained-shape model (vocab of a small text, d_model 16, one block) saved as a checkpoint
// for Model.load.
std::string write_checkpoint() {
  std::string text;
  const char* words[] = {"the ", "king ", "said ", "unto ", "them ", "and ", "people ", "went ",
                         "into ", "city ", "bank ", "river "};
  uint32_t x = 7;
  for (int i = 0; i < 4000; ++i) {
    x = x * 1664525u + 1013904223u;
    text += words[(x >> 16) % 12];
    if (i % 11 == 10) text += ".\n";
  }
  const wte::Tokenizer tok = wte::Tokenizer::train(text, 300);
  const wte::Config cfg = wte::load_config(
      "", {"--model.vocab_size=" + std::to_string(tok.size()), "--model.d_model=16",
           "--model.n_ctx=16", "--model.n_layer=1", "--model.n_head=2", "--data.seq_len=16"});
  wte::Model model(cfg.model);
  model.init_weights(1);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("wte_fuzz_python_" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/checkpoint.h5";
  wte::save_checkpoint(path, model, nullptr, tok, cfg, 0);
  return path;
}

}  // namespace

// LeakSanitizer at exit: what the interpreter and numpy still hold when the process ends (the
// interpreter is never finalized) is theirs, not a leak of the module under test.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libpython3\nleak:_multiarray_umath\nleak:libopenblas\n";
}

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // Python's own allocations outlive every input (interned objects, numpy's caches): libFuzzer's
  // per-input leak check would report them, so it is off unless asked for on the command line.
  static std::vector<char*> args(*argv, *argv + *argc);
  static char no_leaks[] = "-detect_leaks=0";
  args.insert(args.begin() + 1, no_leaks);
  *argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  *argv = args.data();
  const std::string checkpoint = write_checkpoint();
  py::initialize_interpreter();
  py::dict scope;
  scope["__builtins__"] = py::module_::import("builtins");
  scope["CHECKPOINT"] = checkpoint;
  py::exec(kHarness, scope);
  g_run = scope["run"];
  std::filesystem::remove_all(std::filesystem::path(checkpoint).parent_path());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    g_run(py::bytes(reinterpret_cast<const char*>(data), size));
  } catch (const py::error_already_set& e) {
    std::fprintf(stderr, "fuzz_python_threads: unexpected exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}
