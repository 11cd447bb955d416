#include "src/analysis/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "wte/error.h"

namespace wte::svg {
namespace {

// Plot area inside the frame: margins for title, ticks, labels and the legend on the right.
// On a log axis the data range is in log10 units; values <= 0 on a log x axis sit at the left edge.
struct Area {
  double left, top, right, bottom;   // pixel edges of the plot area
  double x0, x1, y0, y1;             // data ranges (log10 of the values on a log axis)
  bool x_log = false, y_log = false;
  double tx(double x) const { return x_log ? (x > 0 ? std::log10(x) : x0) : x; }
  double ty(double y) const { return y_log ? (y > 0 ? std::log10(y) : y0) : y; }
  double px(double x) const { return left + (tx(x) - x0) / (x1 - x0) * (right - left); }
  double py(double y) const { return bottom - (ty(y) - y0) / (y1 - y0) * (bottom - top); }
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

// A compact label for large counts: 640, 1.28k, 25.6k, 1.5M, 2G (3 significant digits).
std::string si_label(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (a >= 1e9) std::snprintf(buf, sizeof buf, "%.3gG", v / 1e9);
  else if (a >= 1e6) std::snprintf(buf, sizeof buf, "%.3gM", v / 1e6);
  else if (a >= 1e3) std::snprintf(buf, sizeof buf, "%.3gk", v / 1e3);
  else return tick_label(v);
  return buf;
}

// Steps of 1, 2 or 5 × 10^k giving about `target` ticks over [lo, hi], at least `min_step` apart
// (1 on an integer axis, so no tick at 0.2). Each tick is computed as k * step (never by repeated
// addition), so its label is the value it is drawn at.
std::vector<double> nice_ticks(double lo, double hi, int target = 6, double min_step = 0) {
  const double span = hi - lo;
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  step = std::max(step, min_step);
  std::vector<double> ticks;
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k += 1) ticks.push_back(k * step);
  return ticks;
}

// Ticks of a log axis spanning [10^lo, 10^hi]: the powers of ten, and 2 and 5 times them when the
// range covers fewer than three decades.
std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> ticks;
  const bool fine = hi - lo < 3;
  for (double e = std::floor(lo); e <= std::ceil(hi); e += 1)
    for (double m : {1.0, 2.0, 5.0}) {
      if (m != 1.0 && !fine) continue;
      const double v = m * std::pow(10.0, e);
      const double l = std::log10(v);
      if (l >= lo - 1e-9 && l <= hi + 1e-9) ticks.push_back(v);
    }
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

// The range of `values` on a linear or log axis (log10 units; non-positive values left out of a
// log range, and `has_nonpositive` set), padded by `margin`.
void axis_range(const std::vector<double>& values, bool log, double margin, double& lo, double& hi,
                bool* has_nonpositive = nullptr) {
  lo = INFINITY, hi = -INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    if (log && v <= 0) {
      if (has_nonpositive) *has_nonpositive = true;
      continue;
    }
    const double t = log ? std::log10(v) : v;
    lo = std::min(lo, t), hi = std::max(hi, t);
  }
  pad_range(lo, hi, margin);
}

// A stable id for gradients, unique per chart title (several SVGs may share one HTML page).
std::string chart_id(const std::string& title, const std::string& what) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : title + what) h = (h ^ c) * 1099511628211ULL;
  char buf[40];
  std::snprintf(buf, sizeof buf, "wte%016llx", static_cast<unsigned long long>(h));
  return buf;
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

// Approximate width in pixels of `text` at font size 12 (DejaVu Sans averages ~7 px a character).
double text_width(const std::string& text) {
  size_t chars = 0;
  for (unsigned char c : text) chars += (c & 0xC0) != 0x80;  // UTF-8 characters, not bytes
  return 7.0 * static_cast<double>(chars);
}

// Width of the legend column for `legend` (0: none).
double legend_width(const std::vector<LegendEntry>& legend) {
  double w = 0;
  for (const LegendEntry& e : legend) w = std::max(w, text_width(e.name));
  return legend.empty() ? 0 : std::min(260.0, w + 40);
}

Area make_area(const Frame& f, double legend_w, double x0, double x1, double y0, double y1) {
  Area a{};
  a.left = 64;
  a.top = f.x2_scale > 0 ? 74 : 34;
  a.right = f.width - (legend_w > 0 ? legend_w + 10 : 20);
  a.bottom = f.height - 48;
  a.x0 = x0, a.x1 = x1, a.y0 = y0, a.y1 = y1;
  a.x_log = f.x_log, a.y_log = f.y_log;
  return a;
}

void x_tick(std::ostringstream& os, double x, double y_line, double dy, const std::string& label,
            const char* cls) {
  os << "<g class=\"" << cls << "\"><line x1=\"" << num(x) << "\" y1=\"" << num(y_line)
     << "\" x2=\"" << num(x) << "\" y2=\"" << num(y_line + dy) << "\" stroke=\"#444\"/>"
     << "<text x=\"" << num(x) << "\" y=\"" << num(dy > 0 ? y_line + 18 : y_line - 8)
     << "\" text-anchor=\"middle\">" << escape(label) << "</text></g>\n";
}

void axes(std::ostringstream& os, const Frame& f, const Area& a, bool x_zero_at_edge = false,
          bool x_ticks = true) {
  os << "<rect x=\"" << num(a.left) << "\" y=\"" << num(a.top) << "\" width=\""
     << num(a.right - a.left) << "\" height=\"" << num(a.bottom - a.top)
     << "\" fill=\"none\" stroke=\"#444\"/>\n";
  const std::vector<double> xt =
      a.x_log ? log_ticks(a.x0, a.x1) : nice_ticks(a.x0, a.x1, 6, f.x_integer ? 1.0 : 0.0);
  if (x_ticks)
    for (double t : xt) x_tick(os, a.px(t), a.bottom, 5, tick_label(t), "xtick");
  if (a.x_log && x_zero_at_edge) x_tick(os, a.left, a.bottom, 5, "0", "xtick");
  if (f.x2_scale > 0) {  // the top axis: the same positions, x * x2_scale
    for (double t : xt) x_tick(os, a.px(t), a.top, -5, si_label(t * f.x2_scale), "x2tick");
    os << "<text x=\"" << num((a.left + a.right) / 2) << "\" y=\"" << num(a.top - 28)
       << "\" text-anchor=\"middle\">" << escape(f.x2_label) << "</text>\n";
  }
  const std::vector<double> yt = a.y_log ? log_ticks(a.y0, a.y1) : nice_ticks(a.y0, a.y1);
  for (double t : yt) {
    const double y = a.py(t);
    os << "<g class=\"ytick\"><line x1=\"" << num(a.left - 5) << "\" y1=\"" << num(y) << "\" x2=\""
       << num(a.left) << "\" y2=\"" << num(y) << "\" stroke=\"#444\"/>"
       << "<line x1=\"" << num(a.left) << "\" y1=\"" << num(y) << "\" x2=\"" << num(a.right)
       << "\" y2=\"" << num(y) << "\" stroke=\"#eee\"/>"
       << "<text x=\"" << num(a.left - 8) << "\" y=\"" << num(y + 4)
       << "\" text-anchor=\"end\">" << tick_label(t) << "</text></g>\n";
  }
  os << "<text x=\"" << num((a.left + a.right) / 2) << "\" y=\"" << num(f.height - 12)
     << "\" text-anchor=\"middle\">" << escape(f.x_label) << "</text>\n"
     << "<text transform=\"translate(16," << num((a.top + a.bottom) / 2)
     << ") rotate(-90)\" text-anchor=\"middle\">" << escape(f.y_label) << "</text>\n";
}

void legend_box(std::ostringstream& os, const Frame& f, const std::vector<LegendEntry>& legend,
                double top = 44) {
  double y = top;
  const double x = f.width - legend_width(legend);
  for (const LegendEntry& e : legend) {
    if (e.dash.empty())
      os << "<rect x=\"" << num(x) << "\" y=\"" << num(y - 10) << "\" width=\"12\" height=\"12\" "
         << "fill=\"" << escape(e.colour) << "\"/>";
    else
      os << "<line x1=\"" << num(x - 4) << "\" y1=\"" << num(y - 4) << "\" x2=\"" << num(x + 14)
         << "\" y2=\"" << num(y - 4) << "\" stroke=\"" << escape(e.colour) << "\" stroke-width=\"2\""
         << (e.dash == "none" ? std::string() : " stroke-dasharray=\"" + escape(e.dash) + "\"")
         << "/>";
    os << "<text x=\"" << num(x + 18) << "\" y=\"" << num(y) << "\">" << escape(e.name)
       << "</text>\n";
    y += 18;
  }
}

// A vertical colour bar of sequential_colour in the legend column, top to bottom t = 1 .. 0.
// `below`: pixels kept free under it (for a legend).
void colour_bar(std::ostringstream& os, const Frame& f, const ColourBar& bar, double below = 0) {
  const std::string id = chart_id(f.title, "colour-bar");
  const double x = f.width - 110, top = 56, h = std::max(60.0, f.height - 140 - below);
  os << "<defs><linearGradient id=\"" << id << "\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int i = 0; i <= 8; ++i)
    os << "<stop offset=\"" << num(i / 8.0) << "\" stop-color=\"" << sequential_colour(i / 8.0)
       << "\"/>";
  os << "</linearGradient></defs>\n"
     << "<text x=\"" << num(x) << "\" y=\"" << num(top - 10) << "\">" << escape(bar.title) << "</text>\n"
     << "<rect x=\"" << num(x) << "\" y=\"" << num(top) << "\" width=\"16\" height=\"" << num(h)
     << "\" fill=\"url(#" << id << ")\" stroke=\"#444\"/>\n"
     << "<text x=\"" << num(x + 22) << "\" y=\"" << num(top + 10) << "\">" << escape(bar.hi_label)
     << "</text>\n<text x=\"" << num(x + 22) << "\" y=\"" << num(top + h) << "\">"
     << escape(bar.lo_label) << "</text>\n";
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
                    const std::vector<LegendEntry>& legend, double radius,
                    const ColourBar* colour_bar_spec) {
  std::vector<double> xs, ys;
  for (const Point& p : points)
    if (std::isfinite(p.x) && std::isfinite(p.y)) xs.push_back(p.x), ys.push_back(p.y);
  double x0, x1, y0, y1;
  bool x_nonpositive = false;
  axis_range(xs, frame.x_log, 0.04, x0, x1, &x_nonpositive);
  axis_range(ys, frame.y_log, 0.04, y0, y1);
  std::ostringstream os;
  open_svg(os, frame);
  const double lw = colour_bar_spec != nullptr ? 120 : legend_width(legend);
  const Area a = make_area(frame, lw, x0, x1, y0, y1);
  axes(os, frame, a, x_nonpositive);
  os << "<g fill-opacity=\"0.8\">\n";
  for (const Point& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    os << "<circle cx=\"" << num(a.px(p.x)) << "\" cy=\"" << num(a.py(p.y)) << "\" r=\""
       << num(radius) << "\" fill=\"" << escape(p.colour) << "\">";
    if (!p.tip.empty()) os << "<title>" << escape(p.tip) << "</title>";
    os << "</circle>\n";
  }
  os << "</g>\n";
  if (colour_bar_spec != nullptr) {
    // The legend, if any, goes under the colour bar (names of up to ~12 characters fit).
    const double below = legend.empty() ? 0 : 18.0 * double(legend.size()) + 24;
    colour_bar(os, frame, *colour_bar_spec, below);
    if (!legend.empty()) {
      Frame narrow = frame;
      narrow.width = frame.width + legend_width(legend) - 110;  // legend_box's x: the bar's
      legend_box(os, narrow, legend, frame.height - 84 - below + 30);
    }
  } else {
    legend_box(os, frame, legend);
  }
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
  const Area a = make_area(frame, legend_width(legend), lo, hi, 0, top > 0 ? top * 1.05 : 1);
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
  std::vector<double> xs, ys;
  for (const LineSeries& s : series) {
    if (s.x.size() != s.y.size())
      throw Error("svg::line_chart: series '" + s.name + "' has " + std::to_string(s.x.size()) +
                  " x values but " + std::to_string(s.y.size()) + " y values");
    for (size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) xs.push_back(s.x[i]), ys.push_back(s.y[i]);
  }
  double x0, x1, y0, y1;
  bool x_nonpositive = false;
  axis_range(xs, frame.x_log, 0.03, x0, x1, &x_nonpositive);
  axis_range(ys, frame.y_log, 0.06, y0, y1);
  if (frame.x_log && x_nonpositive) x0 -= 0.15 * (x1 - x0);  // room for the 0 at the edge
  std::vector<LegendEntry> legend;
  for (const auto& s : series)
    legend.push_back({s.name, s.colour, s.dashed ? "6 4" : "none"});
  std::ostringstream os;
  open_svg(os, frame);
  const Area a = make_area(frame, legend_width(legend), x0, x1, y0, y1);
  axes(os, frame, a, frame.x_log && x_nonpositive);
  auto drawn = [&](const LineSeries& s, size_t i) {
    return std::isfinite(s.x[i]) && std::isfinite(s.y[i]) && (!frame.y_log || s.y[i] > 0);
  };
  for (const LineSeries& s : series) {
    os << "<polyline fill=\"none\" stroke=\"" << escape(s.colour) << "\" stroke-width=\""
       << num(s.stroke_width) << "\"" << (s.opacity < 1 ? " stroke-opacity=\"" + num(s.opacity) + "\"" : "")
       << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (size_t i = 0; i < s.x.size(); ++i)
      if (drawn(s, i)) os << num(a.px(s.x[i])) << ',' << num(a.py(s.y[i])) << ' ';
    os << "\"><title>" << escape(s.name) << "</title></polyline>\n";
    if (!s.markers) continue;
    for (size_t i = 0; i < s.x.size(); ++i)
      if (drawn(s, i))
        os << "<circle cx=\"" << num(a.px(s.x[i])) << "\" cy=\"" << num(a.py(s.y[i]))
           << "\" r=\"3\" fill=\"" << escape(s.colour) << "\"><title>" << escape(s.name) << ": "
           << tick_label(s.x[i]) << ", " << tick_label(s.y[i]) << "</title></circle>\n";
  }
  legend_box(os, frame, legend, frame.x2_scale > 0 ? 84 : 44);
  os << "</svg>\n";
  return os.str();
}

std::string bar_chart(const Frame& frame, const std::vector<Bar>& bars,
                      const std::vector<LegendEntry>& legend) {
  constexpr double kBar = 20, kGap = 8, kLeft = 64;
  double label_w = 0, top_value = 0;
  for (const Bar& b : bars) {
    label_w = std::max(label_w, text_width(b.label));
    if (std::isfinite(b.value)) top_value = std::max(top_value, b.value);
    for (const BarMark& m : b.marks)
      if (std::isfinite(m.value)) top_value = std::max(top_value, m.value);
  }
  // Labels are rotated 60 degrees: they need sin(60) * width below the axis.
  const double label_h = 0.87 * label_w * (10.0 / 12.0) * 0.9 + 12;
  const double lw = legend_width(legend);
  Frame f = frame;
  // Room for every bar, and right of the last one for its label (rotated: cos 60 of its width).
  f.width = std::max(frame.width, kLeft + static_cast<double>(bars.size()) * (kBar + kGap) +
                                      std::max(20.0, 0.5 * label_w * (10.0 / 12.0) - kBar) + lw + 10);
  f.height = std::max(frame.height, 34 + 220 + label_h + 40);
  std::ostringstream os;
  open_svg(os, f);
  Area a{};
  a.left = kLeft, a.top = 34, a.right = f.width - (lw > 0 ? lw + 10 : 20);
  a.bottom = f.height - label_h - 40;
  a.x0 = 0, a.x1 = 1, a.y0 = 0, a.y1 = top_value > 0 ? top_value * 1.08 : 1;
  Frame axis_frame = f;  // the x label goes below the rotated category labels
  axis_frame.x_label.clear();
  axes(os, axis_frame, a, false, /*x_ticks=*/false);
  // Bars spread over the plot's width, kBar wide, centred in equal slots.
  const double slot = bars.empty() ? 0 : (a.right - a.left) / static_cast<double>(bars.size());
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double x = a.left + (static_cast<double>(i) + 0.5) * slot - kBar / 2;
    const double v = std::isfinite(b.value) ? b.value : 0;
    const double y = a.py(v);
    os << "<rect class=\"bar\" data-value=\"" << v << "\" x=\"" << num(x) << "\" y=\"" << num(y)
       << "\" width=\"" << num(kBar) << "\" height=\"" << num(a.bottom - y) << "\" fill=\""
       << escape(b.colour) << "\"><title>" << escape(b.tip.empty() ? b.label : b.tip)
       << "</title></rect>\n";
    for (const BarMark& m : b.marks) {
      if (!std::isfinite(m.value)) continue;
      const double my = a.py(m.value);
      os << "<line x1=\"" << num(x - 3) << "\" x2=\"" << num(x + kBar + 3) << "\" y1=\""
         << num(my) << "\" y2=\"" << num(my) << "\" stroke=\"" << escape(m.colour)
         << "\" stroke-width=\"1.5\" stroke-dasharray=\"" << escape(m.dash) << "\"/>\n";
    }
    os << "<text font-size=\"10\" transform=\"translate(" << num(x + kBar / 2 - 3) << ','
       << num(a.bottom + 8) << ") rotate(60)\">" << escape(b.label) << "</text>\n";
  }
  os << "<text x=\"" << num((a.left + a.right) / 2) << "\" y=\"" << num(f.height - 10)
     << "\" text-anchor=\"middle\">" << escape(frame.x_label) << "</text>\n";
  legend_box(os, f, legend);
  os << "</svg>\n";
  return os.str();
}

}  // namespace wte::svg
