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

/// The snapshots (indices into `series`) the PCA strip shows, at most `m` (>= 2), ascending: all
/// of them when there are no more than m; else the first, the last, and around the largest changes
/// between consecutive snapshots (the one after a change, then the one before), where a change is
/// the sum of each measure's step (anisotropy, log effective rank and, when `labelled`, purity and
/// silhouette) divided by that measure's range over the series. So a jump of purity between two
/// snapshots always shows, however the snapshots are spaced.
std::vector<size_t> strip_picks(const std::vector<GeometryMeasures>& series, bool labelled, size_t m);

/// "the N tokens that never occur in DATA (B byte tokens, M merges: "\x00" (0), ...)": names the
/// first `max_named` of in.never_seen.
std::string never_seen_names(const GeometryReportInput& in, size_t max_named = 6);

/// Writes wte's pictures for the series into `out` (PCA at the first and last step, the cosine
/// histogram, row norms, and over the series anisotropy, effective rank and, with labels, class
/// structure) and returns them in page order. `max_points`: without labels, PCA shows ids
/// [0, max_points). The rows of in.never_seen are red in the PCA and the norms, and the captions
/// name them. Throws wte::Error if a file cannot be written.
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

/// Writes out/index.html: a title, `top_html` (HTML as is: the summary box and the neighbour
/// table, geometry_summary.h), each section's heading, paragraph and figures, and the text report.
void write_geometry_page(const std::string& out, const std::string& top_html,
                         const std::vector<PageSection>& sections, const std::string& report);

/// `f` formatted with printf format `fmt` (one double).
std::string format_double(const char* fmt, double v);

}  // namespace wte
