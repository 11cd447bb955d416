#include "src/analysis/geometry_page.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "src/analysis/svg.h"
#include "wte/data.h"

namespace fs = std::filesystem;

namespace wte {

std::string format_double(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

namespace {

void write_text(const fs::path& path, const std::string& text) {
  write_file_atomic(path.string(), text);
}

// XML-escaped text keeping its line breaks (svg::escape turns them into spaces).
std::string html_escape(const std::string& s) {
  std::string out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find('\n', pos);
    if (end == std::string::npos) end = s.size();
    out += svg::escape(s.substr(pos, end - pos));
    if (end < s.size()) out += '\n';
    pos = end + 1;
  }
  return out;
}

std::string step_name(int64_t step) {
  char b[32];
  std::snprintf(b, sizeof b, "%08lld", (long long)step);
  return b;
}

// PCA of wte at one step: the labelled rows coloured by class, or ids [0, max_points) by id.
Figure pca_figure(const fs::path& out, const GeometryReportInput& in, const WteSnapshot& s,
                  size_t max_points) {
  const size_t V = in.V, C = in.C;
  const Tokenizer& tok = *in.tok;
  std::vector<svg::Point> points;
  std::vector<svg::LegendEntry> legend;
  std::string caption;
  Pca2 pca;
  if (in.labels != nullptr) {
    const TokenLabels& labels = *in.labels;
    const std::vector<float> rows = gather_rows(s.wte, C, labels.ids);
    pca = pca_2d(RowsView{rows.data(), labels.ids.size(), C});
    for (size_t i = 0; i < labels.ids.size(); ++i)
      points.push_back({pca.x[i], pca.y[i], svg::category_colour(labels.cls[i]),
                        show_token(tok, labels.ids[i]) + " " + labels.names[labels.cls[i]]});
    for (size_t c = 0; c < labels.names.size(); ++c)
      legend.push_back({labels.names[c], svg::category_colour(c)});
    caption = "the " + std::to_string(labels.ids.size()) +
              " labelled rows on their first two principal components, coloured by class";
  } else {
    pca = pca_2d(RowsView{s.wte.data(), V, C});
    const size_t n = std::min(V, max_points);
    for (size_t i = 0; i < n; ++i)
      points.push_back({pca.x[i], pca.y[i], svg::sequential_colour(double(i) / double(V - 1)),
                        show_token(tok, static_cast<int32_t>(i))});
    legend = {{"id 0", svg::sequential_colour(0)},
              {"id " + std::to_string(V - 1), svg::sequential_colour(1)}};
    caption = "all rows' first two principal components; ids [0, " + std::to_string(n) +
              ") drawn, coloured by id (merge order)";
  }
  svg::Frame f{"wte at step " + std::to_string(s.step) + ": PCA",
               "PC1 (" + format_double("%.1f", 100 * pca.explained[0]) + "% of variance)",
               "PC2 (" + format_double("%.1f", 100 * pca.explained[1]) + "%)"};
  const std::string file = "pca_step_" + step_name(s.step) + ".svg";
  write_text(out / file, svg::scatter(f, points, legend, in.labels != nullptr ? 5.0 : 2.0));
  return {file, "Step " + std::to_string(s.step) + ": " + caption + "."};
}

// Measures over the series: class structure (with labels), anisotropy, effective rank.
std::vector<Figure> series_figures(const fs::path& out, const GeometryReportInput& in) {
  const std::vector<GeometryMeasures>& series = *in.series;
  std::vector<Figure> figures;
  std::vector<double> x;
  for (const GeometryMeasures& m : series) x.push_back(double(m.step));
  auto col = [&](auto get) {
    std::vector<double> y;
    for (const GeometryMeasures& m : series) y.push_back(get(m));
    return y;
  };
  if (in.labels != nullptr) {
    const double chance = knn_purity_chance(in.labels->cls);
    std::vector<svg::LineSeries> ls = {
        {"k-NN purity (k=" + std::to_string(in.k) + ")", svg::category_colour(0), x,
         col([](const GeometryMeasures& m) { return m.purity; })},
        {"silhouette", svg::category_colour(1), x,
         col([](const GeometryMeasures& m) { return m.silhouette; })},
        {"chance purity", "#888888", {x.front(), x.back()}, {chance, chance}, true}};
    write_text(out / "series_purity.svg",
               svg::line_chart({"class structure over training", "step", "score"}, ls));
    figures.push_back({"series_purity.svg",
                       "k-NN class purity and silhouette of the labelled rows at each step; "
                       "dashed: the purity of a table with no class structure."});
  }
  std::vector<svg::LineSeries> la = {
      {"raw", svg::category_colour(0), x, col([](const GeometryMeasures& m) { return m.aniso.raw; })},
      {"mean-centred", svg::category_colour(1), x,
       col([](const GeometryMeasures& m) { return m.aniso.centred; })}};
  write_text(out / "series_anisotropy.svg",
             svg::line_chart({"anisotropy over training", "step", "mean cosine of pairs"}, la));
  figures.push_back({"series_anisotropy.svg",
                     "Anisotropy (mean cosine of distinct pairs of rows) at each step, raw and "
                     "after subtracting the mean row."});
  std::vector<svg::LineSeries> lr = {{"effective rank", svg::category_colour(2), x,
                                      col([](const GeometryMeasures& m) { return m.eff_rank; })}};
  write_text(out / "series_rank.svg",
             svg::line_chart({"effective rank over training", "step",
                              "participation ratio (max " + std::to_string(std::min(in.V, in.C)) + ")"},
                             lr));
  figures.push_back({"series_rank.svg",
                     "Effective rank (participation ratio of the singular values) at each step."});
  return figures;
}

}  // namespace

std::vector<Figure> write_wte_figures(const std::string& out_dir, const GeometryReportInput& in,
                                      size_t max_points) {
  const fs::path out = out_dir;
  const std::vector<WteSnapshot>& snaps = *in.snaps;
  const size_t V = in.V, C = in.C;
  const std::vector<size_t> shown = first_and_last(snaps.size());
  std::vector<Figure> figures;
  for (size_t si : shown) figures.push_back(pca_figure(out, in, snaps[si], max_points));
  {
    std::vector<svg::HistogramSeries> hs;
    for (size_t j = 0; j < shown.size(); ++j) {
      const WteSnapshot& s = snaps[shown[j]];
      hs.push_back({"step " + std::to_string(s.step), svg::category_colour(j),
                    pair_cosines(RowsView{s.wte.data(), V, C}, 200000, 1)});
    }
    svg::Frame f{"cosines of pairs of rows", "cosine", "share of pairs"};
    write_text(out / "cosines.svg", svg::histogram(f, hs, -1.0, 1.0, 80));
    figures.push_back({"cosines.svg", "Histogram of the cosines of pairs of distinct rows (all "
                                      "pairs, or 200000 random pairs), first and last step."});
  }
  {
    const std::vector<double> norms = row_norms(RowsView{snaps.back().wte.data(), V, C});
    std::vector<svg::Point> points;
    const size_t stride = std::max<size_t>(1, V / 20000);
    for (size_t i = 0; i < V; i += stride) points.push_back({double(i), norms[i], "#4e79a7", ""});
    svg::Frame f{"row norm against token id, step " + std::to_string(snaps.back().step),
                 "token id (merge order)", "|wte[id]|"};
    write_text(out / "norms.svg", svg::scatter(f, points, {}, 1.5));
    figures.push_back({"norms.svg", "Norm of each row of wte against its id" +
                                        (stride > 1 ? " (every " + std::to_string(stride) + "th id)"
                                                    : std::string()) +
                                        " at the last step."});
  }
  if (in.series->size() > 1)
    for (Figure& f : series_figures(out, in)) figures.push_back(std::move(f));
  return figures;
}

void write_geometry_csv(const std::string& out, const std::vector<WteSnapshot>& snaps,
                        const std::vector<GeometryMeasures>& series, bool has_labels) {
  std::ostringstream csv;
  csv << "step,anisotropy_raw,anisotropy_centred,effective_rank,mean_norm,knn_purity,silhouette,"
         "checkpoint\n";
  csv.precision(9);
  for (size_t i = 0; i < series.size(); ++i) {
    const GeometryMeasures& m = series[i];
    csv << m.step << ',' << m.aniso.raw << ',' << m.aniso.centred << ',' << m.eff_rank << ','
        << m.mean_norm << ',';
    if (has_labels) csv << m.purity << ',' << m.silhouette;
    else csv << ',';
    csv << ',' << snaps[i].path << '\n';
  }
  write_text(fs::path(out) / "geometry.csv", csv.str());
}

void write_geometry_page(const std::string& out, const std::string& intro,
                         const std::vector<PageSection>& sections, const std::string& report) {
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<title>wte geometry</title>\n<style>body{font-family:sans-serif;max-width:1400px;"
          "margin:1em auto;padding:0 1em}figure{display:inline-block;margin:0.5em;vertical-align:"
          "top;max-width:660px}figcaption{font-size:0.9em}pre{font-size:0.85em;overflow-x:auto;"
          "background:#f6f6f6;padding:0.5em}</style>\n</head>\n<body>\n"
       << "<h1>wte geometry</h1>\n<p>" << html_escape(intro)
       << " Written by <code>wte geometry</code>.</p>\n";
  for (const PageSection& s : sections) {
    if (!s.heading.empty()) html << "<h2>" << html_escape(s.heading) << "</h2>\n";
    if (!s.paragraph.empty()) html << "<p>" << html_escape(s.paragraph) << "</p>\n";
    for (const Figure& fig : s.figures)
      html << "<figure><img src=\"" << html_escape(fig.file) << "\" alt=\""
           << html_escape(fig.file) << "\" width=\"640\" height=\"440\"><figcaption>"
           << html_escape(fig.caption) << "</figcaption></figure>\n";
  }
  html << "<h2>Numbers</h2>\n<pre>" << html_escape(report) << "</pre>\n</body>\n</html>\n";
  write_text(fs::path(out) / "index.html", html.str());
}

}  // namespace wte
