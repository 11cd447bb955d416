#include "src/analysis/context_page.h"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "src/analysis/svg.h"
#include "wte/data.h"

namespace fs = std::filesystem;

namespace wte {

std::string context_report(const ContextGeometryRun& run) {
  const HiddenStateSample& s = *run.sample;
  std::ostringstream r;
  r << "hidden states per layer of " << run.checkpoint << ": " << s.ids.size() << " rows of "
    << run.data << " (windows of up to n_ctx tokens, evenly spaced; rows at position >= "
    << run.min_position << ": " << (run.layers.empty() ? 0 : run.layers[0].rows) << ")\n"
    << "anisotropy = mean cosine of random distinct rows of the layer (exact over all pairs);\n"
    << "self-sim = Ethayarajh's self-similarity, the mean cosine of the same token's rows in\n"
    << "different contexts, averaged over the " << (run.layers.empty() ? 0 : run.layers[0].tokens)
    << " tokens with >= " << run.min_count << " rows; 'centred' subtracts the layer's mean row first.\n"
    << "Read self-sim against anisotropy: a raw self-sim of 0.9 in a layer whose random pairs\n"
    << "already average 0.85 says context changed the token's row about as much as it differs\n"
    << "from unrelated rows; the centred columns remove the common direction.\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-44s %9s %10s %8s %9s %8s %13s\n", "layer", "mean_norm",
                "anisotropy", "centred", "self-sim", "centred", "self-sim-aniso");
  r << line;
  for (size_t l = 0; l < run.layers.size(); ++l) {
    const LayerGeometry& g = run.layers[l];
    std::snprintf(line, sizeof line, "  %-44s %9.4f %10.4f %8.4f %9.4f %8.4f %13.4f\n",
                  s.layer_names[l].c_str(), g.mean_norm, g.anisotropy_raw, g.anisotropy_centred,
                  g.self_similarity_raw, g.self_similarity_centred,
                  g.self_similarity_raw - g.anisotropy_raw);
    r << line;
  }
  return r.str();
}

PageSection write_context_figures(const std::string& out_dir, const ContextGeometryRun& run) {
  const fs::path out = out_dir;
  const HiddenStateSample& s = *run.sample;
  PageSection sec;
  sec.heading = "Hidden states per layer (contextual geometry)";
  sec.paragraph =
      "Rows of every layer of Hugging Face's hidden_states list for " + std::to_string(s.ids.size()) +
      " positions of " + run.data + ", computed by " + run.checkpoint +
      ". Blue: cosines of random pairs of rows (the layer's baseline); orange: cosines of the same "
      "token's rows in different contexts (Ethayarajh 2019's self-similarity). When a layer's rows "
      "crowd into a narrow cone, random pairs already read a high raw cosine, so a high cosine of "
      "the same token means little; after subtracting the layer's mean row (the centred pictures) "
      "random pairs spread around 0 and what is left of the same token's similarity shows. One "
      "row per layer below the chart: raw on the left, centred on the right.";
  const size_t kPairs = 20000;
  for (size_t l = 0; l < s.layers(); ++l)
    for (const bool centred : {false, true}) {
      const PairCosines pc = layer_pair_cosines(s, l, run.min_position, kPairs, centred, 1 + l);
      std::vector<svg::HistogramSeries> hs = {
          {"random pairs", svg::category_colour(0), pc.random_pairs},
          {"same token", svg::category_colour(1), pc.same_token_pairs}};
      const std::string what = centred ? "centred" : "raw";
      svg::Frame f{s.layer_names[l] + ": " + what + " cosines", what + " cosine", "share of pairs"};
      char file[64];
      std::snprintf(file, sizeof file, "context_layer_%02zu_%s.svg", l, what.c_str());
      write_file_atomic((out / file).string(), svg::histogram(f, hs, -1.0, 1.0, 80));
      const LayerGeometry& g = run.layers[l];
      char caption[512];
      std::snprintf(caption, sizeof caption,
                    "%s, %s: cosines of %zu random pairs of rows (mean over all pairs %.3f) and of "
                    "%zu pairs of the same token in different contexts (self-similarity %.3f).",
                    s.layer_names[l].c_str(), centred ? "after subtracting the layer's mean row" : "raw",
                    pc.random_pairs.size(), centred ? g.anisotropy_centred : g.anisotropy_raw,
                    pc.same_token_pairs.size(),
                    centred ? g.self_similarity_centred : g.self_similarity_raw);
      sec.figures.push_back({file, caption});
    }
  std::vector<double> x;
  for (size_t l = 0; l < run.layers.size(); ++l) x.push_back(double(l));
  auto col = [&](double LayerGeometry::*field) {
    std::vector<double> y;
    for (const LayerGeometry& g : run.layers) y.push_back(g.*field);
    return y;
  };
  std::vector<svg::LineSeries> ls = {
      {"aniso raw", svg::category_colour(0), x, col(&LayerGeometry::anisotropy_raw), true},
      {"self-sim raw", svg::category_colour(1), x, col(&LayerGeometry::self_similarity_raw), true},
      {"aniso centred", svg::category_colour(2), x, col(&LayerGeometry::anisotropy_centred)},
      {"self-sim centred", svg::category_colour(3), x,
       col(&LayerGeometry::self_similarity_centred)}};
  svg::Frame layers_frame{"same token vs random rows, per layer",
                          "layer (index into hidden_states)", "mean cosine"};
  layers_frame.x_integer = true;  // layers are whole numbers: no tick at 0.5
  write_file_atomic((out / "context_layers.svg").string(), svg::line_chart(layers_frame, ls));
  // Wide, so that below it each layer is one row: raw on the left, centred on the right.
  sec.figures.insert(sec.figures.begin(),
                     {"context_layers.svg",
                      "Per layer: mean cosine of random pairs of rows (anisotropy) and of the same "
                      "token in different contexts (self-similarity); dashed: raw; solid: after "
                      "subtracting the layer's mean row. The gap between the two, not the raw "
                      "self-similarity, is what context leaves of the token.",
                      true});
  return sec;
}

}  // namespace wte
