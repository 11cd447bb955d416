// A small SVG 1.1 writer for wte's pictures: scatter plots, histograms and line charts, written as
// plain text (no library), with axes, "nice" ticks (1, 2, 5 × 10^k steps), a title, axis labels and
// a legend. Every text is XML-escaped, so token pieces such as "<" or "&" are safe. The output
// opens in browsers and in rsvg-convert (librsvg) for PNGs.
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
};

/// A point of a scatter plot; `tip` (may be empty) becomes the point's tooltip (<title>).
struct Point {
  double x = 0, y = 0;
  std::string colour;   // any SVG colour, e.g. "#1f77b4"
  std::string tip;
};

/// A legend entry: a coloured square and its name.
struct LegendEntry {
  std::string name;
  std::string colour;
};

/// A scatter plot of `points` (drawn in order, radius `radius`). Axis ranges cover the points with a
/// 4 % margin. Non-finite points are skipped. `legend` may be empty.
std::string scatter(const Frame& frame, const std::vector<Point>& points,
                    const std::vector<LegendEntry>& legend, double radius = 3.0);

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

/// One line of a line chart: points (x[i], y[i]) joined in order, each marked with a dot.
struct LineSeries {
  std::string name;
  std::string colour;
  std::vector<double> x, y;
  bool dashed = false;
};

/// A line chart. Throws wte::Error if a series has x.size() != y.size().
std::string line_chart(const Frame& frame, const std::vector<LineSeries>& series);

/// Categorical colour `i` (Tableau 10 palette, cycling).
std::string category_colour(size_t i);
/// Sequential colour for t in [0, 1] (viridis, interpolated between 9 stops; t is clamped).
std::string sequential_colour(double t);
/// `text` with &, <, >, " and ' escaped for XML; bytes that are not printable ASCII or valid UTF-8
/// become U+FFFD.
std::string escape(const std::string& text);

}  // namespace wte::svg
