#include "src/analysis/loss_curve.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "src/analysis/svg.h"
#include "src/io/bounded_read.h"
#include "wte/data.h"
#include "wte/error.h"

namespace wte {
namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t comma = line.find(',', pos);
    out.push_back(line.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<LossRow> read_loss_rows(const std::string& metrics_csv) {
  // A regular file only (a device such as /dev/zero behind a link is refused, never read): its
  // size bounds the read.
  return parse_loss_rows(read_regular_file_prefix(metrics_csv, UINT64_MAX), metrics_csv);
}

std::vector<LossRow> parse_loss_rows(const std::string& text, const std::string& metrics_csv) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) throw Error(metrics_csv + ": empty file; expected a header line");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::vector<std::string> header = split_csv_line(line);
  auto column = [&](const char* name) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end())
      throw Error(metrics_csv + " line 1: no column '" + name + "' in the header '" + line + "'");
    return static_cast<size_t>(it - header.begin());
  };
  const size_t c_step = column("step"), c_train = column("train_loss"), c_val = column("val_loss");
  std::vector<LossRow> rows;
  size_t line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::vector<std::string> f = split_csv_line(line);
    const std::string where = metrics_csv + " line " + std::to_string(line_no);
    if (f.size() != header.size())
      throw Error(where + ": " + std::to_string(f.size()) + " fields, the header has " +
                  std::to_string(header.size()));
    auto number = [&](size_t c, bool may_be_empty) {
      if (f[c].empty() && may_be_empty) return std::nan("");
      char* end = nullptr;
      const double v = std::strtod(f[c].c_str(), &end);
      if (f[c].empty() || end != f[c].c_str() + f[c].size())
        throw Error(where + ": " + header[c] + " = '" + f[c] + "' is not a number");
      return v;
    };
    LossRow r;
    const double step = number(c_step, false);
    if (!(step >= 0) || step != std::floor(step))
      throw Error(where + ": step = '" + f[c_step] + "' is not a whole number");
    r.step = static_cast<uint64_t>(step);
    r.train_loss = number(c_train, false);
    r.val_loss = number(c_val, true);
    rows.push_back(r);
  }
  return rows;
}

std::string loss_curve_svg(const std::vector<LossRow>& rows, size_t tokens_per_step,
                           const std::string& title) {
  svg::Frame frame{title, "step (log scale)", "loss (nats/token)", 700, 440};
  frame.x_log = true;
  if (tokens_per_step > 0) {
    frame.x2_label = "tokens seen (step × " + std::to_string(tokens_per_step) + ")";
    frame.x2_scale = static_cast<double>(tokens_per_step);
  }
  svg::LineSeries raw{"train (each step)", "#9ecae9", {}, {}, false, false, 1.0, 0.9};
  svg::LineSeries smooth{"train (moving avg)", svg::category_colour(0), {}, {}, false, false, 2.0};
  svg::LineSeries val{"validation", svg::category_colour(1), {}, {}};
  // At most ~2000 raw points: all of the first 200 steps (the log axis spreads them), then every
  // k-th row.
  const size_t k = std::max<size_t>(1, (rows.size() + 1999) / 2000);
  std::vector<double> prefix(rows.size() + 1, 0.0);
  for (size_t i = 0; i < rows.size(); ++i) prefix[i + 1] = prefix[i] + rows[i].train_loss;
  for (size_t i = 0; i < rows.size(); ++i) {
    const LossRow& r = rows[i];
    const bool keep = r.step <= 200 || i % k == 0 || i + 1 == rows.size();
    if (keep) {
      raw.x.push_back(static_cast<double>(r.step));
      raw.y.push_back(r.train_loss);
      // Centred moving average over rows [i - h, i + h], h = 5 % of the step: the same width on
      // the log axis everywhere.
      const size_t h = static_cast<size_t>(0.05 * static_cast<double>(r.step));
      const size_t lo = i >= h ? i - h : 0, hi = std::min(rows.size() - 1, i + h);
      smooth.x.push_back(static_cast<double>(r.step));
      smooth.y.push_back((prefix[hi + 1] - prefix[lo]) / static_cast<double>(hi - lo + 1));
    }
    if (std::isfinite(r.val_loss)) {
      val.x.push_back(static_cast<double>(r.step));
      val.y.push_back(r.val_loss);
    }
  }
  std::vector<svg::LineSeries> series = {raw, smooth};
  if (!val.x.empty()) series.push_back(val);
  return svg::line_chart(frame, series);
}

void write_loss_curve(const std::string& metrics_csv, const std::string& svg_path,
                      size_t tokens_per_step, const std::string& title) {
  write_file_atomic(svg_path, loss_curve_svg(read_loss_rows(metrics_csv), tokens_per_step, title));
}

}  // namespace wte
