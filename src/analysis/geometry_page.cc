#include "src/analysis/geometry_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "src/analysis/geometry_summary.h"
#include "src/analysis/loss_curve.h"
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

// The colour of the rows of tokens that never occur in the training tokens, in every picture.
constexpr const char* kNeverSeenColour = "#e15759";

// never_seen_mask(in)[id] = 1 if id never occurs in in.data_path (all 0 if it was not read).
std::vector<char> never_seen_mask(const GeometryReportInput& in) {
  std::vector<char> mask(in.V, 0);
  for (int32_t id : in.never_seen) mask[static_cast<size_t>(id)] = 1;
  return mask;
}

}  // namespace

std::string never_seen_names(const GeometryReportInput& in, size_t max_named) {
  const std::vector<int32_t>& ids = in.never_seen;
  size_t bytes = 0;
  for (int32_t id : ids) bytes += id < 256;
  std::string text = "the " + std::to_string(ids.size()) + " tokens that never occur in " +
                     in.data_path + " (" + std::to_string(bytes) + " byte tokens, " +
                     std::to_string(ids.size() - bytes) + " merges: ";
  for (size_t i = 0; i < ids.size() && i < max_named; ++i)
    text += (i ? ", " : "") + show_token(*in.tok, ids[i]);
  if (ids.size() > max_named) text += ", ...";
  return text + ")";
}

namespace {

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
    const std::vector<char> unseen = never_seen_mask(in);
    std::vector<svg::Point> marked;  // drawn last, on top
    for (size_t i = 0; i < n; ++i) {
      const std::string tip = show_token(tok, static_cast<int32_t>(i));
      if (unseen[i]) marked.push_back({pca.x[i], pca.y[i], kNeverSeenColour, tip + " never seen"});
      else
        points.push_back(
            {pca.x[i], pca.y[i], svg::sequential_colour(double(i) / double(V - 1)), tip});
    }
    points.insert(points.end(), marked.begin(), marked.end());
    caption = "all rows' first two principal components; ids [0, " + std::to_string(n) +
              ") drawn, coloured by id (the colour bar: low ids are the 256 byte tokens, then BPE "
              "merges in merge order, roughly most frequent first); hover a point for its token";
    if (!marked.empty()) {
      legend.push_back({"never seen", kNeverSeenColour});
      caption += ". Red: the " + std::to_string(marked.size()) + " drawn rows of " +
                 never_seen_names(in) + (s.step > 0 ? ", the tight cluster" : "");
    }
  }
  const svg::ColourBar bar{"token id", "0", std::to_string(V - 1)};
  svg::Frame f{"wte at step " + std::to_string(s.step) + ": PCA",
               "PC1 (" + format_double("%.1f", 100 * pca.explained[0]) + "% of variance)",
               "PC2 (" + format_double("%.1f", 100 * pca.explained[1]) + "%)"};
  const std::string file = "pca_step_" + step_name(s.step) + ".svg";
  write_text(out / file, svg::scatter(f, points, legend, in.labels != nullptr ? 5.0 : 2.0,
                                      in.labels != nullptr ? nullptr : &bar));
  return {file, "Step " + std::to_string(s.step) + ": " + caption + "."};
}

// True if the steps are spread on a log scale (as train.snapshot_steps = 0,100,300,1000,3000):
// the positive ones span 20x or more and the gaps grow (last gap >= 4x the first).
bool log_spaced(const std::vector<double>& steps) {
  std::vector<double> pos;
  for (double s : steps)
    if (s > 0) pos.push_back(s);
  if (pos.size() < 3 || pos.back() < 20 * pos.front()) return false;
  return pos[pos.size() - 1] - pos[pos.size() - 2] >= 4 * (pos[1] - pos[0]);
}

// PCA of wte at up to six steps of the series (strip_picks: first, last, and around the largest
// changes of the measures), small, side by side: where the structure forms. Each panel's
// components are flipped to agree in sign with the last step's, so the panels are comparable. One
// SVG of nested <svg> panels.
Figure strip_figure(const fs::path& out, const GeometryReportInput& in, size_t max_points) {
  const std::vector<WteSnapshot>& snaps = *in.snaps;
  const size_t n = snaps.size(), C = in.C;
  const std::vector<size_t> picks = strip_picks(*in.series, in.labels != nullptr, 6);
  const bool labelled = in.labels != nullptr;
  const std::vector<int32_t>* ids = labelled ? &in.labels->ids : nullptr;
  const size_t rows_n = labelled ? ids->size() : in.V;
  const size_t drawn = labelled ? rows_n : std::min({rows_n, max_points, size_t{1500}});
  auto pca_of = [&](const WteSnapshot& s) {
    if (labelled) {
      const std::vector<float> rows = gather_rows(s.wte, C, *ids);
      return pca_2d(RowsView{rows.data(), rows_n, C});
    }
    return pca_2d(RowsView{s.wte.data(), rows_n, C});
  };
  const Pca2 ref = pca_of(snaps.back());
  constexpr double kW = 230, kH = 230;
  std::ostringstream strip;
  strip << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
           "version=\"1.1\" width=\""
        << kW * double(picks.size()) << "\" height=\"" << kH << "\" viewBox=\"0 0 "
        << kW * double(picks.size()) << ' ' << kH << "\">\n";
  std::string steps_text;
  for (size_t j = 0; j < picks.size(); ++j) {
    const WteSnapshot& s = snaps[picks[j]];
    Pca2 pca = picks[j] + 1 == n ? ref : pca_of(s);
    double dx = 0, dy = 0;
    for (size_t i = 0; i < rows_n; ++i) dx += pca.x[i] * ref.x[i], dy += pca.y[i] * ref.y[i];
    std::vector<svg::Point> points;
    for (size_t i = 0; i < drawn; ++i) {
      const int32_t id = labelled ? (*ids)[i] : static_cast<int32_t>(i);
      points.push_back({dx < 0 ? -pca.x[i] : pca.x[i], dy < 0 ? -pca.y[i] : pca.y[i],
                        labelled ? svg::category_colour(in.labels->cls[i])
                                 : svg::sequential_colour(double(i) / double(in.V - 1)),
                        show_token(*in.tok, id) +
                            (labelled ? " " + in.labels->names[in.labels->cls[i]] : std::string())});
    }
    svg::Frame f{"step " + std::to_string(s.step), "PC1", "PC2", kW, kH};
    std::string panel = svg::scatter(f, points, {}, labelled ? 3.0 : 1.5);
    panel = panel.substr(panel.find("<svg"));                      // no XML declaration inside
    panel.insert(4, " x=\"" + std::to_string(static_cast<int>(kW * double(j))) + "\"");
    strip << panel;
    steps_text += (j ? ", " : "") + std::to_string(s.step);
  }
  strip << "</svg>\n";
  write_text(out / "pca_strip.svg", strip.str());
  return {"pca_strip.svg",
          "PCA of wte at steps " + steps_text + " (" +
              (picks.size() < n ? "of " + std::to_string(n) + " snapshots: the first, the last, and "
                                  "those around the largest changes of the measures; "
                                : std::string()) +
              "each step's own first two principal components, signs matched to the last step's): "
              "how the " +
              (labelled ? "classes separate" : "rows spread out from the initial noise") +
              " during training. " + (labelled ? "Colours are the classes" : "Colour is the token id") +
              "; hover a point for its token.",
          true};
}

// What the cosine histogram's last step owes to tokens that never occur in the training tokens
// (in.data_path, train.bin): how many there are and their mean pairwise cosine at the last step.
// With the tied lm_head their rows get no gradient through the lookup, only the unembedding's push
// away from every hidden state (the same direction for all of them), so they end up nearly
// parallel: the spike near cosine 1.
std::string never_seen_note(const GeometryReportInput& in) {
  if (!in.counted) return "";
  const std::vector<int32_t>& unseen = in.never_seen;
  if (unseen.size() < 2)
    return std::to_string(unseen.size()) + " of the " + std::to_string(in.V) +
           " tokens never occur in " + in.data_path + ".";
  const NeverSeenRows r = never_seen_rows(in);
  std::string note = "Red in the PCA and the norms: " + never_seen_names(in) + "; at step " +
                     std::to_string(in.snaps->back().step) + " their rows' mean pairwise cosine is " +
                     format_double("%.3f", r.mean_cosine) + " and their mean norm " +
                     format_double("%.2f", r.mean_norm) + " (the other rows: " +
                     format_double("%.2f", r.other_mean_norm) + ")";
  if (r.mean_cosine > 0.8)
    note += ". They are never looked up and never the next token, so their rows only get the "
            "unembedding's push away from every hidden state, nearly the same direction for all of "
            "them: they move together (the tight cluster in the PCA, the band in the norms), and "
            "their pairs make the spike near cosine 1";
  return note + ".";
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
  const bool log_x = log_spaced(x);
  auto frame = [&](const std::string& title, const std::string& y_label) {
    svg::Frame f{title, log_x ? "step (log scale)" : "step", y_label};
    f.x_log = log_x;
    return f;
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
               svg::line_chart(frame("class structure over training", "score"), ls));
    figures.push_back({"series_purity.svg",
                       "k-NN class purity and silhouette of the labelled rows at each step; "
                       "dashed: the purity of a table with no class structure."});
  }
  std::vector<svg::LineSeries> la = {
      {"raw", svg::category_colour(0), x, col([](const GeometryMeasures& m) { return m.aniso.raw; })},
      {"mean-centred", svg::category_colour(1), x,
       col([](const GeometryMeasures& m) { return m.aniso.centred; })}};
  write_text(out / "series_anisotropy.svg",
             svg::line_chart(frame("anisotropy over training", "mean cosine of pairs"), la));
  figures.push_back({"series_anisotropy.svg",
                     "Anisotropy (mean cosine of distinct pairs of rows) at each step, raw and "
                     "after subtracting the mean row."});
  std::vector<svg::LineSeries> lr = {{"effective rank", svg::category_colour(2), x,
                                      col([](const GeometryMeasures& m) { return m.eff_rank; })}};
  svg::Frame rank_frame = frame("effective rank over training",
                                "participation ratio, log scale (max " +
                                    std::to_string(std::min(in.V, in.C)) + ")");
  rank_frame.y_log = true;  // it falls from ~C to a few: on a linear axis the end is unreadable
  write_text(out / "series_rank.svg", svg::line_chart(rank_frame, lr));
  figures.push_back({"series_rank.svg",
                     "Effective rank (participation ratio of the singular values) at each step, on "
                     "a log axis: " + format_double("%.1f", series.front().eff_rank) + " at step " +
                         std::to_string(series.front().step) + ", " +
                         format_double("%.1f", series.back().eff_rank) + " at step " +
                         std::to_string(series.back().step) + "."});
  return figures;
}

}  // namespace

std::vector<size_t> strip_picks(const std::vector<GeometryMeasures>& series, bool labelled,
                                size_t m) {
  const size_t n = series.size();
  std::vector<size_t> picks;
  if (n <= std::max<size_t>(m, 2)) {
    for (size_t i = 0; i < n; ++i) picks.push_back(i);
    return picks;
  }
  // The measures, each scaled by its range over the series; effective rank on a log scale (it
  // falls by orders of magnitude, and a fall from 200 to 100 matters as one from 4 to 2).
  std::vector<std::vector<double>> measures(labelled ? 4 : 2);
  for (const GeometryMeasures& g : series) {
    measures[0].push_back(g.aniso.raw);
    measures[1].push_back(std::log(std::max(g.eff_rank, 1e-12)));
    if (labelled) measures[2].push_back(g.purity), measures[3].push_back(g.silhouette);
  }
  std::vector<double> change(n - 1, 0.0);  // change[i]: from snapshot i to i + 1
  for (const std::vector<double>& v : measures) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    if (!(*hi - *lo > 0)) continue;
    for (size_t i = 0; i + 1 < n; ++i) change[i] += std::fabs(v[i + 1] - v[i]) / (*hi - *lo);
  }
  std::vector<size_t> order(n - 1);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return change[a] > change[b]; });
  std::vector<char> chosen(n, 0);
  chosen[0] = chosen[n - 1] = 1;
  size_t count = 2;
  for (size_t i : order)      // the snapshot after each large change, then the one before it
    for (size_t j : {i + 1, i})
      if (count < m && !chosen[j]) chosen[j] = 1, ++count;
  for (size_t i = 0; i < n; ++i)
    if (chosen[i]) picks.push_back(i);
  return picks;
}

std::vector<Figure> write_wte_figures(const std::string& out_dir, const GeometryReportInput& in,
                                      size_t max_points) {
  const fs::path out = out_dir;
  const std::vector<WteSnapshot>& snaps = *in.snaps;
  const size_t V = in.V, C = in.C;
  const std::vector<size_t> shown = first_and_last(snaps.size());
  std::vector<Figure> figures;
  for (size_t si : shown) figures.push_back(pca_figure(out, in, snaps[si], max_points));
  if (snaps.size() >= 3) figures.push_back(strip_figure(out, in, max_points));
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
                                      "pairs, or 200000 random pairs), first and last step. " +
                                          never_seen_note(in)});
  }
  {
    const std::vector<double> norms = row_norms(RowsView{snaps.back().wte.data(), V, C});
    const std::vector<char> unseen = never_seen_mask(in);
    std::vector<svg::Point> points, marked;
    const size_t stride = std::max<size_t>(1, V / 20000);
    for (size_t i = 0; i < V; i += stride) {
      if (unseen[i]) marked.push_back({double(i), norms[i], kNeverSeenColour, ""});
      else points.push_back({double(i), norms[i], "#4e79a7", ""});
    }
    points.insert(points.end(), marked.begin(), marked.end());
    std::vector<svg::LegendEntry> legend;
    std::string marked_text;
    if (!in.never_seen.empty()) {
      legend = {{"seen", "#4e79a7"}, {"never seen", kNeverSeenColour}};
      marked_text = " Red: " + never_seen_names(in) + "; their rows make the band at norm " +
                    format_double("%.2f", never_seen_rows(in).mean_norm) + " (mean).";
    }
    svg::Frame f{"row norm against token id, step " + std::to_string(snaps.back().step),
                 "token id (merge order)", "|wte[id]|"};
    write_text(out / "norms.svg", svg::scatter(f, points, legend, 1.5));
    figures.push_back({"norms.svg", "Norm of each row of wte against its id" +
                                        (stride > 1 ? " (every " + std::to_string(stride) + "th id)"
                                                    : std::string()) +
                                        " at the last step." + marked_text});
  }
  if (in.series->size() > 1)
    for (Figure& f : series_figures(out, in)) figures.push_back(std::move(f));
  return figures;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::vector<Figure> write_loss_figure(const std::string& out, const std::string& metrics_csv,
                                      size_t tokens_per_step) {
  std::error_code ec;
  if (!fs::is_regular_file(metrics_csv, ec)) return {};
  write_loss_curve(metrics_csv, (fs::path(out) / "loss.svg").string(), tokens_per_step,
                   "loss of " + fs::path(metrics_csv).parent_path().string());
  return {{"loss.svg",
           "Training loss of every step (light), its moving average, and the validation loss "
           "(dots), against the step on a log axis, from " + metrics_csv +
               " (wte train writes the same picture as loss.svg beside it). The top axis counts "
               "the tokens trained on.",
           false}};
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
    csv << ',' << csv_field(snaps[i].path) << '\n';
  }
  write_text(fs::path(out) / "geometry.csv", csv.str());
}

namespace {

// The figure's SVG for inline use (its tooltips work only inline, not through <img>): the file's
// text without its XML declaration. Empty if the file cannot be read.
std::string inline_svg(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return "";
  const std::string text = read_text_file(path.string());
  const size_t at = text.find("<svg");
  return at == std::string::npos ? "" : text.substr(at);
}

// A wide figure spans both columns but is drawn no larger than its SVG's own width (a chart of
// 640 px scaled to 1400 px would have 30 px labels): style="max-width:Wpx", or "" if unknown.
std::string natural_width_style(const std::string& svg_text, bool wide) {
  const size_t at = svg_text.find("width=\"");
  if (!wide || at == std::string::npos || at > svg_text.find('>')) return "";
  const double w = std::atof(svg_text.c_str() + at + 7);
  return w > 0 ? " style=\"max-width:" + format_double("%.0f", w) + "px\"" : "";
}

}  // namespace

void write_geometry_page(const std::string& out, const std::string& top_html,
                         const std::vector<PageSection>& sections, const std::string& report) {
  std::ostringstream html;
  // Two columns of figures in 1400 px; each SVG scales to its column (it has a viewBox).
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<title>wte geometry</title>\n<style>body{font-family:sans-serif;max-width:1400px;"
          "margin:1em auto;padding:0 1em;box-sizing:border-box}.figures{display:grid;"
          "grid-template-columns:repeat(2,minmax(0,1fr));gap:16px 24px;align-items:start}"
          "figure{margin:0}figure.wide{grid-column:1/-1}figure svg{display:block;width:100%;"
          "height:auto}figcaption{font-size:0.9em;line-height:1.4;margin-top:4px}"
          "pre{font-size:0.85em;white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;padding:0.5em}"
          "h1{margin:0.3em 0}.summary{background:#f3f6fa;border:1px solid #c8d3e0;padding:0.5em 1em;"
          "line-height:1.45}.summary p{margin:0.3em 0}.summary ul{margin:0.3em 0;padding-left:1.3em}"
          "table.nb{border-collapse:collapse;font-size:0.85em;width:100%;margin:0.5em 0}"
          "table.nb th,table.nb td{border-bottom:1px solid #ddd;padding:2px 6px;text-align:left;"
          "vertical-align:top}table.nb td.q{font-weight:bold;white-space:nowrap}"
          "table.nb span.c{color:#888;font-size:0.85em}.never{color:#e15759}</style>\n"
          "</head>\n<body>\n<h1>wte geometry</h1>\n"
       << top_html;
  for (const PageSection& s : sections) {
    if (!s.heading.empty()) html << "<h2>" << html_escape(s.heading) << "</h2>\n";
    if (!s.paragraph.empty()) html << "<p>" << html_escape(s.paragraph) << "</p>\n";
    if (s.figures.empty()) continue;
    html << "<div class=\"figures\">\n";
    for (const Figure& fig : s.figures) {
      const std::string svg_text = inline_svg(fs::path(out) / fig.file);
      html << "<figure" << (fig.wide ? " class=\"wide\"" : "") << " data-file=\""
           << html_escape(fig.file) << "\"" << natural_width_style(svg_text, fig.wide) << ">";
      if (svg_text.empty())  // not readable here: link it instead
        html << "<img src=\"" << html_escape(fig.file) << "\" alt=\"" << html_escape(fig.file)
             << "\" style=\"width:100%\">";
      else
        html << svg_text;
      html << "<figcaption>" << html_escape(fig.caption) << " (<a href=\"" << html_escape(fig.file)
           << "\">" << html_escape(fig.file) << "</a>)</figcaption></figure>\n";
    }
    html << "</div>\n";
  }
  html << "<h2>Numbers</h2>\n<pre>" << html_escape(report) << "</pre>\n</body>\n</html>\n";
  write_text(fs::path(out) / "index.html", html.str());
}

}  // namespace wte
