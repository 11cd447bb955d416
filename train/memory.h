// The memory of a training run: the estimate by part checked before any work (so a run that
// cannot fit fails at once, naming the setting to lower) and the report printed at start-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/model/memory_plan.h"
#include "train/run_state.h"
#include "wte/config.h"

namespace wte {

/// One part of a training run's memory: bytes, what it is and which setting scales it.
struct MemoryPart {
  std::string what;     // "AdamW m and v"
  double bytes = 0;
  std::string setting;  // "model.vocab_size x model.d_model"
  std::string lower;    // the settings to lower: "model.vocab_size or model.d_model"
};

/// The shape of one training forward of `cfg` for the memory plan: micro-batches of
/// train.batch_size / train.grad_accum_steps sequences of data.seq_len, grad_accum_steps of them
/// per optimizer step, AdamW and the training loop's batch buffers.
PlanShape training_plan_shape(const Config& cfg);

/// The memory a training run of `cfg` allocates, by part: the memory plan (src/model/memory_plan.h,
/// plan_memory(cfg.model, training_plan_shape(cfg))) added up by its parts, byte for byte what
/// wte::Model, wte::AdamW and the training loop allocate (parameters, gradients, AdamW's two
/// moments, the activations of one micro-batch with the loss's logits or fused workspace, an
/// untied wte's accumulated gradient rows, the bf16 copies under bf16 GEMMs, small buffers, the
/// allocator's rounding). Gradient accumulation adds no gradient arena (Model::backward adds into
/// one). Not counted (known only once the process runs; `wte train` measures them at start-up):
/// the program and its libraries, the tokenizer, the token streams, oneDNN's scratch.
std::vector<MemoryPart> estimate_training_memory(const Config& cfg);

/// Bytes this process may still allocate: MemAvailable from /proc/meminfo (the physical memory
/// where the kernel has no MemAvailable), capped by the cgroup's memory.max when one is set. 0 if
/// unknown.
uint64_t available_memory_bytes();

/// Throws wte::Error before any work if the sum of `parts` exceeds `available` bytes
/// (available_memory_bytes() when 0; nothing is checked if that is unknown): "WHAT needs about
/// X GiB of memory but Y GiB is available; the largest part is ... (Z GiB), which scales with
/// SETTING: lower LOWER. Estimate by part: ...". `what`: "this run", "wte profile loss", ...
void check_memory(const std::vector<MemoryPart>& parts, const std::string& what,
                  uint64_t available = 0);

/// check_memory(estimate_training_memory(cfg), "this run", available).
void check_training_memory(const Config& cfg, uint64_t available = 0);

/// Bytes resident in this process now (VmRSS of /proc/self/status), 0 if unreadable.
size_t resident_bytes();

/// Sizes the model's buffers for micro-batches of B sequences of T, runs one warm-up forward and
/// backward, and prints (unless quiet) what the run holds in memory: the plan's parts, what was
/// resident before the model (`before`), what the warm-up added beyond the plan, the total.
void print_memory(Model& model, const Config& cfg, size_t B, size_t T, size_t before,
                  const Say& say);

}  // namespace wte
