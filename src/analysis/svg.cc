#include "src/analysis/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "wte/error.h"

namespace wte::svg {
namespace {

// Plot area inside the frame: margins for title, ticks, labels and the legend on the right.
struct Area {
  double left, top, right, bottom;   // pixel edges of the plot area
  double x0, x1, y0, y1;             // data ranges
  double px(double x) const { return left + (x - x0) / (x1 - x0) * (right - left); }
  double py(double y) const { return bottom - (y - y0) / (y1 - y0) * (bottom - top); }
};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// Tick label: shortest of %g with up to 4 significant digits.
std::string tick_label(double v) {
  if (std::fabs(v) < 1e-12) v = 0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// Steps of 1, 2 or 5 × 10^k giving about `target` ticks over [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int target = 6) {
  const double span = hi - lo;
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(t);
  return ticks;
}

// Widens a degenerate or empty range and adds a margin.
void pad_range(double& lo, double& hi, double margin) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi - lo < 1e-12) {
    const double c = lo;
    const double d = std::max(std::fabs(c) * 0.1, 0.5);
    lo = c - d, hi = c + d;
  }
  const double m = (hi - lo) * margin;
  lo -= m, hi += m;
}

void open_svg(std::ostringstream& os, const Frame& f) {
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << num(f.width)
     << "\" height=\"" << num(f.height) << "\" viewBox=\"0 0 " << num(f.width) << ' '
     << num(f.height) << "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n"
     << "<rect x=\"0\" y=\"0\" width=\"" << num(f.width) << "\" height=\"" << num(f.height)
     << "\" fill=\"white\"/>\n"
     << "<text x=\"" << num(f.width / 2) << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" "
        "font-weight=\"bold\">"
     << escape(f.title) << "</text>\n";
}

Area make_area(const Frame& f, bool legend, double x0, double x1, double y0, double y1) {
  Area a{};
  a.left = 64;
  a.top = 34;
  a.right = f.width - (legend ? 150 : 20);
  a.bottom = f.height - 48;
  a.x0 = x0, a.x1 = x1, a.y0 = y0, a.y1 = y1;
  return a;
}

void axes(std::ostringstream& os, const Frame& f, const Area& a) {
  os << "<rect x=\"" << num(a.left) << "\" y=\"" << num(a.top) << "\" width=\""
     << num(a.right - a.left) << "\" height=\"" << num(a.bottom - a.top)
     << "\" fill=\"none\" stroke=\"#444\"/>\n";
  for (double t : nice_ticks(a.x0, a.x1)) {
    const double x = a.px(t);
    os << "<line x1=\"" << num(x) << "\" y1=\"" << num(a.bottom) << "\" x2=\"" << num(x)
       << "\" y2=\"" << num(a.bottom + 5) << "\" stroke=\"#444\"/>"
       << "<text x=\"" << num(x) << "\" y=\"" << num(a.bottom + 18)
       << "\" text-anchor=\"middle\">" << tick_label(t) << "</text>\n";
  }
  for (double t : nice_ticks(a.y0, a.y1)) {
    const double y = a.py(t);
    os << "<line x1=\"" << num(a.left - 5) << "\" y1=\"" << num(y) << "\" x2=\"" << num(a.left)
       << "\" y2=\"" << num(y) << "\" stroke=\"#444\"/>"
       << "<line x1=\"" << num(a.left) << "\" y1=\"" << num(y) << "\" x2=\"" << num(a.right)
       << "\" y2=\"" << num(y) << "\" stroke=\"#eee\"/>"
       << "<text x=\"" << num(a.left - 8) << "\" y=\"" << num(y + 4)
       << "\" text-anchor=\"end\">" << tick_label(t) << "</text>\n";
  }
  os << "<text x=\"" << num((a.left + a.right) / 2) << "\" y=\"" << num(f.height - 12)
     << "\" text-anchor=\"middle\">" << escape(f.x_label) << "</text>\n"
     << "<text transform=\"translate(16," << num((a.top + a.bottom) / 2)
     << ") rotate(-90)\" text-anchor=\"middle\">" << escape(f.y_label) << "</text>\n";
}

void legend_box(std::ostringstream& os, const Frame& f, const std::vector<LegendEntry>& legend) {
  double y = 44;
  const double x = f.width - 140;
  for (const LegendEntry& e : legend) {
    os << "<rect x=\"" << num(x) << "\" y=\"" << num(y - 10) << "\" width=\"12\" height=\"12\" "
       << "fill=\"" << escape(e.colour) << "\"/><text x=\"" << num(x + 18) << "\" y=\"" << num(y)
       << "\">" << escape(e.name) << "</text>\n";
    y += 18;
  }
}

}  // namespace

std::string escape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else if (c == '\'') out += "&apos;";
    else if (c >= 0x20 && c < 0x7F) out += static_cast<char>(c);
    else if (c == '\n' || c == '\t') out += ' ';
    else {
      // A complete UTF-8 character passes; anything else (control bytes, partial characters) is
      // replaced, since XML forbids control characters and invalid UTF-8.
      size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
      bool ok = n > 0 && i + n <= text.size();
      for (size_t k = 1; ok && k < n; ++k)
        ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
      if (ok) {
        out.append(text, i, n);
        i += n;
        continue;
      }
      out += "\xEF\xBF\xBD";
    }
    ++i;
  }
  return out;
}

std::string category_colour(size_t i) {
  static const char* kTableau10[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                     "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kTableau10[i % 10];
}

std::string sequential_colour(double t) {
  // viridis (matplotlib) at t = 0, 1/8, ..., 1.
  static const double kStops[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},
                                      {44, 113, 142}, {33, 144, 141}, {39, 173, 129},
                                      {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 8.0;
  const int i = std::min(7, static_cast<int>(t));
  const double f = t - i;
  char buf[16];
  int rgb[3];
  for (int c = 0; c < 3; ++c)
    rgb[c] = static_cast<int>(std::lround(kStops[i][c] * (1 - f) + kStops[i + 1][c] * f));
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return buf;
}

std::string scatter(const Frame& frame, const std::vector<Point>& points,
                    const std::vector<LegendEntry>& legend, double radius) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const Point& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    x0 = std::min(x0, p.x), x1 = std::max(x1, p.x), y0 = std::min(y0, p.y), y1 = std::max(y1, p.y);
  }
  pad_range(x0, x1, 0.04);
  pad_range(y0, y1, 0.04);
  std::ostringstream os;
  open_svg(os, frame);
  const Area a = make_area(frame, !legend.empty(), x0, x1, y0, y1);
  axes(os, frame, a);
  os << "<g fill-opacity=\"0.8\">\n";
  for (const Point& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    os << "<circle cx=\"" << num(a.px(p.x)) << "\" cy=\"" << num(a.py(p.y)) << "\" r=\""
       << num(radius) << "\" fill=\"" << escape(p.colour) << "\">";
    if (!p.tip.empty()) os << "<title>" << escape(p.tip) << "</title>";
    os << "</circle>\n";
  }
  os << "</g>\n";
  legend_box(os, frame, legend);
  os << "</svg>\n";
  return os.str();
}

std::string histogram(const Frame& frame, const std::vector<HistogramSeries>& series, double lo,
                      double hi, size_t bins) {
  if (bins == 0 || !(lo < hi))
    throw Error("svg::histogram: needs bins > 0 and lo < hi, got bins " + std::to_string(bins) +
                ", range [" + tick_label(lo) + ", " + tick_label(hi) + ")");
  std::vector<std::vector<double>> share(series.size(), std::vector<double>(bins, 0.0));
  double top = 0;
  const double width = (hi - lo) / double(bins);
  for (size_t s = 0; s < series.size(); ++s) {
    const auto& v = series[s].values;
    for (double x : v) {
      if (!std::isfinite(x)) continue;
      const long b = std::clamp(static_cast<long>(std::floor((x - lo) / width)), 0L,
                                static_cast<long>(bins) - 1);
      share[s][b] += 1.0;
    }
    for (double& c : share[s]) {
      c /= std::max<double>(1.0, double(v.size()));
      top = std::max(top, c);
    }
  }
  std::vector<LegendEntry> legend;
  for (const auto& s : series) legend.push_back({s.name, s.colour});
  std::ostringstream os;
  open_svg(os, frame);
  const Area a = make_area(frame, !legend.empty(), lo, hi, 0, top > 0 ? top * 1.05 : 1);
  axes(os, frame, a);
  for (size_t s = 0; s < series.size(); ++s) {
    os << "<path fill=\"" << escape(series[s].colour) << "\" fill-opacity=\"0.35\" stroke=\""
       << escape(series[s].colour) << "\" stroke-width=\"1.5\" d=\"M" << num(a.px(lo)) << ' '
       << num(a.py(0));
    for (size_t b = 0; b < bins; ++b) {
      const double xl = a.px(lo + double(b) * width), xr = a.px(lo + double(b + 1) * width);
      const double y = a.py(share[s][b]);
      os << " L" << num(xl) << ' ' << num(y) << " L" << num(xr) << ' ' << num(y);
    }
    os << " L" << num(a.px(hi)) << ' ' << num(a.py(0)) << " Z\"/>\n";
  }
  legend_box(os, frame, legend);
  os << "</svg>\n";
  return os.str();
}

std::string line_chart(const Frame& frame, const std::vector<LineSeries>& series) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const LineSeries& s : series) {
    if (s.x.size() != s.y.size())
      throw Error("svg::line_chart: series '" + s.name + "' has " + std::to_string(s.x.size()) +
                  " x values but " + std::to_string(s.y.size()) + " y values");
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
    }
  }
  pad_range(x0, x1, 0.03);
  pad_range(y0, y1, 0.06);
  std::vector<LegendEntry> legend;
  for (const auto& s : series) legend.push_back({s.name, s.colour});
  std::ostringstream os;
  open_svg(os, frame);
  const Area a = make_area(frame, true, x0, x1, y0, y1);
  axes(os, frame, a);
  for (const LineSeries& s : series) {
    os << "<polyline fill=\"none\" stroke=\"" << escape(s.colour) << "\" stroke-width=\"2\""
       << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i]))
        os << num(a.px(s.x[i])) << ',' << num(a.py(s.y[i])) << ' ';
    os << "\"/>\n";
    for (size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i]))
        os << "<circle cx=\"" << num(a.px(s.x[i])) << "\" cy=\"" << num(a.py(s.y[i]))
           << "\" r=\"3\" fill=\"" << escape(s.colour) << "\"><title>" << escape(s.name) << ": "
           << tick_label(s.x[i]) << ", " << tick_label(s.y[i]) << "</title></circle>\n";
  }
  legend_box(os, frame, legend);
  os << "</svg>\n";
  return os.str();
}

}  // namespace wte::svg
