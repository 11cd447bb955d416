// Tests of the geometry measures (src/analysis/geometry.h), the SVG writer (src/analysis/svg.h), snapshots, and the
// `wte geometry` / `wte hidden-states` commands as a user runs them. Exact values where derivable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/error.h"
#include "src/analysis/geometry.h"
#include "src/analysis/geometry_page.h"
#include "src/analysis/geometry_report.h"
#include "wte/model.h"
#include "wte/rng.h"
#include "src/io/snapshot.h"
#include "src/analysis/svg.h"
#include "wte/tokenizer.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace wte;
using wte::test::error_of;
using wte::test::run;
using wte::test::slurp;
using wte::test::temp_dir;

namespace {

RowsView view(const std::vector<float>& m, size_t cols) { return {m.data(), m.size() / cols, cols}; }

}  // namespace

// --- Measures, exact cases ------------------------------------------------------------------------

TEST(Geometry, NearestNeighboursExactCosines) {
  // Rows (1,0), (1,1), (0,1), (-1,0): cosines with row 0 are 1/sqrt2, 0, -1.
  const std::vector<float> w = {1, 0, 1, 1, 0, 1, -1, 0};
  const auto nb = nearest_neighbours(view(w, 2), {0, 2}, 5);
  ASSERT_EQ(nb[0].size(), 3u);  // k capped at N - 1, query excluded
  EXPECT_EQ(nb[0][0].id, 1);
  EXPECT_NEAR(nb[0][0].cosine, 1 / std::sqrt(2.0), 1e-15);
  EXPECT_EQ(nb[0][1].id, 2);
  EXPECT_EQ(nb[0][1].cosine, 0.0);
  EXPECT_EQ(nb[0][2].id, 3);
  EXPECT_EQ(nb[0][2].cosine, -1.0);
  EXPECT_EQ(nb[1][0].id, 1);
  EXPECT_NE(error_of([&] { nearest_neighbours(view(w, 2), {4}, 1); }).find("token id 4"),
            std::string::npos);
  const std::vector<float> zero = {1, 0, 0, 0};
  EXPECT_NE(error_of([&] { nearest_neighbours(view(zero, 2), {0}, 1); }).find("row 1 has norm 0"),
            std::string::npos);
}

TEST(Geometry, AnisotropyExactValues) {
  // Four rows, all the same direction (different lengths): every cosine is 1.
  const std::vector<float> same = {1, 2, 2, 4, 3, 6, 0.5f, 1};
  const Anisotropy a = anisotropy(view(same, 2));
  EXPECT_NEAR(a.raw, 1.0, 1e-12);
  // Centred: rows - mean = multiples of (1,2) with signs -,+,+,- ... (-0.625,+0.375,+1.375,-1.125)
  // x (1,2): cosines +1 for same sign, -1 otherwise: 2 same-sign pairs of 6 -> (2·1 + 4·(-1))/6.
  EXPECT_NEAR(a.centred, -1.0 / 3.0, 1e-12);
  // ±e1, ±e2: raw mean cosine -1/3 (each row has one opposite among 3 others; sum of units = 0).
  const std::vector<float> cross = {1, 0, -1, 0, 0, 1, 0, -1};
  EXPECT_NEAR(anisotropy(view(cross, 2)).raw, (0.0 - 4.0) / 12.0, 1e-15);
  // A zero row is left out and counted.
  const std::vector<float> with_zero = {1, 0, 0, 0, 1, 0};
  const Anisotropy z = anisotropy(view(with_zero, 2));
  EXPECT_EQ(z.zero_rows_raw, 1u);
  EXPECT_NEAR(z.raw, 1.0, 1e-15);
}

TEST(Geometry, AnisotropyOfNoiseIsNearZero) {
  // i.i.d. Gaussian rows: mean pair cosine has mean 0 and std about 1/(N·sqrt(C))·sqrt(2).
  Rng rng(3);
  const size_t N = 2000, C = 64;
  std::vector<float> w(N * C);
  for (float& x : w) x = static_cast<float>(0.02 * rng.normal());
  const Anisotropy a = anisotropy(view(w, C));
  EXPECT_LT(std::fabs(a.raw), 5e-3);
  EXPECT_LT(std::fabs(a.centred + 1.0 / (N - 1)), 5e-3);  // centring makes rows sum to 0: -1/(N-1)
}

TEST(Geometry, EffectiveRankExactAndMarchenkoPastur) {
  // Orthogonal rows of equal norm: all singular values equal -> PR = C exactly.
  const std::vector<float> eye = {2, 0, 0, 0, 2, 0, 0, 0, 2};
  EXPECT_DOUBLE_EQ(effective_rank(view(eye, 3)), 3.0);
  // Rank one: PR = 1 exactly.
  const std::vector<float> r1 = {1, 2, 3, 2, 4, 6, -1, -2, -3};
  EXPECT_NEAR(effective_rank(view(r1, 3)), 1.0, 1e-12);
  // Singular values 3 and 1 (rows (3,0), (0,1)): (9+1)^2 / (81+1) = 100/82.
  const std::vector<float> d = {3, 0, 0, 1};
  EXPECT_NEAR(effective_rank(view(d, 2)), 100.0 / 82.0, 1e-14);
  // Gaussian (N, C): PR ≈ C / (1 + C/N).
  Rng rng(5);
  const size_t N = 4000, C = 100;
  std::vector<float> w(N * C);
  for (float& x : w) x = static_cast<float>(rng.normal());
  EXPECT_NEAR(effective_rank(view(w, C)), C / (1.0 + double(C) / N), 1.0);
  const std::vector<float> zeros(6, 0.0f);
  EXPECT_NE(error_of([&] { effective_rank(view(zeros, 2)); }).find("every row is zero"),
            std::string::npos);
}

TEST(Geometry, PurityAndSilhouetteExact) {
  // Two tight, opposite classes: purity 1, silhouette exactly 1 (a = 0, b = 2).
  const std::vector<float> w = {1, 0, 2, 0, 3, 0, -1, 0, -2, 0, -3, 0};
  const std::vector<int> labels = {0, 0, 0, 1, 1, 1};
  EXPECT_DOUBLE_EQ(knn_purity(view(w, 2), labels, 2), 1.0);
  EXPECT_DOUBLE_EQ(silhouette(view(w, 2), labels), 1.0);
  // Labels swapped across the groups: purity with k = 2 is 0, silhouette -1.
  const std::vector<int> mixed = {0, 1, 1, 0, 0, 1};
  // row 0's neighbours are rows 1, 2 (classes 1, 1): 0; row 1: rows 0 (0), 2 (1): 1/2; ...
  EXPECT_NEAR(knn_purity(view(w, 2), mixed, 2), (0 + 0.5 + 0.5 + 0 + 0.5 + 0.5) / 6.0, 1e-15);
  // Chance: 2 classes of 3 among 6 rows: 2 · (3/6)(2/5) = 0.4.
  EXPECT_DOUBLE_EQ(knn_purity_chance(labels), 0.4);
  // Six classes of 10, 10, 10, 10, 10, 12 (the planted corpus): sum (n/62)(n-1)/61.
  std::vector<int> planted;
  for (int c = 0; c < 6; ++c)
    for (int i = 0; i < (c == 0 ? 12 : 10); ++i) planted.push_back(c);
  EXPECT_NEAR(knn_purity_chance(planted), (12.0 * 11 + 5 * 10.0 * 9) / (62.0 * 61), 1e-15);
  EXPECT_NE(error_of([&] { knn_purity(view(w, 2), labels, 6); }).find("k = 6"), std::string::npos);
  EXPECT_NE(error_of([&] { knn_purity(view(w, 2), {0, 1}, 1); }).find("2 labels for 6 rows"),
            std::string::npos);
  EXPECT_NE(error_of([&] { silhouette(view(w, 2), {0, 0, 0, 0, 0, 0}); }).find("at least 2"),
            std::string::npos);
}

TEST(Geometry, PcaFindsThePlantedAxes) {
  // Points spread along (1,1,0) (variance large) and (0,0,1) (smaller), none along (1,-1,0).
  std::vector<float> w;
  const double s = 1 / std::sqrt(2.0);
  for (int i = -5; i <= 5; ++i)
    for (int j = -1; j <= 1; ++j) {
      w.push_back(float(i * s));
      w.push_back(float(i * s));
      w.push_back(float(j));
    }
  const Pca2 p = pca_2d(view(w, 3));
  // PC1 = distance along (1,1,0) = i (sign fixed positive), PC2 = j.
  for (size_t r = 0; r < p.x.size(); ++r) {
    EXPECT_NEAR(p.x[r], double(int(r / 3) - 5), 1e-5);
    EXPECT_NEAR(std::fabs(p.y[r]), std::fabs(double(int(r % 3) - 1)), 1e-5);
  }
  // Variances: i in -5..5 -> 10 (sample, n-1 = 32 over 33 rows: 110·3/32), j -> 22/32.
  EXPECT_NEAR(p.explained[0], 330.0 / (330.0 + 22.0), 1e-6);
  EXPECT_NEAR(p.explained[1], 22.0 / (330.0 + 22.0), 1e-6);
}

TEST(Geometry, PairCosinesAllPairsOrSampled) {
  const std::vector<float> w = {1, 0, 0, 1, 1, 1};
  const auto all = pair_cosines(view(w, 2), 100, 1);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_DOUBLE_EQ(all[0], 0.0);
  EXPECT_NEAR(all[1], 1 / std::sqrt(2.0), 1e-15);
  const auto some = pair_cosines(view(w, 2), 2, 1);
  EXPECT_EQ(some.size(), 2u);
  EXPECT_EQ(some, pair_cosines(view(w, 2), 2, 1));  // deterministic
}

// --- SVG --------------------------------------------------------------------------------------------

// --labels given a directory says so (an ifstream opens a directory and reads nothing: it was
// "fewer than 2 labelled tokens").
TEST(Geometry, LabelsDirectoryIsNamedAsADirectory) {
  const fs::path dir = temp_dir("geometry_labels_dir");
  const Tokenizer tok = Tokenizer::train("a b c d", 256);
  const std::string msg = error_of([&] { read_token_labels(dir.string(), tok); });
  EXPECT_EQ(msg, "--labels " + dir.string() + ": '" + dir.string() + "' is a directory, not a file");
}

TEST(Svg, EscapesAndDrawsEveryElement) {
  EXPECT_EQ(svg::escape("<a&\"b'>"), "&lt;a&amp;&quot;b&apos;&gt;");
  EXPECT_EQ(svg::escape(std::string("\x01\xff", 2)), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(svg::escape("é"), "é");
  const std::string sc = svg::scatter({"t<1>", "x", "y"},
                                      {{0, 0, "#000", "tok <&>"}, {1, 2, "#111", ""}},
                                      {{"class a", "#000"}});
  EXPECT_EQ(sc.rfind("<?xml", 0), 0u);
  EXPECT_NE(sc.find("t&lt;1&gt;"), std::string::npos);
  EXPECT_NE(sc.find("<title>tok &lt;&amp;&gt;</title>"), std::string::npos);
  size_t circles = 0;
  for (size_t p = sc.find("<circle"); p != std::string::npos; p = sc.find("<circle", p + 1)) ++circles;
  EXPECT_EQ(circles, 2u);
  const std::string h = svg::histogram({"h", "x", "y"}, {{"a", "#000", {0.1, 0.2, 0.9}}}, 0, 1, 4);
  EXPECT_NE(h.find("<path"), std::string::npos);
  EXPECT_NE(error_of([] { svg::histogram({}, {}, 1, 1, 4); }).find("lo < hi"), std::string::npos);
  const std::string l = svg::line_chart({"l", "x", "y"}, {{"s", "#000", {0, 1, 2}, {3, 1, 2}}});
  EXPECT_NE(l.find("<polyline"), std::string::npos);
  EXPECT_NE(error_of([] { svg::line_chart({}, {{"s", "#000", {0, 1}, {3}}}); }).find("series 's'"),
            std::string::npos);
  EXPECT_EQ(svg::sequential_colour(0), "#440154");
  EXPECT_EQ(svg::sequential_colour(1), "#fde725");
}

namespace {

// The x tick labels of an SVG chart (each tick a <g class="xtick"> holding its label).
std::vector<std::string> x_tick_labels(const std::string& svg_text) {
  std::vector<std::string> labels;
  for (size_t p = svg_text.find("class=\"xtick\""); p != std::string::npos;
       p = svg_text.find("class=\"xtick\"", p + 1)) {
    const size_t open = svg_text.find("<text", p), start = svg_text.find('>', open) + 1;
    labels.push_back(svg_text.substr(start, svg_text.find("</text>", start) - start));
  }
  return labels;
}

}  // namespace

TEST(Svg, IntegerAxisHasOnlyIntegerTicks) {
  // Layers 0..2: nice ticks alone would step by 0.2 or 0.5.
  svg::Frame f{"per layer", "layer", "y"};
  const std::vector<svg::LineSeries> s = {{"a", "#000", {0, 1, 2}, {0.1, 0.5, 0.3}}};
  const std::vector<std::string> plain = x_tick_labels(svg::line_chart(f, s));
  EXPECT_TRUE(std::any_of(plain.begin(), plain.end(),
                          [](const std::string& t) { return t.find('.') != std::string::npos; }));
  f.x_integer = true;
  EXPECT_EQ(x_tick_labels(svg::line_chart(f, s)), (std::vector<std::string>{"0", "1", "2"}));
}

TEST(GeometryPage, StripPicksTheStepsAroundTheLargestChanges) {
  // Ten snapshots; purity jumps between snapshots 6 and 7, anisotropy moves a little everywhere.
  std::vector<GeometryMeasures> series(10);
  for (size_t i = 0; i < series.size(); ++i) {
    series[i].step = static_cast<int64_t>(i * 10);
    series[i].aniso.raw = 0.01 * double(i);
    series[i].eff_rank = 100.0 - double(i);
    series[i].purity = i < 7 ? 0.2 : 0.9;
    series[i].silhouette = i < 7 ? 0.0 : 0.5;
  }
  const std::vector<size_t> picks = strip_picks(series, true, 6);
  EXPECT_EQ(picks.size(), 6u);
  EXPECT_EQ(picks.front(), 0u);
  EXPECT_EQ(picks.back(), 9u);
  EXPECT_TRUE(std::is_sorted(picks.begin(), picks.end()));
  EXPECT_NE(std::find(picks.begin(), picks.end(), 6u), picks.end());
  EXPECT_NE(std::find(picks.begin(), picks.end(), 7u), picks.end());
  // Without labels, a collapse of the effective rank between 2 and 3 is what shows.
  for (size_t i = 0; i < series.size(); ++i) series[i].eff_rank = i < 3 ? 200.0 : 3.0;
  const std::vector<size_t> unlabelled = strip_picks(series, false, 4);
  EXPECT_EQ(unlabelled, (std::vector<size_t>{0, 2, 3, 9}));
  // Few snapshots: all of them.
  series.resize(4);
  EXPECT_EQ(strip_picks(series, true, 6), (std::vector<size_t>{0, 1, 2, 3}));
}

// --- Config and snapshots ----------------------------------------------------------------------------

TEST(Snapshots, ConfigKeyParsesAndRejects) {
  Config c = load_config("", {"--train.steps=100", "--train.snapshot_steps=0, 10,100"});
  EXPECT_EQ(c.train.snapshot_steps, (std::vector<size_t>{0, 10, 100}));
  EXPECT_EQ(parse_config(c.to_ini(), "round trip").train.snapshot_steps, c.train.snapshot_steps);
  // The built-in default is configs/default.ini's.
  EXPECT_EQ(load_config("", {}).train.snapshot_steps, (std::vector<size_t>{0, 100, 300, 600}));
  const std::string e1 = error_of([] { load_config("", {"--train.snapshot_steps=0,10,5"}); });
  EXPECT_NE(e1.find("not strictly increasing"), std::string::npos) << e1;
  // Steps past train.steps are kept (a shorter run of the same config reaches fewer of them; the
  // trainer notes the ones it skips), and an empty value on the command line means none.
  EXPECT_EQ(load_config("", {"--train.steps=50", "--train.snapshot_steps=0,60"}).train.snapshot_steps,
            (std::vector<size_t>{0, 60}));
  EXPECT_TRUE(load_config("", {"--train.snapshot_steps="}).train.snapshot_steps.empty());
  EXPECT_NE(error_of([] { load_config("", {"--train.snapshot_steps=0,x"}); }).find("0,x"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_config("", {"--train.snapshot_steps=0,"}); }).find("comma"),
            std::string::npos);
}

TEST(Snapshots, TrainWritesStepZeroNoiseAndTheChosenSteps) {
  // The planted generator (python) makes a small corpus; training writes the chosen snapshots.
  const fs::path dir = temp_dir("geometry_train");
  std::string out;
  ASSERT_EQ(run("/usr/bin/python3 '" WTE_SOURCE_DIR "/datasets/make_planted.py' --documents 60 --out '" +
                    (dir / "planted").string() + "'",
                &out),
            0)
      << out;
  ASSERT_EQ(run(std::string("'") + WTE_CLI + "' train --config '" WTE_SOURCE_DIR
                "/configs/planted.ini' --data.text='" + (dir / "planted/planted.txt").string() +
                "' --data.tokenizer='" + (dir / "planted/tokenizer").string() +
                "' --model.n_layer=0 --model.d_model=16 --train.steps=6 --train.batch_size=4 "
                "--train.eval_interval=0 "
                "--train.snapshot_steps=0,2,6 -q --out '" + (dir / "run").string() + "'",
                &out),
            0)
      << out;
  const auto snaps = list_snapshots((dir / "run").string());
  ASSERT_EQ(snaps.size(), 3u) << out;
  EXPECT_EQ(snaps[0].first, 0u);
  EXPECT_EQ(snaps[1].first, 2u);
  EXPECT_EQ(snaps[2].first, 6u);
  // Step 0 is the init: wte equals a fresh model's init_weights(seed) bit for bit.
  const CheckpointInfo info = read_checkpoint_info(snaps[0].second);
  EXPECT_EQ(info.step, 0);
  const Config cfg = parse_config(info.config_ini, "snapshot");
  Model stored(cfg.model), fresh(cfg.model);
  load_checkpoint(snaps[0].second, stored, nullptr);
  fresh.init_weights(cfg.train.seed);
  const size_t n = cfg.model.vocab_size * cfg.model.d_model;
  EXPECT_EQ(0, std::memcmp(stored.params().wte, fresh.params().wte, n * sizeof(float)));
  // The last snapshot is the final checkpoint's wte.
  Model last(cfg.model), final_ckpt(cfg.model);
  load_checkpoint(snaps[2].second, last, nullptr);
  load_checkpoint((dir / "run" / "checkpoint_00000006.h5").string(), final_ckpt, nullptr);
  EXPECT_EQ(0, std::memcmp(last.params().wte, final_ckpt.params().wte, n * sizeof(float)));
  EXPECT_NE(0, std::memcmp(last.params().wte, fresh.params().wte, n * sizeof(float)));

  // wte geometry over the series, with the generator's labels.
  ASSERT_EQ(run(std::string("'") + WTE_CLI + "' geometry --checkpoint '" + (dir / "run").string() +
                    "' --labels '" + (dir / "planted/labels.tsv").string() +
                    "' --query ' cat, red,#259' --out '" + (dir / "geo").string() + "'",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("3 checkpoints"), std::string::npos) << out;
  EXPECT_NE(out.find("62 tokens in 6 classes; k-NN purity chance level 0.1539"), std::string::npos)
      << out;
  EXPECT_NE(out.find("\" cat\" (285):"), std::string::npos) << out;
  for (const char* f : {"index.html", "geometry.csv", "geometry.json", "pca_step_00000000.svg",
                        "pca_step_00000006.svg", "cosines.svg", "norms.svg", "series_purity.svg",
                        "series_anisotropy.svg", "series_rank.svg"})
    EXPECT_TRUE(fs::is_regular_file(dir / "geo" / f)) << f;
  // No blocks: a row is wte[id] + wpe[index] whatever the context, so there are no hidden states
  // per layer to measure, no pictures of them and no section on the page; the output says why.
  EXPECT_NE(out.find("no transformer blocks (model.n_layer = 0)"), std::string::npos) << out;
  EXPECT_EQ(out.find("hidden states per layer of "), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "geo" / "context_layers.svg"));
  const std::string page = slurp(dir / "geo" / "index.html");
  EXPECT_EQ(page.find("Hidden states per layer"), std::string::npos);
  // The summary box and the neighbour table come before the first picture.
  EXPECT_LT(page.find("id=\"summary\""), page.find("id=\"neighbours\""));
  EXPECT_LT(page.find("id=\"neighbours\""), page.find("<figure"));
  const std::string csv = slurp(dir / "geo" / "geometry.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << csv;

  // Bad inputs: a labels file for another vocabulary (a run-time failure, 1), a multi-token
  // --query item (bad usage, 2).
  {
    std::ofstream bad(dir / "bad_labels.tsv");
    bad << "id\ttoken\tclass\n285\tĠdog\tanimal\n";
  }
  EXPECT_EQ(run(std::string("'") + WTE_CLI + "' geometry --checkpoint '" + snaps[0].second +
                    "' --labels '" + (dir / "bad_labels.tsv").string() + "'",
                &out),
            1);
  EXPECT_NE(out.find("line 2: token 285 is 'Ġcat' in the checkpoint's tokenizer, not 'Ġdog'"),
            std::string::npos)
      << out;
  EXPECT_EQ(run(std::string("'") + WTE_CLI + "' geometry --checkpoint '" + snaps[0].second +
                    "' --query ' cat dog'",
                &out),
            2);
  EXPECT_NE(out.find("' cat dog' is 2 tokens"), std::string::npos) << out;
}

// --- hidden-states -----------------------------------------------------------------------------------

TEST(HiddenStates, BankAtIndexOneIsBitIdenticalWithGpt2Vocabulary) {
  const fs::path vocab = fs::path(WTE_SOURCE_DIR) / "datasets" / "gpt2";
  if (!fs::is_regular_file(vocab / "encoder.json"))
    GTEST_SKIP() << "GPT-2's vocabulary is missing: run datasets/fetch_gpt2_vocab.sh";
  const fs::path dir = temp_dir("geometry_hidden");
  Config cfg = load_config("", {"--model.vocab_size=50257", "--model.d_model=16",
                                "--model.n_ctx=16", "--data.seq_len=16", "--model.n_layer=0"});
  Model model(cfg.model);
  model.init_weights(7);
  const Tokenizer tok = Tokenizer::load(vocab.string());
  const std::string ckpt = (dir / "gpt2vocab.h5").string();
  save_checkpoint(ckpt, model, nullptr, tok, cfg, 0);
  std::string out;
  ASSERT_EQ(run(std::string("'") + WTE_CLI + "' hidden-states --checkpoint '" + ckpt +
                    "' --text 'The bank was muddy' --text 'The bank was closed' "
                    "--text 'By the bank, the bank'",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("layer 0"), std::string::npos) << out;
  EXPECT_NE(out.find("vocab_size 50257"), std::string::npos) << out;
  EXPECT_NE(out.find("      1   3331  \" bank\""), std::string::npos) << out;
  // The seed's pair: " bank" at index 1 sees only "The" and itself, so it is equal at every layer,
  // and the command says why.
  EXPECT_NE(out.find("\" bank\" (3331) at index 1: bit-identical at all 2 layers"), std::string::npos)
      << out;
  EXPECT_NE(out.find("why equal: the texts are the same tokens up to index 2 (\"The\" \" bank\" \" was\")"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("put them BEFORE the token"), std::string::npos) << out;
  EXPECT_NE(out.find("bit for bit: 14 of 14 rows"), std::string::npos) << out;
  // " bank" at index 1 (text 0) and index 2 (text 2): differs by wpe[1] - wpe[2].
  EXPECT_NE(out.find("\" bank\" (3331) at index 1 of text 0 and index 2 of text 2: rows differ"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("DIFFERENT"), std::string::npos) << out;
  // A text longer than n_ctx is refused before any compute (bad usage: exit 2).
  EXPECT_EQ(run(std::string("'") + WTE_CLI + "' hidden-states --checkpoint '" + ckpt +
                    "' --text 'a b c d e f g h i j k l m n o p q'",
                &out),
            2);
  EXPECT_NE(out.find("17 tokens, more than the model's n_ctx = 16"), std::string::npos) << out;
}
