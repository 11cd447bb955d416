#include "src/model/parameters.h"

#include <string>
#include <utility>

namespace wte {
namespace {

// Appends tensors to a table, each at the running offset.
class TableBuilder {
 public:
  void add(std::string name, std::vector<size_t> shape, bool decay) {
    size_t size = 1;
    for (size_t d : shape) size *= d;
    tensors_.push_back({std::move(name), std::move(shape), offset_, size, decay});
    offset_ += size;
  }
  std::vector<TensorSpec> take() { return std::move(tensors_); }

 private:
  std::vector<TensorSpec> tensors_;
  size_t offset_ = 0;
};

}  // namespace

std::vector<TensorSpec> block_parameter_tensors(size_t C) {
  TableBuilder t;
  t.add("ln_1/g", {C}, false);
  t.add("ln_1/b", {C}, false);
  t.add("attn/c_attn/w", {C, 3 * C}, true);
  t.add("attn/c_attn/b", {3 * C}, false);
  t.add("attn/c_proj/w", {C, C}, true);
  t.add("attn/c_proj/b", {C}, false);
  t.add("ln_2/g", {C}, false);
  t.add("ln_2/b", {C}, false);
  t.add("mlp/c_fc/w", {C, 4 * C}, true);
  t.add("mlp/c_fc/b", {4 * C}, false);
  t.add("mlp/c_proj/w", {4 * C, C}, true);
  t.add("mlp/c_proj/b", {C}, false);
  return t.take();
}

std::vector<TensorSpec> parameter_tensors(const ModelConfig& config) {
  const size_t V = config.vocab_size, C = config.d_model, P = config.n_ctx;
  TableBuilder t;
  t.add("wte", {V, C}, true);
  t.add("wpe", {P, C}, true);
  const std::vector<TensorSpec> block = block_parameter_tensors(C);
  for (size_t l = 0; l < config.n_layer; ++l) {
    const std::string h = "h" + std::to_string(l) + "/";
    for (const TensorSpec& b : block) t.add(h + b.name, b.shape, b.weight_decay);
  }
  t.add("ln_f/g", {C}, false);
  t.add("ln_f/b", {C}, false);
  std::vector<TensorSpec> tensors;
  if (!config.tie_embeddings) {
    t.add("lm_head", {V, C}, true);
    tensors = t.take();
    tensors[0].sparse_grad = true;  // wte: lazy row-sparse gradient (Model::wte_grad_rows)
  } else {
    tensors = t.take();
  }
  return tensors;
}

}  // namespace wte
