// The pictures, geometry.csv and index.html that `wte geometry --out DIR` writes. The page is a
// list of sections, each a heading, an optional paragraph and figures (SVG files in DIR), so other
// analyses (src/analysis/context_geometry.h) add their own section without touching this one's.
#pragma once

#include <string>
#include <vector>

#include "src/analysis/geometry_report.h"

namespace wte {

/// One picture of the page: an SVG file in the output directory and its caption.
struct Figure {
  std::string file, caption;
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

/// Writes out/geometry.csv: one row per step of the series.
void write_geometry_csv(const std::string& out, const std::vector<WteSnapshot>& snaps,
                        const std::vector<GeometryMeasures>& series, bool has_labels);

/// Writes out/index.html: a title, an introduction (plain text, followed by "Written by wte
/// geometry."), each section's heading, paragraph and figures, and the text report.
void write_geometry_page(const std::string& out, const std::string& intro,
                         const std::vector<PageSection>& sections, const std::string& report);

/// `f` formatted with printf format `fmt` (one double).
std::string format_double(const char* fmt, double v);

}  // namespace wte
