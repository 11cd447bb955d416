// A small SVG 1.1 writer for wte's pictures: scatter plots, histograms, line charts and bar charts,
// written as plain text (no library), with axes, "nice" ticks (1, 2, 5 × 10^k steps; powers of ten
// on a log axis) placed exactly at the value they print, a title, axis labels and a legend or a
// colour bar. Every text is XML-escaped, so token pieces and paths holding "<" or "&" are safe.
// Each tick is a <g class="xtick|ytick"> holding its line and label, so tests can check positions.
// The output opens in browsers (also inline in HTML: ids are unique per chart) and in rsvg-convert
// (librsvg) for PNGs.
#pragma once

#include <string>
#include <vector>

namespace wte::svg {

/// Size and labels of one chart. Sizes in SVG user units (pixels at 100%).
struct Frame {
  std::string title;
  std::string x_label;
  std::string y_label;
  double width = 640;
  double height = 440;
  /// Log-scaled axes (line charts and scatter plots). Values <= 0 on a log x axis are drawn at its
  /// left edge, which is labelled 0 (so step 0 of a log-spaced series stays visible).
  bool x_log = false;
  bool y_log = false;
  /// If x2_scale > 0: a second x axis along the top, labelled x2_label, showing x * x2_scale
  /// (e.g. tokens = step * B*T).
  std::string x2_label = {};
  double x2_scale = 0;
  /// The x values are whole numbers (layers, counts): linear x ticks only at integers.
  bool x_integer = false;
};

/// A point of a scatter plot; `tip` (may be empty) becomes the point's tooltip (<title>).
struct Point {
  double x = 0, y = 0;
  std::string colour;   // any SVG colour, e.g. "#1f77b4"
  std::string tip;
};

/// A legend entry: a coloured square and its name; or, if `dash` is not empty, a line sample with
/// that stroke-dasharray ("none": solid) for reference lines.
struct LegendEntry {
  std::string name;
  std::string colour;
  std::string dash = {};
};

/// A vertical colour bar for points coloured by sequential_colour(t): t = 0 is labelled lo_label,
/// t = 1 hi_label; `title` is written above it (e.g. "token id").
struct ColourBar {
  std::string title;
  std::string lo_label, hi_label;
};

/// A scatter plot of `points` (drawn in order, radius `radius`). Axis ranges cover the points with a
/// 4 % margin. Non-finite points are skipped. `legend` may be empty; with a colour bar it is drawn
/// under the bar (short names: about 12 characters fit).
std::string scatter(const Frame& frame, const std::vector<Point>& points,
                    const std::vector<LegendEntry>& legend, double radius = 3.0,
                    const ColourBar* colour_bar = nullptr);

/// One histogram's counts over equal bins of [lo, hi): bin b covers [lo + b·w, lo + (b+1)·w).
struct HistogramSeries {
  std::string name;
  std::string colour;
  std::vector<double> values;   // samples; those outside [lo, hi] are clamped into the end bins
};

/// Histograms of several series over the same `bins` bins of [lo, hi], drawn as outlined,
/// semi-transparent step areas of the share of each series' samples per bin (so series of
/// different sizes compare). Throws wte::Error if bins == 0 or !(lo < hi).
std::string histogram(const Frame& frame, const std::vector<HistogramSeries>& series, double lo,
                      double hi, size_t bins);

/// One line of a line chart: points (x[i], y[i]) joined in order, each marked with a dot that
/// carries a tooltip (unless markers is false: long, noisy series).
struct LineSeries {
  std::string name;
  std::string colour;
  std::vector<double> x, y;
  bool dashed = false;
  bool markers = true;
  double stroke_width = 2;
  double opacity = 1;
};

/// A line chart. Throws wte::Error if a series has x.size() != y.size().
std::string line_chart(const Frame& frame, const std::vector<LineSeries>& series);

/// A reference value drawn as a short horizontal line across one bar (e.g. a bandwidth limit).
struct BarMark {
  double value = 0;
  std::string colour;
  std::string dash;   // stroke-dasharray, e.g. "4 2"
};

/// One bar: its category label (under the axis, rotated), value, colour, tooltip and marks.
struct Bar {
  std::string label;
  double value = 0;
  std::string colour;
  std::string tip;
  std::vector<BarMark> marks;
};

/// A bar chart from 0 to the largest value or mark (plus 8 %). The frame grows to fit every bar
/// (at least 26 px each), the rotated labels below them and the legend at the right, so nothing
/// is clipped; frame.width and frame.height are minimums. Non-finite values are drawn as 0.
std::string bar_chart(const Frame& frame, const std::vector<Bar>& bars,
                      const std::vector<LegendEntry>& legend);

/// Categorical colour `i` (Tableau 10 palette, cycling).
std::string category_colour(size_t i);
/// Sequential colour for t in [0, 1] (viridis, interpolated between 9 stops; t is clamped).
std::string sequential_colour(double t);
/// `text` with &, <, >, " and ' escaped for XML; bytes that are not printable ASCII or valid UTF-8
/// become U+FFFD.
std::string escape(const std::string& text);

}  // namespace wte::svg
