// The pictures, geometry.csv and index.html that `wte geometry --out DIR` writes. The page is a
// list of sections, each a heading, an optional paragraph and figures (SVG files in DIR), so other
// analyses (src/analysis/context_geometry.h) add their own section without touching this one's.
#pragma once

#include <string>
#include <vector>

#include "src/analysis/geometry_report.h"

namespace wte {

/// One picture of the page: an SVG file in the output directory and its caption. The page shows
/// the SVG inline (so each point's <title> tooltip works); `wide` figures span both columns.
struct Figure {
  std::string file, caption;
  bool wide = false;
};

/// A section of the page.
struct PageSection {
  std::string heading;      // empty: no heading
  std::string paragraph;    // plain text (escaped when written); may be empty
  std::vector<Figure> figures;
};

/// Writes wte's pictures for the series into `out` (PCA at the first and last step, the cosine
/// histogram, row norms, and over the series anisotropy, effective rank and, with labels, class
/// structure) and returns them in page order. `max_points`: without labels, PCA shows ids
/// [0, max_points). Throws wte::Error if a file cannot be written.
std::vector<Figure> write_wte_figures(const std::string& out, const GeometryReportInput& in,
                                      size_t max_points);

/// The loss curve of the run whose metrics.csv is `metrics_csv` (src/analysis/loss_curve.h),
/// written as out/loss.svg; `tokens_per_step` = B*T of that run. No figure if the file is missing.
std::vector<Figure> write_loss_figure(const std::string& out, const std::string& metrics_csv,
                                      size_t tokens_per_step);

/// One field of a CSV row as RFC 4180 wants it: quoted (with quotes doubled) when it holds a
/// comma, a double quote, CR or LF; as is otherwise.
std::string csv_field(const std::string& text);

/// Writes out/geometry.csv: one row per step of the series (the checkpoint path quoted per
/// RFC 4180, so a comma in it does not shift the columns).
void write_geometry_csv(const std::string& out, const std::vector<WteSnapshot>& snaps,
                        const std::vector<GeometryMeasures>& series, bool has_labels);

/// Writes out/index.html: a title, an introduction (plain text, followed by "Written by wte
/// geometry."), each section's heading, paragraph and figures, and the text report.
void write_geometry_page(const std::string& out, const std::string& intro,
                         const std::vector<PageSection>& sections, const std::string& report);

/// `f` formatted with printf format `fmt` (one double).
std::string format_double(const char* fmt, double v);

}  // namespace wte
