// Tests of the KV-cache decoder (include/wte/decoder.h), sampling, and `wte sample`.
//
// The decoder computes one position at a time with its own summation order (matrix-vector loops,
// kernels.h's LayerNorm, its own one-row softmax), the training model with oneDNN GEMMs over
// whole (T, C) batches, so the two agree within float rounding, not bit for bit. The bound used
// here: |logit_decoder - logit_model| <= 1e-5 · (1 + max_v |logit_model|) at every position, for
// tiny random models (d_model <= 32, weights N(0, 0.02²) or larger, logits of order 0.1-10).
// Rounding of float sums of K = 4C <= 128 terms is ~K · 2^-24 relative ≈ 1e-5 at worst; measured
// differences are printed.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "wte/decoder.h"
#include "wte/generate.h"
#include "src/model/matmul.h"
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
  // Errors name the value and what is allowed.
  std::string out;
  // An empty prompt, with a vocabulary that has no <|endoftext|> to start from (wte's trained one).
  EXPECT_EQ(run(cli + "--prompt ''", &out), 2);  // bad usage
  EXPECT_NE(out.find("--prompt is empty (or not given)"), std::string::npos) << out;
  EXPECT_NE(out.find("has no <|endoftext|> token to start from"), std::string::npos) << out;
  // A suggestion a shell passes as a newline ("\n" in double quotes is a backslash and an n).
  EXPECT_NE(out.find("--prompt $'\\n' in bash"), std::string::npos) << out;
  EXPECT_EQ(run(cli, &out), 2);  // no --prompt: the same
  EXPECT_NE(out.find("--prompt is empty (or not given)"), std::string::npos) << out;
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

namespace {

// The highest logit's id, the lowest among ties (greedy decoding).
int32_t argmax(const float* logits, size_t V) {
  return static_cast<int32_t>(std::max_element(logits, logits + V) - logits);
}

// The logits (V) of a fresh Decoder fed `window` from position 0, one step at a time.
std::vector<float> fresh_logits(const Model& model, const std::vector<int32_t>& window) {
  Decoder dec(model);
  const float* l = nullptr;
  for (int32_t id : window) l = dec.step(id);
  return std::vector<float>(l, l + model.config().vocab_size);
}

// A checkpoint of a small random model (vocab 300 trained on tiny_corpus(), d_model 16, one block,
// n_ctx 24) for the `wte sample` tests, with the command line that samples from it. With `eot`,
// the vocabulary gets GPT-2's "<|endoftext|>" as id 300 (vocab_size 301), as GPT-2's files have it.
struct SampleCheckpoint {
  fs::path dir;
  Config cfg;
  Tokenizer tok;
  std::unique_ptr<Model> model;
  std::string cli;  // "'wte' sample --checkpoint '...' "

  SampleCheckpoint(const std::string& name, bool eot) : dir(temp_dir(name)) {
    tok = Tokenizer::train(tiny_corpus(), 300);
    if (eot) {
      std::string json = tok.encoder_json();
      json.insert(json.rfind('}'), ", \"<|endoftext|>\": " + std::to_string(tok.size()));
      tok = Tokenizer::from_strings(json, tok.vocab_bpe(), "test vocabulary");
    }
    cfg = load_config("", {"--model.vocab_size=" + std::to_string(tok.size()), "--model.d_model=16",
                           "--model.n_ctx=24", "--model.n_layer=1", "--model.n_head=2",
                           "--model.tie_embeddings=false", "--data.seq_len=16"});
    model = std::make_unique<Model>(cfg.model);
    randomise(*model, 9, 0.5);
  }
  // Writes the checkpoint (after the test changed the model, if it does).
  void save() {
    const std::string ckpt = (dir / "ckpt.h5").string();
    save_checkpoint(ckpt, *model, nullptr, tok, cfg, 0);
    cli = std::string("'") + WTE_CLI + "' sample --checkpoint '" + ckpt + "' ";
  }
  size_t V() const { return cfg.model.vocab_size; }
};

// stdout only (the header and timing lines go to stderr).
std::string quiet(const std::string& cmd) { return "{ " + cmd + " 2>/dev/null; }"; }

}  // namespace

// The sliding window's logits are, bit for bit, those of a fresh decoder fed the window from
// position 0 (the re-prefill is such a feed), and within the decoder's bound of the training
// model's forward_logits on the window; the window is the sequence's most recent tokens, between
// n_ctx + 1 - drop and n_ctx of them once the sequence has filled n_ctx, exactly n_ctx for drop 1
// (nanoGPT's idx[:, -block_size:]).
TEST(SlidingDecoder, LogitsEqualAFreshPrefillOfTheWindow) {
  ModelConfig mc;
  mc.vocab_size = 41, mc.d_model = 32, mc.n_ctx = 16, mc.n_layer = 2, mc.n_head = 4;
  Model model(mc);
  randomise(model, 12, 0.2);
  const size_t V = mc.vocab_size, n_ctx = mc.n_ctx;
  const std::vector<int32_t> seq = random_ids(70, V, 13);
  for (const size_t drop : {size_t{1}, size_t{4}, size_t{5}, n_ctx}) {
    SlidingDecoder sd(model, drop);
    const size_t first = 5;
    const float* l = sd.start(seq.data(), first);
    double worst = 0;
    size_t slides = 0, held = first;  // tokens in the window by the rule above
    for (size_t n = first;; ++n) {  // the window ends with seq[n - 1]
      const std::vector<int32_t>& w = sd.window();
      ASSERT_EQ(w.size(), held) << "drop " << drop << " n " << n;
      EXPECT_TRUE(std::equal(w.begin(), w.end(), seq.begin() + static_cast<ptrdiff_t>(n - w.size())))
          << "the window is the most recent tokens; drop " << drop << " n " << n;
      if (n > n_ctx) {
        EXPECT_GE(w.size(), n_ctx + 1 - drop);
        if (drop == 1) {
          EXPECT_EQ(w.size(), n_ctx);
        }
      }
      const std::vector<float> want = fresh_logits(model, w);
      ASSERT_EQ(std::memcmp(l, want.data(), V * sizeof(float)), 0) << "drop " << drop << " n " << n;
      if (n % 3 == 0) {  // the training model on the window (every third: oneDNN plans per T)
        const float* ref = model.forward_logits(w.data(), 1, w.size()) + (w.size() - 1) * V;
        double scale = 0, gap = 0;
        for (size_t v = 0; v < V; ++v) {
          scale = std::max(scale, std::fabs(double(ref[v])));
          gap = std::max(gap, std::fabs(double(l[v]) - double(ref[v])));
        }
        worst = std::max(worst, gap / (1.0 + scale));
      }
      if (n == seq.size()) break;
      l = sd.push(seq[n]);
      if (held == n_ctx) {
        held = n_ctx + 1 - drop;
        ++slides;
      } else {
        ++held;
      }
    }
    EXPECT_EQ(sd.slides(), slides);
    EXPECT_GT(slides, 0u);
    std::printf("drop %zu: %zu slides over %zu tokens; worst |sliding - forward_logits(window)| / "
                "(1 + max|logit|) = %.3g\n", drop, slides, seq.size(), worst);
    EXPECT_LE(worst, 1e-5) << "drop " << drop;
  }
  // A start longer than n_ctx keeps its last n_ctx tokens.
  SlidingDecoder sd(model, SlidingDecoder::default_drop(n_ctx));
  EXPECT_EQ(SlidingDecoder::default_drop(n_ctx), 4u);
  const float* l = sd.start(seq.data(), 40);
  EXPECT_EQ(sd.cropped(), 24u);
  EXPECT_EQ(sd.window(), std::vector<int32_t>(seq.begin() + 24, seq.begin() + 40));
  EXPECT_EQ(std::memcmp(l, fresh_logits(model, sd.window()).data(), V * sizeof(float)), 0);
  // Bad input: before any work.
  EXPECT_NE(error_of([&] { SlidingDecoder(model, 0); }).find("drop = 0 is not allowed"),
            std::string::npos);
  EXPECT_NE(error_of([&] { SlidingDecoder(model, 17); }).find("[1, n_ctx = 16]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { sd.push(41); }), "");
  EXPECT_EQ(sd.window().size(), 16u);
  EXPECT_NE(error_of([&] { sd.start(seq.data(), 0); }), "");
  EXPECT_NE(error_of([&] { SlidingDecoder(model, 3).push(1); }).find("start() first"),
            std::string::npos);
}

// Nucleus sampling (Hugging Face's order: temperature, top-k, then top-p over the renormalised
// top-k): a tiny p gives the greedy token, p = 1 the same draws as no nucleus, and in between the
// frequencies of the hand-computed nucleus.
TEST(Sampling, TopP) {
  Rng gen(21);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(50);
    for (float& x : logits) x = static_cast<float>(3.0 * gen.normal());
    if (trial % 10 == 0) logits[7] = logits[3] = *std::max_element(logits.begin(), logits.end());
    const size_t k = trial % 3 == 0 ? 5 : 0;
    // p tiny: the most likely token (the lower id among ties), whatever the draw.
    Rng r0(trial);
    EXPECT_EQ(sample_token(logits.data(), 50, {0.8, k, 1e-9}, r0), argmax(logits.data(), 50));
    Rng r1(trial), r2(trial);
    // p = 1: the same id as without the option, for the same Rng state.
    for (int i = 0; i < 20; ++i)
      EXPECT_EQ(sample_token(logits.data(), 50, {0.8, k, 1.0}, r1),
                sample_token(logits.data(), 50, {0.8, k}, r2));
  }
  // Probabilities: id 2 0.4, id 0 0.3, id 4 0.15, id 1 0.1, id 3 0.05.
  const std::vector<float> logits = {float(std::log(0.3)), float(std::log(0.1)),
                                     float(std::log(0.4)), float(std::log(0.05)),
                                     float(std::log(0.15))};
  struct Case {
    SamplingParams sp;
    std::vector<double> want;  // frequency of each id
  };
  const double s2 = std::sqrt(0.4) + std::sqrt(0.3) + std::sqrt(0.15);
  const std::vector<Case> cases = {
      // p 0.75: masses before 2, 0, 4, 1 are 0, 0.4, 0.7, 0.85: keeps 2, 0, 4 (0.85 of the mass).
      {{1.0, 0, 0.75}, {0.3 / 0.85, 0, 0.4 / 0.85, 0, 0.15 / 0.85}},
      // p 0.5: keeps 2 and 0 (mass before 0 is 0.4 < 0.5).
      {{1.0, 0, 0.5}, {0.3 / 0.7, 0, 0.4 / 0.7, 0, 0}},
      // The temperature applies first: at T 2 the weights are sqrt(p), normalised 0.300, 0.260,
      // 0.184, 0.150, 0.106; p 0.6: masses before are 0, 0.300, 0.560, 0.744: keeps 2, 0, 4.
      {{2.0, 0, 0.6}, {std::sqrt(0.3) / s2, 0, std::sqrt(0.4) / s2, 0, std::sqrt(0.15) / s2}},
      // top-k first, then the nucleus over the renormalised k: top-k 2 leaves 2 (4/7) and 0 (3/7);
      // p 0.5: 0's mass before is 4/7 >= 0.5, so 2 alone (over all five, 0 would stay: 0.4 < 0.5).
      {{1.0, 2, 0.5}, {0, 0, 1, 0, 0}},
  };
  Rng rng(5);
  const int draws = 40000;  // sd of a frequency <= 0.0025
  for (const Case& c : cases) {
    std::vector<int> count(5, 0);
    for (int i = 0; i < draws; ++i) ++count[sample_token(logits.data(), 5, c.sp, rng)];
    for (size_t id = 0; id < 5; ++id) {
      if (c.want[id] == 0) {
        EXPECT_EQ(count[id], 0) << "id " << id << " T " << c.sp.temperature << " p " << c.sp.top_p;
      } else {
        EXPECT_NEAR(double(count[id]) / draws, c.want[id], 5 * 0.0025)
            << "id " << id << " T " << c.sp.temperature << " p " << c.sp.top_p;
      }
    }
  }
  EXPECT_NE(error_of([&] { sample_token(logits.data(), 5, {1.0, 0, 0.0}, rng); }).find("top_p 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { sample_token(logits.data(), 5, {1.0, 0, 1.5}, rng); }).find("(0, 1]"),
            std::string::npos);
}

// `wte sample` goes on past n_ctx (24 here): 400 new tokens, the context window sliding; greedy
// with --slide 1 predicts each token from exactly the last n_ctx tokens (nanoGPT's loop, computed
// here with a fresh decoder per token), and with the default slide as SlidingDecoder does.
TEST(SampleCli, GeneratesPastNCtx) {
  SampleCheckpoint ck("decoder_sample_slide", false);
  ck.save();
  std::string out;
  ASSERT_EQ(run(ck.cli + "--prompt 'the cat' --max-new-tokens 400 --seed 3", &out), 0) << out;
  EXPECT_NE(out.find("400 new tokens in"), std::string::npos) << out;
  EXPECT_NE(out.find("the window slides by 6 tokens"), std::string::npos) << out;  // 24 / 4
  const std::vector<int32_t> prompt = ck.tok.encode("the cat");
  const size_t n_ctx = 24;
  for (const size_t slide : {size_t{1}, size_t{0}}) {
    std::string g;
    ASSERT_EQ(run(quiet(ck.cli + "--prompt 'the cat' -n 60 --temperature 0 --slide " +
                        std::to_string(slide)), &g), 0) << g;
    std::vector<int32_t> ids = prompt;
    SlidingDecoder sd(*ck.model, SlidingDecoder::default_drop(n_ctx));
    const float* l = sd.start(ids.data(), ids.size());
    for (int i = 0; i < 60; ++i) {
      int32_t next;
      if (slide == 1) {  // idx_cond = idx[:, -n_ctx:]
        const size_t from = ids.size() > n_ctx ? ids.size() - n_ctx : 0;
        next = argmax(fresh_logits(*ck.model, std::vector<int32_t>(ids.begin() + from, ids.end())).data(), ck.V());
      } else {
        next = argmax(l, ck.V());
        if (i + 1 < 60) l = sd.push(next);
      }
      ids.push_back(next);
    }
    EXPECT_EQ(g, ck.tok.decode(ids) + "\n") << "slide " << slide;
  }
  EXPECT_EQ(run(ck.cli + "--prompt x --slide 25", &out), 2);
  EXPECT_NE(out.find("--slide = '25' is more than the model's n_ctx = 24"), std::string::npos) << out;
}

// A prompt longer than n_ctx is cropped to its last n_ctx tokens, with a note; all of it is printed.
TEST(SampleCli, LongPromptIsCropped) {
  SampleCheckpoint ck("decoder_sample_crop", false);
  ck.save();
  std::string longer;
  for (int i = 0; i < 30; ++i) longer += " cat";
  const std::vector<int32_t> ids = ck.tok.encode(longer);
  ASSERT_GT(ids.size(), 24u);
  std::string out, g;
  ASSERT_EQ(run(ck.cli + "--prompt '" + longer + "' -n 5", &out), 0) << out;
  EXPECT_NE(out.find("note: the prompt is " + std::to_string(ids.size()) +
                     " tokens, more than the model's n_ctx = 24: the model sees its last 24 tokens"),
            std::string::npos) << out;
  ASSERT_EQ(run(quiet(ck.cli + "--prompt '" + longer + "' -n 3 --temperature 0 --slide 1"), &g), 0) << g;
  // --slide 1: each token from exactly the last 24.
  std::vector<int32_t> window(ids.end() - 24, ids.end()), drawn;
  for (int i = 0; i < 3; ++i) {
    drawn.push_back(argmax(fresh_logits(*ck.model, window).data(), ck.V()));
    window.erase(window.begin());
    window.push_back(drawn.back());
  }
  EXPECT_EQ(g, longer + ck.tok.decode(drawn) + "\n");
}

// --top-p: a tiny P is greedy, P = 1 the default; values outside (0, 1] are refused.
TEST(SampleCli, TopP) {
  SampleCheckpoint ck("decoder_sample_top_p", false);
  ck.save();
  std::string greedy, tiny, plain, one, nucleus, out;
  const std::string base = ck.cli + "--prompt 'the cat' -n 50 --seed 4 ";
  ASSERT_EQ(run(quiet(base + "--temperature 0"), &greedy), 0) << greedy;
  ASSERT_EQ(run(quiet(base + "--top-p 1e-9"), &tiny), 0) << tiny;
  ASSERT_EQ(run(quiet(base + "--top-k 0"), &plain), 0) << plain;
  ASSERT_EQ(run(quiet(base + "--top-k 0 --top-p 1"), &one), 0) << one;
  ASSERT_EQ(run(quiet(base + "--top-k 0 --top-p 0.5"), &nucleus), 0) << nucleus;
  EXPECT_EQ(tiny, greedy);
  EXPECT_EQ(one, plain);
  EXPECT_NE(nucleus, plain);
  for (const std::string bad : {"0", "1.5", "-0.1", "abc", "nan"}) {
    EXPECT_EQ(run(ck.cli + "--prompt x --top-p=" + bad, &out), 2) << bad;
    EXPECT_NE(out.find("--top-p = '" + bad + "' is not allowed; allowed: a number in (0, 1]"),
              std::string::npos) << out;
  }
}

// --stop: the text ends where the first occurrence of a stop string in the continuation starts
// (the stop string is not printed), the same draws as without it until then.
TEST(SampleCli, StopString) {
  SampleCheckpoint ck("decoder_sample_stop", false);
  ck.save();
  const std::string base = ck.cli + "--prompt 'the cat' -n 80 --seed 8 --top-k 0 ";
  std::string full, out;
  ASSERT_EQ(run(quiet(base), &full), 0) << full;
  ASSERT_EQ(full.rfind("the cat", 0), 0u);
  const std::string cont = full.substr(7, full.size() - 8);  // without the prompt and the newline
  ASSERT_GE(cont.size(), 40u);
  for (const size_t at : {size_t{10}, size_t{25}}) {
    const std::string stop = cont.substr(at, 3);
    if (stop.find('\'') != std::string::npos) continue;  // not through the shell's quotes
    const size_t end = cont.find(stop);
    ASSERT_EQ(run(base + "--stop '" + stop + "'", &out), 0) << out;
    EXPECT_NE(out.find("stopped at a --stop string"), std::string::npos) << out;
    ASSERT_EQ(run(quiet(base + "--stop '" + stop + "'"), &out), 0) << out;
    EXPECT_EQ(out, "the cat" + cont.substr(0, end) + "\n") << "stop '" << stop << "'";
    // Several: the first to occur ends the text; one that never occurs changes nothing.
    ASSERT_EQ(run(quiet(base + "--stop '" + stop + "' --stop 'zzzzqq'"), &out), 0) << out;
    EXPECT_EQ(out, "the cat" + cont.substr(0, end) + "\n");
  }
  ASSERT_EQ(run(quiet(base + "--stop 'zzzzqq'"), &out), 0) << out;
  EXPECT_EQ(out, full);
  // The prompt is not searched.
  ASSERT_EQ(run(quiet(base + "--stop 'the cat' --stop 'zzzzqq'"), &out), 0) << out;
  EXPECT_EQ(out.substr(0, 7), "the cat");
  EXPECT_GT(out.size(), 8u);
  EXPECT_EQ(run(ck.cli + "--prompt x --stop ''", &out), 2);
  EXPECT_NE(out.find("--stop = '' is not allowed"), std::string::npos) << out;
}

// A stop string that ends inside a token ("Sprit" of " Spr" + "ite"): the text is cut where the
// stop string starts; neither it nor the rest of the token ("e") is released.
TEST(StopText, CutsWhereTheStopStringStarts) {
  std::string sunk;
  StopText text({"Sprit", "zz"}, [&sunk](const char* d, size_t n) { sunk.append(d, n); });
  EXPECT_FALSE(text.add("The Holy"));
  EXPECT_FALSE(text.add(" Spr"));
  EXPECT_EQ(text.released(), "The Holy ");  // "Spr" may start "Sprit": held back
  EXPECT_TRUE(text.add("ite"));
  EXPECT_EQ(text.released(), "The Holy ");
  EXPECT_EQ(sunk, "The Holy ");
  text.flush();
  EXPECT_EQ(text.released(), "The Holy ");
  // A stop string inside one token: the text before it is released.
  StopText one({"ss"}, nullptr);
  EXPECT_TRUE(one.add("Kiss me"));
  EXPECT_EQ(one.released(), "Ki");
}

// With GPT-2's <|endoftext|> in the vocabulary: a drawn <|endoftext|> ends the text (not printed)
// unless --ignore-eos, and an empty prompt starts from it.
TEST(SampleCli, EndOfText) {
  SampleCheckpoint ck("decoder_sample_eot", true);
  const int32_t eot = ck.tok.id_of("<|endoftext|>");
  ASSERT_EQ(eot, 300);
  ASSERT_EQ(ck.V(), 301u);
  // Logits that do not depend on the input: ln_f's gain 0 and bias e_0 make every final row e_0,
  // so logit v = lm_head[v][0]: 0 for every token but <|endoftext|>, whose probability is 0.1.
  Model& m = *ck.model;
  for (const TensorSpec& t : m.tensors()) {
    float* p = m.param_data() + t.offset;
    if (t.name == "ln_f/g") std::fill(p, p + t.size, 0.0f);
    if (t.name == "ln_f/b") {
      std::fill(p, p + t.size, 0.0f);
      p[0] = 1.0f;
    }
    if (t.name == "lm_head")
      for (size_t v = 0; v < ck.V(); ++v)
        p[v * 16] = v == size_t(eot) ? static_cast<float>(std::log(0.1 / 0.9 * 300)) : 0.0f;
  }
  ck.save();
  const std::string base = ck.cli + "--prompt 'the cat' -n 300 --seed 2 --top-k 0 ";
  std::string stopped, all, out;
  ASSERT_EQ(run(base, &out), 0) << out;
  EXPECT_NE(out.find("stopped at <|endoftext|> (new token "), std::string::npos) << out;
  ASSERT_EQ(run(quiet(base), &stopped), 0) << stopped;
  ASSERT_EQ(run(quiet(base + "--ignore-eos"), &all), 0) << all;
  ASSERT_GT(stopped.size(), 1u);
  const std::string before = stopped.substr(0, stopped.size() - 1);  // without the newline
  EXPECT_EQ(before.find("<|endoftext|>"), std::string::npos) << before;
  EXPECT_EQ(all.rfind(before + "<|endoftext|>", 0), 0u) << "stopped:\n" << stopped << "\nall:\n" << all;
  EXPECT_GT(all.size(), stopped.size() + 13);
  // An empty prompt (or none) starts from <|endoftext|>: the model's choice after it, greedily
  // (the highest logit is <|endoftext|> itself, so with --ignore-eos that is all it prints).
  for (const std::string prompt : {"--prompt '' ", ""}) {
    ASSERT_EQ(run(quiet(ck.cli + prompt + "-n 3 --temperature 0 --ignore-eos"), &out), 0) << out;
    EXPECT_EQ(out, "<|endoftext|><|endoftext|><|endoftext|>\n");
    ASSERT_EQ(run(ck.cli + prompt + "-n 3 --temperature 0", &out), 0) << out;
    EXPECT_NE(out.find("stopped at <|endoftext|> (new token 1, not printed)"), std::string::npos)
        << out;
  }
}

// An empty prompt with a model whose logits depend on the input: the text continues from
// <|endoftext|> at position 0 (the greedy tokens of a decoder started there).
TEST(SampleCli, EmptyPromptStartsFromEndOfText) {
  SampleCheckpoint ck("decoder_sample_empty", true);
  ck.save();
  std::string g;
  ASSERT_EQ(run(quiet(ck.cli + "--prompt '' -n 40 --temperature 0 --ignore-eos"), &g), 0) << g;
  SlidingDecoder sd(*ck.model, SlidingDecoder::default_drop(24));
  const int32_t start = 300;
  const float* l = sd.start(&start, 1);
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) {
    ids.push_back(argmax(l, ck.V()));
    l = sd.push(ids.back());
  }
  EXPECT_EQ(g, ck.tok.decode(ids) + "\n");
}

// A model whose GEMMs take bf16 inputs (model.matmul_precision = bf16): the decoder behind `wte
// sample` and `wte hidden-states` rounds the same GEMM inputs to bf16, so its logits are the bf16
// forward's (Model::forward_logits, the training path's forward) within the float32 bound above,
// and greedy text is the bf16 model's argmax text. A float32 decoder of the same weights is
// bf16's rounding apart (measured ~4e-3 relative): the bound would not hold for it.
TEST(Decoder, Bf16ModelSampleAndHiddenStatesEqualTheBf16Forward) {
  if (!bf16_gemm_support().native)
    GTEST_SKIP() << "oneDNN has no native bf16 matmul on this CPU (it picks "
                 << bf16_gemm_support().bf16_impl << "): the model runs float32 GEMMs";
  const fs::path dir = temp_dir("decoder_bf16");
  Config cfg = load_config("", {"--model.vocab_size=300", "--model.d_model=32", "--model.n_ctx=24",
                                "--model.n_layer=2", "--model.n_head=4", "--data.seq_len=16",
                                "--model.matmul_precision=bf16"});
  Model model(cfg.model);
  ASSERT_EQ(model.gemm_precision(), MatmulPrecision::bf16);
  randomise(model, 9, 0.2);
  const std::vector<int32_t> ids = random_ids(20, 300, 3);
  const double gap = worst_relative_gap(model, ids);
  // The same weights in a float32 model: its decoder is what a float32 decoder would compute.
  Config f32 = cfg;
  f32.model.matmul_precision = MatmulPrecision::f32;
  Model model32(f32.model);
  std::memcpy(model32.param_data(), model.param_data(), model.num_parameters() * sizeof(float));
  const size_t T = ids.size(), V = 300;
  const float* logits = model.forward_logits(ids.data(), 1, T);
  const std::vector<float> bf16_logits(logits, logits + T * V);
  Decoder dec32(model32);
  double gap32 = 0;
  for (size_t t = 0; t < T; ++t) {
    const float* got = dec32.step(ids[t]);
    double scale = 0, diff = 0;
    for (size_t v = 0; v < V; ++v) {
      scale = std::max(scale, std::fabs(double(bf16_logits[t * V + v])));
      diff = std::max(diff, std::fabs(double(got[v]) - double(bf16_logits[t * V + v])));
    }
    gap32 = std::max(gap32, diff / (1.0 + scale));
  }
  std::printf("bf16 model: worst |decoder - bf16 forward| / (1 + max|logit|) = %.3g (a float32 "
              "decoder: %.3g)\n", gap, gap32);
  EXPECT_LE(gap, 1e-5);
  EXPECT_GT(gap32, 1e-5) << "the test's model does not tell bf16 from float32 GEMMs";

  // The commands, on a checkpoint of the bf16 model.
  const Tokenizer tok = Tokenizer::train(tiny_corpus(), 300);
  const std::string ckpt = (dir / "bf16.h5").string();
  save_checkpoint(ckpt, model, nullptr, tok, cfg, 0);
  const std::string cli = std::string("'") + WTE_CLI + "' ";
  // `wte sample --temperature 0`: the argmax of the bf16 forward at each step.
  std::string g;
  ASSERT_EQ(run("{ " + cli + "sample --checkpoint '" + ckpt +
                    "' --prompt 'the cat' --max-new-tokens 8 --temperature 0 2>/dev/null; }",
                &g),
            0)
      << g;
  std::vector<int32_t> greedy = tok.encode("the cat");
  for (int i = 0; i < 8; ++i) {
    const float* l = model.forward_logits(greedy.data(), 1, greedy.size()) + (greedy.size() - 1) * V;
    greedy.push_back(static_cast<int32_t>(std::max_element(l, l + V) - l));
  }
  EXPECT_EQ(g, tok.decode(greedy) + "\n");
  // `wte hidden-states --out`: its logits against the bf16 forward of the same text.
  const std::string h5 = (dir / "hidden.h5").string();
  std::string out;
  ASSERT_EQ(run(cli + "hidden-states --checkpoint '" + ckpt + "' --text 'the king said unto them' "
                      "--out '" + h5 + "'",
                &out),
            0)
      << out;
  const std::vector<int32_t> text = tok.encode("the king said unto them");
  H5::H5File file(h5, H5F_ACC_RDONLY);
  H5::DataSet ds = file.openDataSet("text0/logits");
  std::vector<float> got(text.size() * V);
  ASSERT_EQ(static_cast<size_t>(ds.getSpace().getSimpleExtentNpoints()), got.size());
  ds.read(got.data(), H5::PredType::NATIVE_FLOAT);
  const float* want = model.forward_logits(text.data(), 1, text.size());
  double worst = 0;
  for (size_t t = 0; t < text.size(); ++t) {
    double scale = 0, diff = 0;
    for (size_t v = 0; v < V; ++v) {
      scale = std::max(scale, std::fabs(double(want[t * V + v])));
      diff = std::max(diff, std::fabs(double(got[t * V + v]) - double(want[t * V + v])));
    }
    worst = std::max(worst, diff / (1.0 + scale));
  }
  std::printf("bf16 model: wte hidden-states logits, worst gap to the bf16 forward = %.3g\n", worst);
  EXPECT_LE(worst, 1e-5);
}
