// wte_kernel_driver: runs one wte kernel from C++ on arrays in files, for tests/python/test_python_module.py
// (the Python module's results must equal these bit for bit). Test tool, never installed.
//   wte_kernel_driver KERNEL DIR
// DIR/args.txt holds "name value" lines (sizes, hyper-parameters, strategy); DIR/<array>.bin hold
// raw little-endian float32 or int32 arrays. Outputs are written as DIR/<array>.out.bin.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "wte/kernels.h"

namespace {

std::string g_dir;
std::map<std::string, std::string> g_args;

template <typename T>
std::vector<T> load(const std::string& name) {
  std::ifstream f(g_dir + "/" + name + ".bin", std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + name + ".bin");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<T> v(bytes.size() / sizeof(T));
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(v.data()));
  return v;
}

template <typename T>
void save(const std::string& name, const std::vector<T>& v) {
  std::ofstream f(g_dir + "/" + name + ".out.bin", std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

size_t size_arg(const std::string& k) { return std::stoull(g_args.at(k)); }
float float_arg(const std::string& k) { return std::stof(g_args.at(k)); }

wte::AdamWParams hp_args() {
  return {float_arg("lr"), float_arg("beta1"), float_arg("beta2"), float_arg("eps"),
          float_arg("weight_decay"), static_cast<int64_t>(size_arg("step"))};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s KERNEL DIR\n", argv[0]);
    return 2;
  }
  const std::string kernel = argv[1];
  g_dir = argv[2];
  try {
    std::ifstream args(g_dir + "/args.txt");
    for (std::string k, v; args >> k >> v;) g_args[k] = v;
    if (kernel == "gather") {
      auto table = load<float>("table");
      auto ids = load<int32_t>("ids");
      const size_t C = size_arg("C");
      std::vector<float> out(ids.size() * C);
      wte::embedding_gather(out.data(), ids.data(), table.data(), ids.size(), C);
      save("out", out);
    } else if (kernel == "embedding_forward") {
      auto wte_t = load<float>("wte"), wpe = load<float>("wpe");
      auto ids = load<int32_t>("ids");
      const size_t B = size_arg("B"), T = size_arg("T"), C = size_arg("C");
      std::vector<float> out(B * T * C);
      wte::embedding_forward(out.data(), ids.data(), wte_t.data(), wpe.data(), B, T, C);
      save("out", out);
    } else if (kernel == "scatter") {
      auto dtable = load<float>("dtable"), dout = load<float>("dout");
      auto ids = load<int32_t>("ids");
      const size_t C = size_arg("C"), V = dtable.size() / C;
      wte::ScatterStrategy s;
      if (!wte::parse_scatter_strategy(g_args.at("strategy").c_str(), &s))
        throw std::runtime_error("bad strategy");
      wte::ScatterWorkspace ws;
      wte::embedding_backward_wte_strategy(s, dtable.data(), dout.data(), ids.data(), ids.size(), C,
                                           V, &ws);
      save("dtable", dtable);
    } else if (kernel == "scatter_wpe") {
      auto dwpe = load<float>("dwpe"), dout = load<float>("dout");
      wte::embedding_backward_wpe(dwpe.data(), dout.data(), size_arg("B"), size_arg("T"),
                                  size_arg("C"));
      save("dwpe", dwpe);
    } else if (kernel == "embedding_backward_rows") {
      auto dout = load<float>("dout");
      auto ids = load<int32_t>("ids");
      const size_t C = size_arg("C"), V = size_arg("V"), N = ids.size();
      std::vector<float> rows(std::min(N, V) * C);
      std::vector<int32_t> touched(std::min(N, V));
      size_t k = 0;
      wte::ScatterWorkspace ws;
      wte::embedding_backward_rows(rows.data(), touched.data(), &k, dout.data(), ids.data(), N, C, V,
                                   &ws);
      rows.resize(k * C);
      touched.resize(k);
      save("grad_rows", rows);
      save("rows", touched);
    } else if (kernel == "adamw_update_rows" || kernel == "adamw_lazy" || kernel == "adamw") {
      auto params = load<float>("params"), m = load<float>("m"), v = load<float>("v");
      const wte::AdamWParams hp = hp_args();
      if (kernel == "adamw") {
        auto grads = load<float>("grads");
        wte::adamw_update(params.data(), grads.data(), m.data(), v.data(), params.size(), hp);
      } else if (kernel == "adamw_update_rows") {
        auto grad_rows = load<float>("grad_rows");
        auto rows = load<int32_t>("rows");
        wte::adamw_update_rows(params.data(), m.data(), v.data(), grad_rows.data(), rows.data(),
                               rows.size(), size_arg("C"), hp);
      } else {
        auto dout = load<float>("dout");
        auto ids = load<int32_t>("ids");
        const size_t C = size_arg("C");
        wte::ScatterWorkspace ws;
        wte::embedding_backward_adamw_lazy(params.data(), m.data(), v.data(), dout.data(),
                                           ids.data(), ids.size(), C, params.size() / C, hp, &ws);
      }
      save("params", params);
      save("m", m);
      save("v", v);
    } else if (kernel == "softmax_cross_entropy" || kernel == "cross_entropy_loss") {
      auto logits = load<float>("logits");
      auto targets = load<int32_t>("targets");
      const size_t N = targets.size(), V = logits.size() / N;
      std::vector<float> losses(N);
      if (kernel == "cross_entropy_loss") {
        wte::cross_entropy_loss(losses.data(), logits.data(), targets.data(), N, V);
      } else {
        wte::softmax_cross_entropy(logits.data(), losses.data(), targets.data(), N, V,
                                   float_arg("grad_scale"));
        save("logits", logits);
      }
      save("losses", losses);
    } else {
      std::fprintf(stderr, "unknown kernel %s\n", kernel.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wte_kernel_driver %s: %s\n", kernel.c_str(), e.what());
    return 1;
  }
  return 0;
}
