// Tests of the contextual geometry (src/analysis/context_geometry.h): exact values on rows built by
// hand, and the hidden-state sample taken through the decoder.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <cstring>
#include <vector>

#include "src/analysis/context_geometry.h"
#include "wte/decoder.h"
#include "tests/test_util.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/model.h"
#include "wte/tokenizer.h"

namespace fs = std::filesystem;
using namespace wte;
using namespace wte::test;

namespace {

// A one-layer sample of 2-D rows: (token, position, x, y) each.
HiddenStateSample hand_sample(const std::vector<std::vector<double>>& rows) {
  HiddenStateSample s;
  s.C = 2;
  s.layer_names = {"hidden_states[0]"};
  s.rows.resize(1);
  for (const auto& r : rows) {
    s.ids.push_back(static_cast<int32_t>(r[0]));
    s.positions.push_back(static_cast<uint32_t>(r[1]));
    s.rows[0].push_back(static_cast<float>(r[2]));
    s.rows[0].push_back(static_cast<float>(r[3]));
  }
  return s;
}

}  // namespace

TEST(ContextGeometry, ExactAnisotropyAndSelfSimilarity) {
  // Token 1 at (1,0) twice, token 2 at (0,1) twice; a position-0 row (5,5) of token 1 is left out.
  // Unit rows sum to (2,2): anisotropy = (|sum|² - n) / (n(n-1)) = (8 - 4) / 12 = 1/3.
  // Centred on the mean (0.5,0.5) the rows are ±(1,-1)/√2, summing to 0: (0 - 4) / 12 = -1/3.
  // Each token's two rows are equal: self-similarity 1, raw and centred.
  const HiddenStateSample s =
      hand_sample({{1, 0, 5, 5}, {1, 1, 1, 0}, {1, 2, 1, 0}, {2, 1, 0, 1}, {2, 3, 0, 1}});
  const std::vector<LayerGeometry> g = context_geometry(s, 1, 2);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].rows, 4u);
  EXPECT_EQ(g[0].tokens, 2u);
  EXPECT_NEAR(g[0].anisotropy_raw, 1.0 / 3, 1e-12);
  EXPECT_NEAR(g[0].anisotropy_centred, -1.0 / 3, 1e-12);
  EXPECT_NEAR(g[0].self_similarity_raw, 1.0, 1e-12);
  EXPECT_NEAR(g[0].self_similarity_centred, 1.0, 1e-12);
  EXPECT_NEAR(g[0].mean_norm, 1.0, 1e-12);
  // With position 0 included, token 1 has rows (5,5),(1,0),(1,0): pair cosines 1/√2, 1/√2, 1.
  const std::vector<LayerGeometry> g0 = context_geometry(s, 0, 2);
  EXPECT_NEAR(g0[0].self_similarity_raw, ((2 / std::sqrt(2.0) + 1) / 3 + 1) / 2, 1e-12);
  // min_count 3 keeps only token 1 (3 rows) when position 0 counts; none when it does not.
  EXPECT_EQ(context_geometry(s, 0, 3)[0].tokens, 1u);
  EXPECT_NE(error_of([&] { context_geometry(s, 1, 3); }).find("no token occurs 3 times"),
            std::string::npos);
  // Orthogonal rows of one token: self-similarity 0.
  const HiddenStateSample o = hand_sample({{7, 1, 3, 0}, {7, 2, 0, 2}});
  EXPECT_NEAR(context_geometry(o, 1, 2)[0].self_similarity_raw, 0.0, 1e-12);
  // Layer mean and centred cosine.
  const std::vector<double> m = layer_mean(s, 0, 1);
  EXPECT_DOUBLE_EQ(m[0], 0.5);
  EXPECT_DOUBLE_EQ(m[1], 0.5);
  const float a[2] = {1, 0}, b[2] = {0, 1};
  EXPECT_NEAR(centred_cosine(a, b, nullptr, 2), 0.0, 1e-15);
  EXPECT_NEAR(centred_cosine(a, b, m.data(), 2), -1.0, 1e-15);
}

TEST(ContextGeometry, PairCosinesAllOrSampled) {
  const HiddenStateSample s =
      hand_sample({{1, 1, 1, 0}, {1, 2, 1, 0}, {2, 1, 0, 1}, {2, 3, 0, 1}, {2, 4, 0, 2}});
  const PairCosines all = layer_pair_cosines(s, 0, 1, 100, false, 1);
  EXPECT_EQ(all.random_pairs.size(), 100u);
  ASSERT_EQ(all.same_token_pairs.size(), 4u);  // 1 pair of token 1, 3 of token 2: all of them
  for (double c : all.same_token_pairs) EXPECT_NEAR(c, 1.0, 1e-12);
  for (double c : all.random_pairs) EXPECT_TRUE(std::fabs(c) < 1e-12 || std::fabs(c - 1) < 1e-12);
  const PairCosines few = layer_pair_cosines(s, 0, 1, 3, false, 1);
  EXPECT_EQ(few.same_token_pairs.size(), 3u);  // sampled
  const PairCosines again = layer_pair_cosines(s, 0, 1, 3, false, 1);
  EXPECT_EQ(few.random_pairs, again.random_pairs);
}

TEST(ContextGeometry, SampleTakesEvenlySpacedWindowsThroughTheDecoder) {
  ModelConfig mc;
  mc.vocab_size = 100, mc.d_model = 8, mc.n_ctx = 16;
  Model model(mc);
  model.init_weights(3);
  std::vector<int32_t> tokens(100);
  for (int i = 0; i < 100; ++i) tokens[i] = i;
  // 35 rows in windows of 10: 4 windows starting at 0, 30, 60, 90; the last gives 5 rows.
  const HiddenStateSample s = sample_hidden_states(model, tokens, 35, 10, "tokens");
  ASSERT_EQ(s.ids.size(), 35u);
  ASSERT_EQ(s.layers(), 2u);  // no blocks: wte + wpe, and ln_f of it
  EXPECT_EQ(s.layer_names[1], "hidden_states[1] (ln_f of hidden_states[0])");
  EXPECT_EQ(s.ids[10], 30);
  EXPECT_EQ(s.positions[10], 0u);
  EXPECT_EQ(s.ids[34], 94);
  EXPECT_EQ(s.positions[34], 4u);
  // Layer 0 rows are wte[id] + wpe[position], bit for bit.
  for (size_t i = 0; i < s.ids.size(); ++i)
    for (size_t c = 0; c < 8; ++c) {
      const float want = model.params().wte[size_t(s.ids[i]) * 8 + c] +
                         model.params().wpe[size_t(s.positions[i]) * 8 + c];
      ASSERT_EQ(0, std::memcmp(&want, &s.rows[0][i * 8 + c], sizeof(float))) << i << " " << c;
    }
  EXPECT_NE(error_of([&] { sample_hidden_states(model, {1}, 10, 10, "x.bin"); }).find("x.bin: 1 tokens"),
            std::string::npos);
  EXPECT_NE(error_of([&] { sample_hidden_states(model, {1, 100}, 10, 10, "x.bin"); }).find("100"),
            std::string::npos);
}

TEST(HiddenStatesCli, BlocksAddContextOnlyFromEarlierTokens) {
  // A random 2-block model: " bank" after the same prefix is equal at every layer (the reason is
  // printed); after " river" vs " money" it is bit-identical at layer 0 and differs after block 0.
  const fs::path dir = temp_dir("context_hidden_blocks");
  const Tokenizer tok = Tokenizer::train(tiny_corpus(), 512);  // stops when no pair is left
  Config cfg = load_config("", {"--model.vocab_size=" + std::to_string(tok.size()),
                                "--model.d_model=16", "--model.n_ctx=16", "--model.n_layer=2",
                                "--model.n_head=2", "--data.seq_len=16"});
  Model model(cfg.model);
  model.init_weights(5);
  const std::string ckpt = (dir / "blocks.h5").string();
  save_checkpoint(ckpt, model, nullptr, tok, cfg, 0);
  ASSERT_EQ(tok.encode(" bank").size(), 1u);
  std::string out;
  ASSERT_EQ(run(std::string("'") + WTE_CLI + "' hidden-states --checkpoint '" + ckpt +
                    "' --text 'the bank was' --text 'the bank is' --text 'the river bank'"
                    " --text 'the money bank' --dims 2",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("n_layer 2"), std::string::npos) << out;
  EXPECT_NE(out.find("hidden_states[2] (ln_f)"), std::string::npos) << out;
  EXPECT_NE(out.find("\" bank\" (" + std::to_string(tok.encode(" bank")[0]) +
                     ") at index 1: bit-identical at all 3 layers"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("A row sees only the tokens at or before its index"), std::string::npos) << out;
  // text 2 and text 3: " bank" at index 2 after " river" / " money".
  const size_t pair = out.find("text 2 and text 3");
  ASSERT_NE(pair, std::string::npos) << out;
  const std::string tail = out.substr(pair);
  EXPECT_NE(tail.find("the texts differ at index 1 (\" river\" vs \" money\")"), std::string::npos)
      << tail;
  EXPECT_NE(tail.find("    hidden_states[0]             yes "), std::string::npos) << tail;
  EXPECT_NE(tail.find("    hidden_states[1]             no "), std::string::npos) << tail;
  EXPECT_NE(tail.find("    hidden_states[2] (ln_f)      no "), std::string::npos) << tail;
  // No val.bin beside the checkpoint: the baseline comes from the texts' own rows, and says so.
  EXPECT_NE(out.find("the texts' own rows"), std::string::npos) << out;
}
