// The memory plan: see src/model/memory_plan.h.
#include "src/model/memory_plan.h"

#include <algorithm>

#include "src/model/attention_tiled.h"
#include "src/model/matmul.h"
#include "src/model/memory.h"
#include "wte/kernels.h"

namespace wte {

namespace {

// Carves 64-byte-aligned views out of one allocation of T (float or bf16 bits): with base ==
// nullptr only counts. Each view's rounded bytes go to its report part when `parts` is given.
template <typename T>
class ArenaCarver {
 public:
  ArenaCarver(T* base, std::map<std::string, size_t>* parts) : base_(base), parts_(parts) {}
  T* take(size_t n, const std::string& part) {
    constexpr size_t kAlign = 64 / sizeof(T);
    T* p = base_ == nullptr ? nullptr : base_ + used_;
    const size_t rounded = (n + kAlign - 1) / kAlign * kAlign;
    used_ += rounded;
    if (parts_ != nullptr) (*parts_)[part] += rounded * sizeof(T);
    return p;
  }
  size_t used() const { return used_; }

 private:
  T* base_;
  std::map<std::string, size_t>* parts_;
  size_t used_ = 0;
};

const char* const kHidden = "hidden states of one step";
const char* const kBlocks = "block activations of one step";
const char* const kInputs16 = "bf16 copies of one step's GEMM inputs";
const char* const kRounding = "allocation rounding";
const char* const kSmall = "batch ids and lookup sort buffers";

std::string loss_part(const UnembeddingTiles& tiles) {
  return tiles.fused() ? "loss workspace (fused, " + std::to_string(tiles.rows) + " rows x vocab_size)"
                       : "logits of one step";
}

}  // namespace

size_t MemoryPlan::bytes() const {
  size_t total = 0;
  for (const PlannedBuffer& b : buffers) total += b.bytes;
  return total;
}

size_t MemoryPlan::bytes(PlanOwner owner) const {
  size_t total = 0;
  for (const PlannedBuffer& b : buffers)
    if (b.owner == owner) total += b.bytes;
  return total;
}

size_t MemoryPlan::part_bytes(const std::string& part) const {
  size_t total = 0;
  for (const PlannedBuffer& b : buffers)
    if (b.part == part) total += b.bytes;
  return total;
}

std::vector<std::pair<std::string, size_t>> MemoryPlan::parts() const {
  std::vector<std::pair<std::string, size_t>> out;
  for (const PlannedBuffer& b : buffers) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == b.part; });
    if (it == out.end()) out.emplace_back(b.part, b.bytes);
    else it->second += b.bytes;
  }
  return out;
}

bool plan_bf16_gemms(const ModelConfig& config) {
  return config.matmul_precision == MatmulPrecision::bf16 && bf16_gemm_support().native;
}

size_t lay_out_activations(float* base, size_t N, size_t BTT, const ModelConfig& c,
                           ActivationViews* v, std::map<std::string, size_t>* parts) {
  const size_t C = c.d_model, V = c.vocab_size, L = c.n_layer, NH = c.n_head;
  ArenaCarver<float> a(base, parts);
  v->residual.assign(L + 1, nullptr);
  for (size_t l = 0; l <= L; ++l) v->residual[l] = a.take(N * C, kHidden);
  v->blocks.assign(L, BlockActivations{});
  for (BlockActivations& b : v->blocks) {
    b.ln1 = a.take(N * C, kBlocks);
    b.ln1_mean = a.take(N, kBlocks);
    b.ln1_rstd = a.take(N, kBlocks);
    b.qkv = a.take(N * 3 * C, kBlocks);
    b.att = a.take(BTT * NH, kBlocks);
    b.lse = a.take(N * NH, kBlocks);
    b.atty = a.take(N * C, kBlocks);
    b.xmid = a.take(N * C, kBlocks);
    b.ln2 = a.take(N * C, kBlocks);
    b.ln2_mean = a.take(N, kBlocks);
    b.ln2_rstd = a.take(N, kBlocks);
    b.fch = a.take(N * 4 * C, kBlocks);
    b.fch_gelu = a.take(N * 4 * C, kBlocks);
  }
  v->scratch = BlockScratch{};
  if (L > 0) {
    v->scratch.proj = a.take(N * C, kBlocks);
    v->scratch.datty = a.take(N * C, kBlocks);
    v->scratch.d4c = a.take(N * 4 * C, kBlocks);
    v->scratch.datt = a.take(BTT * NH, kBlocks);
  }
  v->ln_out = a.take(N * C, kHidden);
  v->ln_mean = a.take(N, kHidden);
  v->ln_rstd = a.take(N, kHidden);
  v->dln_out = a.take(N * C, kHidden);
  v->dresidual = a.take(N * C, kHidden);
  v->loss_tiles = resolve_loss_tiles(c, N);
  const bool fused = v->loss_tiles.fused();
  v->loss_floats = fused ? unembedding_workspace_floats(v->loss_tiles, V, C) : N * V;
  v->logits = fused ? nullptr : a.take(v->loss_floats, loss_part(v->loss_tiles));
  v->loss_ws = fused ? a.take(v->loss_floats, loss_part(v->loss_tiles)) : nullptr;
  v->losses = a.take(N, kHidden);
  v->wte_rows = c.tie_embeddings ? nullptr : a.take(N * C, "wte gradient rows");
  return a.used();
}

size_t lay_out_activations16(uint16_t* base, size_t N, size_t BTT, const ModelConfig& c,
                             ActivationViews* v, std::map<std::string, size_t>* parts) {
  const size_t C = c.d_model, V = c.vocab_size, NH = c.n_head;
  ArenaCarver<uint16_t> a(base, parts);
  for (BlockActivations& b : v->blocks) {
    b.ln1.bf16 = a.take(N * C, kInputs16);
    b.atty.bf16 = a.take(N * C, kInputs16);
    b.ln2.bf16 = a.take(N * C, kInputs16);
    b.fch_gelu.bf16 = a.take(N * 4 * C, kInputs16);
    // the dense attention's QKᵀ and ·V GEMMs read qkv in bf16 too; the tiled attention (BTT = 0)
    // reads the float32 qkv
    b.qkv.bf16 = BTT > 0 ? a.take(N * 3 * C, kInputs16) : nullptr;
    b.att.bf16 = a.take(BTT * NH, kInputs16);
  }
  if (!v->blocks.empty()) {
    v->scratch.d4c.bf16 = a.take(N * 4 * C, kInputs16);
    v->scratch.datty.bf16 = BTT > 0 ? a.take(N * C, kInputs16) : nullptr;  // as qkv's
    v->scratch.datt.bf16 = a.take(BTT * NH, kInputs16);
    v->dresidual16 = a.take(N * C, kInputs16);
  }
  v->h16 = a.take(N * C, kInputs16);
  const bool fused = v->loss_tiles.fused();
  v->loss16_elems = fused ? unembedding_workspace16_elems(v->loss_tiles) : N * V;
  v->dlogits16 = fused ? nullptr : a.take(v->loss16_elems, loss_part(v->loss_tiles));
  v->loss_ws16 = fused ? a.take(v->loss16_elems, loss_part(v->loss_tiles)) : nullptr;
  return a.used();
}

size_t accumulated_wte_rows(const ModelConfig& c, size_t N, size_t micro_batches) {
  if (c.tie_embeddings || micro_batches <= 1) return 0;
  return std::min(micro_batches * N, c.vocab_size);
}

MemoryPlan plan_memory(const ModelConfig& c, const PlanShape& shape) {
  MemoryPlan plan;
  const size_t V = c.vocab_size, C = c.d_model;
  const std::vector<TensorSpec> tensors = parameter_tensors(c);
  const size_t P = tensors.back().offset + tensors.back().size;
  const bool bf16 = plan_bf16_gemms(c);
  const size_t N = shape.B * shape.T;
  // the dense attention's (B,NH,T,T) probabilities; the tiled one keeps (B,NH,T) (blocks' lse)
  const size_t BTT = use_tiled_attention(c, shape.T) ? 0 : shape.B * shape.T * shape.T;
  size_t rounding = 0, rounding_adamw = 0;  // the model's allocations', AdamW's
  // A whole allocation of `bytes` in one part; its rounding (allocate_aligned) goes to kRounding.
  auto allocation = [&](const std::string& name, const std::string& part, size_t bytes,
                        PlanOwner owner) {
    plan.buffers.push_back({name, part, bytes, owner});
    (owner == PlanOwner::kOptimizer ? rounding_adamw : rounding) +=
        aligned_allocation_bytes(bytes) - bytes;
  };
  // Model(): the parameter and gradient arenas, the bf16 parameter mirror.
  allocation("parameters", "parameters", P * sizeof(float), PlanOwner::kModel);
  allocation("gradients", "gradients", P * sizeof(float), PlanOwner::kModel);
  if (bf16)
    allocation("bf16 copy of the parameters", "bf16 copy of the parameters", P * sizeof(uint16_t),
               PlanOwner::kModel);
  // Small buffers the model keeps: the tied wte's norm block sums (Model::grad_norm_head).
  size_t small = c.tie_embeddings ? V * C / kSumOfSquaresBlock * sizeof(double) : 0;
  // AdamW (wte::AdamW): m and v.
  if (shape.adamw) {
    allocation("AdamW m", "AdamW m and v", P * sizeof(float), PlanOwner::kOptimizer);
    allocation("AdamW v", "AdamW m and v", P * sizeof(float), PlanOwner::kOptimizer);
  }
  // Model::reserve(B, T): the activation arenas, carved view by view.
  if (N > 0) {
    ActivationViews v;
    std::map<std::string, size_t> parts;
    const size_t floats = lay_out_activations(nullptr, N, BTT, c, &v, &parts);
    size_t elems16 = 0;
    if (bf16) elems16 = lay_out_activations16(nullptr, N, BTT, c, &v, &parts);
    // In the order of the report: the loss, the hidden states, the blocks, then the rest.
    const std::string loss = loss_part(v.loss_tiles);
    for (const std::string& part : {loss, std::string(kHidden), std::string(kBlocks),
                                    std::string("wte gradient rows"), std::string(kInputs16)}) {
      auto it = parts.find(part);
      if (it == parts.end() || it->second == 0) continue;
      plan.buffers.push_back({"activations: " + part, part, it->second, PlanOwner::kModel});
    }
    rounding += aligned_allocation_bytes(floats * sizeof(float)) - floats * sizeof(float);
    if (bf16)
      rounding += aligned_allocation_bytes(elems16 * sizeof(uint16_t)) - elems16 * sizeof(uint16_t);
    // Untied wte, several backward passes per zero_grad: their merged gradient rows and ids.
    const size_t acc = accumulated_wte_rows(c, N, shape.micro_batches);
    if (acc > 0) {
      allocation("wte gradient rows of the micro-batches", "wte gradient rows",
                 acc * C * sizeof(float), PlanOwner::kModel);
      small += acc * sizeof(int32_t);
    }
    // The lookup backward's ids and its counting sort (ScatterWorkspace), reserved once.
    const size_t touched = std::min(N, V);
    small += (N + N) * sizeof(int32_t)                       // inputs, touched ids (untied)
             + (V + 1 + N + touched) * sizeof(int32_t)       // row_start, order, touched
             + (std::min(N / kScatterHotCount, V) + std::min(N / 2, V)) * sizeof(int32_t);  // hot, multi
  }
  if (small > 0) plan.buffers.push_back({"lookup sort buffers, norm sums and ids", kSmall, small,
                                         PlanOwner::kModel});
  // The training loop: the step's samples (micro_batches x B indices) and one micro-batch's
  // inputs and targets (B x T ids each; train/run_state.h StepBatch).
  if (shape.trainer && N > 0)
    plan.buffers.push_back({"batch inputs and targets", kSmall,
                            shape.micro_batches * shape.B * sizeof(uint32_t) +
                                2 * N * sizeof(int32_t),
                            PlanOwner::kTrainer});
  if (rounding > 0)
    plan.buffers.push_back({"allocation rounding (model)", kRounding, rounding, PlanOwner::kModel});
  if (rounding_adamw > 0)
    plan.buffers.push_back(
        {"allocation rounding (AdamW)", kRounding, rounding_adamw, PlanOwner::kOptimizer});
  return plan;
}

}  // namespace wte
