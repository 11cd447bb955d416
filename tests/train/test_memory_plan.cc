// The memory plan (src/model/memory_plan.h) is the one description of what a training run
// allocates: the start-up estimate (estimate_training_memory, train/memory.h) adds up
// exactly the plan, and the plan is exactly what wte::Model, wte::AdamW and the training loop's
// batch buffers allocate, byte for byte, counted from the allocations themselves:
//  - Model::allocated_bytes() (every arena as allocate_aligned hands it out, and the small
//    vectors' capacities) equals the plan's model share after reserve() and after steps of
//    forward, backward and zero_grad (no step allocates);
//  - the process-wide count of allocate_aligned bytes (aligned_bytes_in_use) grows by exactly the
//    plan's aligned allocations of the model and AdamW;
// for tied and untied wte, unfused and fused loss, blocks, gradient accumulation (an untied wte's
// merged rows), bf16 GEMMs where the CPU has them, and the shipped configs' shapes scaled down.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "src/model/memory.h"
#include "src/model/memory_plan.h"
#include "tests/model_test_util.h"
#include "train/memory.h"
#include "wte/config.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "wte/rng.h"

namespace wte {
namespace {

struct PlanCase {
  const char* label;
  const char* overrides;  // --section.key=value ...
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < s.size()) {
    const size_t end = s.find(' ', at);
    const std::string word = s.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (!word.empty()) out.push_back(word);
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return out;
}

class MemoryPlanMatches : public ::testing::TestWithParam<PlanCase> {};

TEST_P(MemoryPlanMatches, EstimateEqualsThePlanEqualsTheAllocations) {
  const Config cfg = parse_config(
      "[model]\nvocab_size = 300\nd_model = 32\nn_ctx = 16\n[data]\nseq_len = 16\n"
      "[train]\nbatch_size = 8\n",
      "test", split(GetParam().overrides));
  if (cfg.model.matmul_precision == MatmulPrecision::bf16 && !plan_bf16_gemms(cfg.model))
    GTEST_SKIP() << "no native bf16 matmul here: the model runs float32";
  const PlanShape shape = training_plan_shape(cfg);
  const MemoryPlan plan = plan_memory(cfg.model, shape);

  // 1. The start-up estimate is the plan, part by part.
  double estimated = 0;
  for (const MemoryPart& p : estimate_training_memory(cfg)) {
    EXPECT_EQ(p.bytes, static_cast<double>(plan.part_bytes(p.what))) << p.what;
    estimated += p.bytes;
  }
  EXPECT_EQ(estimated, static_cast<double>(plan.bytes()));
  EXPECT_EQ(plan.part_bytes("gradient accumulator"), 0u) << "no second gradient arena";

  // 2. The plan is what the model and AdamW allocate, before and after training steps.
  const size_t aligned_before = aligned_bytes_in_use();
  Model model(cfg.model);
  AdamW optimizer(model);
  model.init_weights(1);
  model.reserve(shape.B, shape.T, shape.micro_batches);
  EXPECT_EQ(model.allocated_bytes(), plan.bytes(PlanOwner::kModel));
  Rng rng(2);
  const size_t N = shape.B * shape.T;
  for (int step = 0; step < 2; ++step) {
    model.zero_grad();
    for (size_t k = 0; k < shape.micro_batches; ++k) {
      const test::TokenBatch b = test::random_batch(N, cfg.model.vocab_size, &rng);
      model.forward(b.x.data(), b.y.data(), shape.B, shape.T, N * shape.micro_batches);
      model.backward();
    }
    optimizer.update(model, 1e-3f, cfg.optim, model.wte_grad_rows());
  }
  EXPECT_EQ(model.allocated_bytes(), plan.bytes(PlanOwner::kModel)) << "a step allocated";
  // Every aligned allocation: the plan's model and AdamW buffers but its small vectors.
  const size_t small = plan.part_bytes("batch ids and lookup sort buffers");
  const size_t trainer = plan.bytes(PlanOwner::kTrainer);
  EXPECT_EQ(aligned_bytes_in_use() - aligned_before,
            plan.bytes(PlanOwner::kModel) + plan.bytes(PlanOwner::kOptimizer) - (small - trainer));
  // The trainer's share is its batch: the step's sample indices and one micro-batch's inputs and
  // targets (gradient accumulation copies each micro-batch's ids just before its forward).
  EXPECT_EQ(trainer, shape.micro_batches * shape.B * sizeof(uint32_t) + 2 * N * sizeof(int32_t));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MemoryPlanMatches,
    ::testing::Values(
        PlanCase{"tied_unfused", ""},
        PlanCase{"untied_unfused", "--model.tie_embeddings=false"},
        PlanCase{"tied_fused", "--model.loss_chunk=8 --model.loss_vocab_tile=64"},
        PlanCase{"blocks_tied", "--model.n_layer=2 --model.n_head=4"},
        PlanCase{"blocks_untied_accumulated",
                 "--model.n_layer=1 --model.n_head=2 --model.tie_embeddings=false "
                 "--train.grad_accum_steps=4"},
        PlanCase{"tied_fused_accumulated",
                 "--model.loss_chunk=8 --train.grad_accum_steps=2"},
        // A table past 4 MiB: allocations on whole 2 MiB pages (vocab 50257 x 32, fused loss).
        PlanCase{"gpt2_vocab_like", "--model.vocab_size=50257 --train.grad_accum_steps=2"},
        PlanCase{"blocks_bf16", "--model.n_layer=2 --model.n_head=4 --model.matmul_precision=bf16"},
        PlanCase{"blocks_tiled", "--model.n_layer=2 --model.n_head=4 --model.attention=tiled"},
        PlanCase{"blocks_tiled_bf16",
                 "--model.n_layer=2 --model.n_head=4 --model.attention=tiled --model.matmul_precision=bf16"}),
    [](const ::testing::TestParamInfo<PlanCase>& info) { return info.param.label; });

// GPT-2 small's shapes (V 50257, d_model 768, 12 layers, 12 heads, n_ctx 1024), one sequence of
// 1024 tokens: the tiled attention keeps no (B,NH,T,T) probabilities, so the activations the
// start-up report counts stay under 700 MiB (the dense attention's are above 1200 MiB), and they
// grow with T, not T²: twice the tokens (B 2) and a twice longer sequence cost the same.
size_t activation_bytes(const std::string& attention, size_t B, size_t T) {
  const Config cfg = parse_config(
      "[model]\nvocab_size = 50257\nd_model = 768\nn_ctx = 2048\nn_layer = 12\nn_head = 12\n"
      "attention = " + attention + "\n",
      "test");
  size_t bytes = 0;
  for (const PlannedBuffer& b : plan_memory(cfg.model, PlanShape{B, T}).buffers)
    if (b.name.rfind("activations", 0) == 0) bytes += b.bytes;
  return bytes;
}

TEST(MemoryPlan, TiledAttentionActivationsGrowWithTNotTSquared) {
  constexpr size_t kMiB = size_t{1} << 20;
  const size_t tiled = activation_bytes("tiled", 1, 1024), dense = activation_bytes("dense", 1, 1024);
  EXPECT_LE(tiled, 700 * kMiB) << tiled / kMiB << " MiB";
  EXPECT_GT(dense, 1200 * kMiB) << dense / kMiB << " MiB";
  EXPECT_EQ(activation_bytes("auto", 1, 1024), tiled) << "auto runs the tiled attention at T 1024";
  EXPECT_EQ(activation_bytes("tiled", 1, 2048), activation_bytes("tiled", 2, 1024));
  std::printf("GPT-2 small, B 1, T 1024: activations %.1f MiB tiled, %.1f MiB dense\n",
              static_cast<double>(tiled) / kMiB, static_cast<double>(dense) / kMiB);
}

}  // namespace
}  // namespace wte
