// libFuzzer target: the safetensors reader (src/io/safetensors.h: View, to_f32, header_bytes) and
// the GPT-2 import's checks (src/io/hf_gpt2.h: check_tensors, load_tensors) on raw bytes, the
// input being a whole model.safetensors file. Properties beyond "no crash, hang, leak or
// sanitizer report": a file that parses has tensors that tile its data buffer exactly inside the
// input; every F32/F16/BF16 tensor converts; the header wte writes for the same tensors parses
// back to the same names, dtypes, shapes, bytes and metadata; the GPT-2 checks against a fixed
// tiny config (vocab_size 256, d_model 4, n_ctx 4, n_layer 1, n_head 2, tied) end in a
// wte::Error or a loaded model. Seeds: fuzz/corpus/safetensors (fuzz/make_safetensors_seeds.py).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "src/io/hf_gpt2.h"
#include "src/io/safetensors.h"
#include "wte/config.h"
#include "wte/error.h"
#include "wte/model.h"

namespace {

namespace st = wte::safetensors;

// Rebuilds the file from wte's writer's header (F32 tensors only) and parses it again.
void check_round_trip(const st::View& v) {
  std::vector<st::OutTensor> out;
  std::vector<std::vector<float>> copies;  // aligned copies of the tensors' bytes
  copies.reserve(v.tensors().size());
  std::vector<const st::TensorInfo*> order;
  for (const st::TensorInfo& t : v.tensors()) {
    if (t.dtype != st::Dtype::F32) return;
    order.push_back(&t);
  }
  for (const st::TensorInfo* t : order) {
    copies.emplace_back(t->numel());
    if (t->numel()) std::memcpy(copies.back().data(), v.data(*t), t->end - t->begin);
    out.push_back({t->name, t->shape, copies.back().data()});
  }
  std::string file = st::header_bytes(out, v.metadata());
  for (const auto& c : copies) file.append(reinterpret_cast<const char*>(c.data()), c.size() * 4);
  const st::View back(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "round trip");
  if (back.tensors().size() != order.size() || back.metadata() != v.metadata()) __builtin_trap();
  if (back.data_start() % 8 != 0) __builtin_trap();
  for (size_t i = 0; i < order.size(); ++i) {
    const st::TensorInfo& a = *order[i];
    const st::TensorInfo& b = back.tensors()[i];
    if (a.name != b.name || a.shape != b.shape || b.dtype != st::Dtype::F32 ||
        a.end - a.begin != b.end - b.begin ||
        std::memcmp(v.data(a), back.data(b), a.end - a.begin) != 0)
      __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const st::View v(data, size, "fuzz input");
    uint64_t covered = 0;
    for (const st::TensorInfo& t : v.tensors()) {
      if (t.end < t.begin || v.data_start() + t.end > size) __builtin_trap();
      if (t.end - t.begin != t.numel() * st::dtype_size(t.dtype)) __builtin_trap();
      covered += t.end - t.begin;
      if (t.dtype == st::Dtype::F32 || t.dtype == st::Dtype::F16 || t.dtype == st::Dtype::BF16) {
        std::vector<float> values(t.numel());
        v.to_f32(t, values.data());
      }
    }
    if (v.data_start() + covered != size) __builtin_trap();
    check_round_trip(v);
    wte::ModelConfig c;
    c.vocab_size = 256;
    c.d_model = 4;
    c.n_ctx = 4;
    c.n_layer = 1;
    c.n_head = 2;
    c.tie_embeddings = (size & 1) == 0;  // both ways, from the input's length
    try {
      const wte::hf::FileLayout layout = wte::hf::check_tensors(v, c);
      wte::Model model(c);
      wte::hf::load_tensors(v, layout, model);
    } catch (const wte::Error&) {
    }
  } catch (const wte::Error&) {
  }
  return 0;
}
