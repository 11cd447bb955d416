// Tests of the KV-cache decoder (src/model/decoder.h), sampling, and `wte sample`.
//
// The decoder computes one position at a time with its own summation order (matrix-vector loops,
// kernels.h's LayerNorm, its own one-row softmax), the training model with oneDNN GEMMs over
// whole (T, C) batches, so the two agree within float rounding, not bit for bit. The bound used
// here: |logit_decoder - logit_model| <= 1e-5 · (1 + max_v |logit_model|) at every position, for
// tiny random models (d_model <= 32, weights N(0, 0.02²) or larger, logits of order 0.1-10).
// Rounding of float sums of K = 4C <= 128 terms is ~K · 2^-24 relative ≈ 1e-5 at worst; measured
// differences are printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "src/model/decoder.h"
#include "tests/test_util.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/rng.h"
#include "wte/tokenizer.h"

namespace fs = std::filesystem;
using namespace wte;
using namespace wte::test;

namespace {

// Random ids in [0, V), seeded.
std::vector<int32_t> random_ids(size_t n, size_t V, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.below(V));
  return ids;
}

// Fills every parameter with N(0, std²) noise (LayerNorm gains around 1), so blocks, biases and
// LayerNorms all matter (GPT-2's init leaves biases 0 and gains 1).
void randomise(Model& model, uint64_t seed, double std) {
  Rng rng(seed);
  for (const TensorSpec& t : model.tensors()) {
    float* p = model.param_data() + t.offset;
    const bool gain = t.name.size() >= 2 && t.name.compare(t.name.size() - 2, 2, "/g") == 0;
    for (size_t i = 0; i < t.size; ++i)
      p[i] = static_cast<float>((gain ? 1.0 : 0.0) + std * rng.normal());
  }
}

// Max over positions of max_v |decoder - model| / (1 + max_v |model|), for one text.
double worst_relative_gap(Model& model, const std::vector<int32_t>& ids) {
  const size_t T = ids.size(), V = model.config().vocab_size;
  const float* logits = model.forward_logits(ids.data(), 1, T);
  const std::vector<float> want(logits, logits + T * V);
  Decoder dec(model);
  double worst = 0;
  for (size_t t = 0; t < T; ++t) {
    EXPECT_EQ(dec.position(), t);
    const float* got = dec.step(ids[t]);
    double scale = 0, gap = 0;
    for (size_t v = 0; v < V; ++v) {
      scale = std::max(scale, std::fabs(double(want[t * V + v])));
      gap = std::max(gap, std::fabs(double(got[v]) - double(want[t * V + v])));
    }
    worst = std::max(worst, gap / (1.0 + scale));
  }
  return worst;
}

}  // namespace

TEST(Decoder, LogitsEqualForwardLogitsWithoutBlocks) {
  for (const bool tied : {true, false})
    for (const bool ln_f : {true, false}) {
      ModelConfig mc;
      mc.vocab_size = 37, mc.d_model = 24, mc.n_ctx = 11, mc.tie_embeddings = tied, mc.ln_f = ln_f;
      Model model(mc);
      randomise(model, 3, 0.5);
      const double gap = worst_relative_gap(model, random_ids(11, 37, 5));
      std::printf("n_layer 0, tied %d, ln_f %d: worst |decoder - model| / (1 + max|logit|) = %.3g\n",
                  tied, ln_f, gap);
      EXPECT_LE(gap, 1e-5) << "tied " << tied << " ln_f " << ln_f;
    }
}

// Without blocks the rows are the lookup and ln_f: the decoder and the model run the same kernels
// on each row (embedding_forward; layernorm_forward, which works row by row, whatever the number
// of rows), so residual(0) and final_hidden() are bit-identical.
TEST(Decoder, LayerZeroRowsAreBitIdenticalToTheModels) {
  ModelConfig mc;
  mc.vocab_size = 19, mc.d_model = 20, mc.n_ctx = 6;
  ASSERT_TRUE(mc.ln_f);
  Model model(mc);
  randomise(model, 11, 0.5);
  const std::vector<int32_t> ids = {3, 18, 0, 3, 7, 3};
  model.forward_logits(ids.data(), 1, ids.size());
  Decoder dec(model);
  const size_t C = 20;
  for (size_t t = 0; t < ids.size(); ++t) {
    dec.step(ids[t]);
    EXPECT_EQ(0, std::memcmp(dec.residual(0), model.hidden_states() + t * C, C * sizeof(float)))
        << "position " << t;
    EXPECT_EQ(0, std::memcmp(dec.final_hidden(), model.final_hidden() + t * C, C * sizeof(float)))
        << "ln_f at position " << t;
  }
}

TEST(Decoder, LogitsAndRowsEqualTheModelsWithTwoBlocks) {
  for (const bool tied : {true, false}) {
    ModelConfig mc;
    mc.vocab_size = 29, mc.d_model = 32, mc.n_ctx = 13, mc.tie_embeddings = tied;
    mc.n_layer = 2, mc.n_head = 4;
    Model model(mc);
    randomise(model, 4, 0.2);
    const std::vector<int32_t> ids = random_ids(13, 29, 6);
    const double gap = worst_relative_gap(model, ids);
    std::printf("n_layer 2, tied %d: worst |decoder - model| / (1 + max|logit|) = %.3g\n", tied,
                gap);
    EXPECT_LE(gap, 1e-5) << "tied " << tied;
    // Every layer's rows: the decoder's residual(l) and final_hidden() against the model's, in
    // the same relative measure (per row: max |diff| / (1 + max |model row|)).
    model.forward_logits(ids.data(), 1, ids.size());
    Decoder dec(model);
    const size_t C = 32;
    double worst_row = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      dec.step(ids[t]);
      for (size_t l = 0; l <= 3; ++l) {
        const float* want = (l == 3 ? model.final_hidden() : model.residual(l)) + t * C;
        const float* got = l == 3 ? dec.final_hidden() : dec.residual(l);
        double scale = 0, diff = 0;
        for (size_t c = 0; c < C; ++c) {
          scale = std::max(scale, std::fabs(double(want[c])));
          diff = std::max(diff, std::fabs(double(got[c]) - double(want[c])));
        }
        worst_row = std::max(worst_row, diff / (1.0 + scale));
        if (l == 0) {
          EXPECT_EQ(diff, 0.0) << "layer 0 is the lookup: bit-identical, t " << t;
        }
      }
    }
    std::printf("n_layer 2, tied %d: worst row gap over residual(0..2), final_hidden = %.3g\n",
                tied, worst_row);
    EXPECT_LE(worst_row, 1e-5);
  }
}

TEST(Decoder, CausalAndRepeatable) {
  // The rows of a prefix do not depend on what follows, and a reset decoder repeats itself bits.
  ModelConfig mc;
  mc.vocab_size = 23, mc.d_model = 16, mc.n_ctx = 9;
  Model model(mc);
  randomise(model, 8, 0.3);
  Decoder dec(model);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5}, b = {1, 2, 3, 9, 9, 9, 9};
  std::vector<std::vector<float>> rows_a;
  for (int32_t id : a) {
    const float* l = dec.step(id);
    rows_a.emplace_back(l, l + 23);
  }
  dec.reset();
  for (size_t t = 0; t < b.size(); ++t) {
    const float* l = dec.step(b[t]);
    if (t < 3) {
      EXPECT_EQ(0, std::memcmp(l, rows_a[t].data(), 23 * sizeof(float))) << t;
    }
  }
}

TEST(Decoder, RejectsBadIdsAndAFullCache) {
  ModelConfig mc;
  mc.vocab_size = 5, mc.d_model = 4, mc.n_ctx = 2;
  Model model(mc);
  Decoder dec(model);
  EXPECT_EQ(error_of([&] { dec.step(5); }),
            "token id 5 at position 0 is outside [0, vocab_size=5)");
  EXPECT_EQ(error_of([&] { dec.step(-1); }),
            "token id -1 at position 0 is outside [0, vocab_size=5)");
  dec.step(0);
  dec.step(4);
  EXPECT_EQ(error_of([&] { dec.step(1); }),
            "position 2 is past the model's n_ctx = 2 (wpe has only n_ctx position rows)");
  EXPECT_NE(error_of([&] { dec.residual(1); }).find("layers are 0..0"), std::string::npos);
}

TEST(Sampling, GreedyTopKAndTemperature) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  Rng rng(1);
  // temperature 0: the highest logit, the lower id among ties; no draw from the Rng.
  EXPECT_EQ(sample_token(logits.data(), 5, {0.0, 0}, rng), 1);
  EXPECT_EQ(rng.state(), Rng(1).state());
  // top-k 1: always that token, whatever the temperature.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_token(logits.data(), 5, {5.0, 1}, rng), 1);
  // top-k 3 keeps ids 1, 3, 4 only.
  for (int i = 0; i < 2000; ++i) {
    const int32_t id = sample_token(logits.data(), 5, {10.0, 3}, rng);
    EXPECT_TRUE(id == 1 || id == 3 || id == 4) << id;
  }
  // Frequencies follow softmax(logits / T): logits {0, ln 3} at T = 1 give 1/4 and 3/4; at T = 2,
  // weights 1 and sqrt(3): p1 = sqrt(3) / (1 + sqrt(3)) = 0.6340. 40000 draws: sd <= 0.0022.
  const std::vector<float> two = {0.0f, static_cast<float>(std::log(3.0))};
  for (const double T : {1.0, 2.0}) {
    const double p1 = T == 1.0 ? 0.75 : std::sqrt(3.0) / (1.0 + std::sqrt(3.0));
    size_t ones = 0;
    for (int i = 0; i < 40000; ++i) ones += sample_token(two.data(), 2, {T, 0}, rng) == 1;
    EXPECT_NEAR(double(ones) / 40000.0, p1, 5 * 0.0022) << "T " << T;
  }
  // Same seed, same draws.
  Rng r1(42), r2(42);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(sample_token(logits.data(), 5, {1.0, 0}, r1), sample_token(logits.data(), 5, {1.0, 0}, r2));
  const std::vector<float> bad = {0.0f, NAN};
  EXPECT_NE(error_of([&] { sample_token(bad.data(), 2, {1.0, 0}, rng); }).find("logit 1 is not finite"),
            std::string::npos);
  EXPECT_NE(error_of([&] { sample_token(logits.data(), 5, {-1.0, 0}, rng); }).find("temperature"),
            std::string::npos);
}

TEST(SampleCli, SameSeedSameTextAndClearErrors) {
  const fs::path dir = temp_dir("decoder_sample");
  Config cfg = load_config("", {"--model.vocab_size=300", "--model.d_model=16", "--model.n_ctx=24",
                                "--data.seq_len=16"});
  Model model(cfg.model);
  model.init_weights(7);
  randomise(model, 9, 0.5);  // peaked logits, so the seed matters less than the model
  const Tokenizer tok = Tokenizer::train(tiny_corpus(), 300);
  const std::string ckpt = (dir / "ckpt.h5").string();
  save_checkpoint(ckpt, model, nullptr, tok, cfg, 0);
  const std::string cli = std::string("'") + WTE_CLI + "' sample --checkpoint '" + ckpt + "' ";
  // stdout only (the header and timing lines go to stderr).
  auto quiet = [](const std::string& cmd) { return "{ " + cmd + " 2>/dev/null; }"; };
  std::string a, b, c;
  ASSERT_EQ(run(quiet(cli + "--prompt 'the cat' --max-new-tokens 12 --seed 5"), &a), 0) << a;
  ASSERT_EQ(run(quiet(cli + "--prompt 'the cat' --max-new-tokens 12 --seed 5"), &b), 0) << b;
  ASSERT_EQ(run(quiet(cli + "--prompt 'the cat' --max-new-tokens 12 --seed 6 --top-k 0"), &c), 0) << c;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.rfind("the cat", 0), 0u) << a;  // the prompt first, then the continuation
  // Greedy decoding equals the argmax of the model's own forward at each step.
  std::string g;
  ASSERT_EQ(run(quiet(cli + "--prompt 'the cat' --max-new-tokens 6 --temperature 0"), &g), 0) << g;
  std::vector<int32_t> ids = tok.encode("the cat");
  for (int i = 0; i < 6; ++i) {
    const float* l = model.forward_logits(ids.data(), 1, ids.size()) + (ids.size() - 1) * 300;
    ids.push_back(static_cast<int32_t>(std::max_element(l, l + 300) - l));
  }
  EXPECT_EQ(g, tok.decode(ids) + "\n");
  // Stops at n_ctx with a note: 24 positions are fed (the prompt's and 24 - prompt drawn ones),
  // and the last position's logits give one more token: 25 - prompt new tokens.
  std::string full;
  ASSERT_EQ(run(cli + "--prompt 'the cat' --max-new-tokens 100", &full), 0) << full;
  const size_t n_prompt = tok.encode("the cat").size();
  EXPECT_NE(full.find("stopped after " + std::to_string(25 - n_prompt) +
                      " new tokens: the sequence fills n_ctx = 24"),
            std::string::npos)
      << full;
  // Errors name the value and what is allowed.
  std::string out;
  EXPECT_EQ(run(cli + "--prompt ''", &out), 2);  // bad usage
  EXPECT_NE(out.find("--prompt is empty"), std::string::npos) << out;
  // A suggestion a shell passes as a newline ("\n" in double quotes is a backslash and an n).
  EXPECT_NE(out.find("--prompt $'\\n' in bash"), std::string::npos) << out;
  std::string longer;
  for (int i = 0; i < 30; ++i) longer += " cat";
  EXPECT_EQ(run(cli + "--prompt '" + longer + "'", &out), 2);
  EXPECT_NE(out.find("more than the model's n_ctx = 24 positions"), std::string::npos) << out;
  EXPECT_EQ(run(cli + "--prompt x --temperature -1", &out), 2);
  EXPECT_NE(out.find("--temperature = '-1' is not allowed"), std::string::npos) << out;
  EXPECT_EQ(run(cli + "--prompt x --top-k 1e3", &out), 2);
  EXPECT_NE(out.find("--top-k = '1e3' is not a whole number"), std::string::npos) << out;
  EXPECT_EQ(run(cli.substr(0, cli.find("--checkpoint")) + "--checkpoint /nonexistent --prompt x", &out), 1);
  EXPECT_NE(out.find("--checkpoint '/nonexistent' does not exist"), std::string::npos) << out;
}

// A prefill of n tokens gives every row (every layer, ln_f, logits) with the bits of n step()
// calls, from position 0 and after earlier steps, for 1 and 2 threads' worth of work splitting.
TEST(Decoder, PrefillIsBitIdenticalToSteps) {
  ModelConfig mc;
  mc.vocab_size = 300, mc.d_model = 64, mc.n_ctx = 24, mc.n_layer = 2, mc.n_head = 4;
  Model model(mc);
  randomise(model, 11, 0.08);
  const std::vector<int32_t> ids = random_ids(20, mc.vocab_size, 5);
  const size_t C = mc.d_model, V = mc.vocab_size, L = mc.n_layer;
  Decoder steps(model);
  std::vector<std::vector<float>> res(L + 1), fin, logits;
  for (size_t t = 0; t < ids.size(); ++t) {
    const float* lg = steps.step(ids[t]);
    logits.emplace_back(lg, lg + V);
    fin.emplace_back(steps.final_hidden(), steps.final_hidden() + C);
    for (size_t l = 0; l <= L; ++l)
      res[l].insert(res[l].end(), steps.residual(l), steps.residual(l) + C);
  }
  for (const size_t first : {size_t{0}, size_t{3}}) {  // prefill from 0, or after 3 steps
    Decoder pre(model);
    for (size_t t = 0; t < first; ++t) pre.step(ids[t]);
    const size_t n = ids.size() - first;
    pre.prefill(ids.data() + first, n, true);
    EXPECT_EQ(pre.position(), ids.size());
    EXPECT_EQ(pre.rows(), n);
    for (size_t t = 0; t < n; ++t) {
      const size_t p = first + t;
      EXPECT_EQ(std::memcmp(pre.logits_rows() + t * V, logits[p].data(), V * 4), 0) << p;
      EXPECT_EQ(std::memcmp(pre.final_rows() + t * C, fin[p].data(), C * 4), 0) << p;
      for (size_t l = 0; l <= L; ++l)
        EXPECT_EQ(std::memcmp(pre.residual_rows(l) + t * C, res[l].data() + p * C, C * 4), 0)
            << "layer " << l << " position " << p;
    }
    EXPECT_EQ(std::memcmp(pre.final_hidden(), fin.back().data(), C * 4), 0);
    // The next step continues from the prefill's cache as from the steps'.
    EXPECT_EQ(error_of([&] { pre.prefill(ids.data(), 5, false); }),
              "position 24 is past the model's n_ctx = 24 (wpe has only n_ctx position rows)");
    EXPECT_EQ(pre.position(), ids.size());  // checked before any work
  }
  Decoder bad(model);
  const int32_t wrong[2] = {1, 300};
  EXPECT_NE(error_of([&] { bad.prefill(wrong, 2, false); }).find("token id 300 at position 1"),
            std::string::npos);
  EXPECT_EQ(bad.position(), 0u);
}
