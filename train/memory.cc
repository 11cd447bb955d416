#include "train/memory.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "src/model/unembedding.h"
#include "wte/error.h"
#include "wte/model.h"

namespace wte {

PlanShape training_plan_shape(const Config& cfg) {
  // One forward holds a micro-batch: train.batch_size / train.grad_accum_steps sequences.
  const size_t K = std::max<size_t>(cfg.train.grad_accum_steps, 1);
  return PlanShape{std::max<size_t>(cfg.train.batch_size / K, 1), cfg.data.seq_len, K, true, true};
}

std::vector<MemoryPart> estimate_training_memory(const Config& cfg) {
  const PlanShape shape = training_plan_shape(cfg);
  const MemoryPlan plan = plan_memory(cfg.model, shape);
  const std::string table = cfg.model.tie_embeddings ? "model.vocab_size x model.d_model"
                                                     : "model.vocab_size x model.d_model (wte and lm_head)";
  const std::string per_forward = shape.micro_batches > 1
                                      ? "train.batch_size / train.grad_accum_steps x data.seq_len"
                                      : "train.batch_size x data.seq_len";
  // Which settings scale each part of the plan, and which to lower.
  auto describe = [&](const std::string& part) -> std::pair<std::string, std::string> {
    if (part == "parameters" || part == "gradients" || part == "AdamW m and v" ||
        part == "allocation rounding")
      return {table, "model.vocab_size or model.d_model"};
    if (part == "bf16 copy of the parameters")
      return {table, "model.vocab_size or model.d_model, or set model.matmul_precision = f32"};
    if (part == "logits of one step")
      return {per_forward + " x model.vocab_size",
              "train.batch_size or data.seq_len, raise train.grad_accum_steps, or set "
              "model.loss_chunk (the fused loss keeps model.loss_chunk x model.vocab_size floats "
              "instead)"};
    if (part.rfind("loss workspace", 0) == 0)
      return {"model.loss_chunk x model.vocab_size", "model.loss_chunk"};
    if (part == "hidden states of one step")
      return {per_forward + " x model.d_model",
              "train.batch_size or data.seq_len, or raise train.grad_accum_steps"};
    if (part == "block activations of one step")
      return {"model.n_layer x " + per_forward,
              "model.n_layer, train.batch_size or data.seq_len, or raise train.grad_accum_steps"};
    if (part == "bf16 copies of one step's GEMM inputs")
      return {"model.n_layer x " + per_forward + " x model.d_model",
              "model.n_layer, train.batch_size or data.seq_len, raise train.grad_accum_steps, or "
              "set model.matmul_precision = f32"};
    if (part == "wte gradient rows")
      return {"train.batch_size x data.seq_len x model.d_model (at most model.vocab_size rows)",
              "train.batch_size or data.seq_len"};
    return {"train.batch_size x data.seq_len", "train.batch_size or data.seq_len"};
  };
  std::vector<MemoryPart> parts;
  for (const auto& [part, bytes] : plan.parts()) {
    const auto [setting, lower] = describe(part);
    parts.push_back({part, static_cast<double>(bytes), setting, lower});
  }
  return parts;
}

uint64_t available_memory_bytes() {
  uint64_t avail = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") {
      avail = kib * 1024;
      break;
    }
  }
  // No MemAvailable (kernels before 3.14): the physical memory.
  if (avail == 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) avail = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  }
  // cgroup v2 limit of this process's group, if any ("max" means none).
  std::ifstream cg("/sys/fs/cgroup/memory.max");
  std::string limit;
  if (cg >> limit && limit != "max") {
    uint64_t max = std::strtoull(limit.c_str(), nullptr, 10);
    uint64_t current = 0;
    std::ifstream cur("/sys/fs/cgroup/memory.current");
    cur >> current;
    const uint64_t room = max > current ? max - current : 0;
    avail = avail == 0 ? room : std::min(avail, room);
  }
  return avail;
}

namespace {

std::string gib(double bytes) {
  char buf[32];
  if (bytes >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024));
  return buf;
}

}  // namespace

void check_training_memory(const Config& cfg, uint64_t available) {
  check_memory(estimate_training_memory(cfg), "this run", available);
}

void check_memory(const std::vector<MemoryPart>& parts, const std::string& what,
                  uint64_t available) {
  if (available == 0) available = available_memory_bytes();
  if (available == 0 || parts.empty()) return;  // unknown: nothing to compare with
  double total = 0;
  const MemoryPart* largest = &parts[0];
  for (const MemoryPart& p : parts) {
    total += p.bytes;
    if (p.bytes > largest->bytes) largest = &p;
  }
  if (total <= static_cast<double>(available)) return;
  std::string detail;
  for (const MemoryPart& p : parts) detail += "\n  " + p.what + ": " + gib(p.bytes);
  throw Error(what + " needs about " + gib(total) + " of memory but " +
              gib(static_cast<double>(available)) + " is available; the largest part is " +
              largest->what + " (" + gib(largest->bytes) + "), which scales with " +
              largest->setting + ": lower " + largest->lower + ". Estimate by part:" + detail);
}


// Bytes resident in this process now (VmRSS of /proc/self/status), 0 if unreadable.
size_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      size_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

// Sizes the model's buffers for micro-batches of B sequences of T (the memory plan's shape), runs
// one warm-up forward and backward on a batch of token 0 (so oneDNN creates its primitives and
// scratch now: the first step's numbers are unchanged, since the parameters are not touched and
// every step starts with zero_grad), and prints what the run holds in memory: the plan's parts
// (src/model/memory_plan.h, the same bytes the start-up check estimated), what was resident
// before the model existed (`before`, measured: the program and its libraries, the tokenizer,
// the token streams), what the warm-up added beyond the plan (measured: oneDNN's primitives, JIT
// code and scratch, the threads' stacks), and their total.
void print_memory(Model& model, const Config& cfg, size_t B, size_t T, size_t before,
                  const Say& say) {
  const PlanShape shape = training_plan_shape(cfg);
  model.reserve(B, T, shape.micro_batches);
  const MemoryPlan plan = plan_memory(cfg.model, shape);
  {
    const std::vector<int32_t> zeros(B * T, 0);
    model.zero_grad();
    model.forward(zeros.data(), zeros.data(), B, T);
    model.backward();
    model.zero_grad();
  }
  const size_t after = resident_bytes();
  const size_t beyond = after > before + plan.bytes() ? after - before - plan.bytes() : 0;
  const double mb = 1.0 / (1024.0 * 1024.0);
  auto part = [&](const std::string& name) { return static_cast<double>(plan.part_bytes(name)) * mb; };
  char loss_text[128];
  const size_t V = model.config().vocab_size;
  double loss = 0;
  if (model.loss_rows() > 0) {
    std::snprintf(loss_text, sizeof loss_text, "fused: %zu rows x %zu ids", model.loss_rows(), V);
    loss = part("loss workspace (fused, " + std::to_string(model.loss_rows()) + " rows x vocab_size)");
  } else {
    std::snprintf(loss_text, sizeof loss_text, "unfused: logits %zu x %zu", B * T, V);
    loss = part("logits of one step");
  }
  const double params = part("parameters") + part("bf16 copy of the parameters");
  const double grads = part("gradients"), adamw = part("AdamW m and v");
  const double total = static_cast<double>(plan.bytes()) * mb;
  const double acts = part("hidden states of one step") + part("block activations of one step") +
                      part("bf16 copies of one step's GEMM inputs");
  const double other = total - params - grads - adamw - acts - loss;
  const double outside = static_cast<double>(before) * mb;
  const double onednn = static_cast<double>(beyond) * mb;
  // Lines of at most about 100 columns.
  say("memory: parameters %.1f MiB, gradients %.1f MiB, AdamW m and v %.1f MiB,\n"
      "  activations %.1f MiB (B %zu, T %zu per micro-batch),\n"
      "  loss workspace %.1f MiB (%s), other buffers %.1f MiB;\n"
      "  planned %.1f MiB + resident before the model %.1f MiB (program, libraries, tokenizer, "
      "tokens)\n"
      "  + beyond the plan after a warm-up pass %.1f MiB (oneDNN primitives and scratch, threads)\n"
      "  = total %.1f MiB\n",
      params, grads, adamw, acts, B, T, loss, loss_text, other, total, outside, onednn,
      total + outside + onednn);
}

}  // namespace wte
