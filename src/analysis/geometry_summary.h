// The top of `wte geometry`'s page and DIR/geometry.json: a summary of the series (what the page
// shows, the loss from the first to the last logged step, anisotropy, effective rank, k-NN purity
// with labels, the tokens that never occur in the training tokens) and the table of nearest
// neighbours at the first and the last checkpoint. The page's numbers are geometry.json's,
// rounded; each carries its JSON key (data-key="anisotropy.last"), so a test can compare them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/analysis/geometry_report.h"
#include "src/analysis/loss_curve.h"

namespace wte {

/// The rows of the tokens in.never_seen at the last step, against the other rows.
struct NeverSeenRows {
  size_t count = 0;
  double mean_norm = std::numeric_limits<double>::quiet_NaN();        // of those rows
  double other_mean_norm = std::numeric_limits<double>::quiet_NaN();  // of every other row
  double mean_cosine = std::numeric_limits<double>::quiet_NaN();      // of distinct pairs of them
};

/// Measures in.never_seen's rows in the last snapshot (NaN where there are too few rows).
NeverSeenRows never_seen_rows(const GeometryReportInput& in);

/// The run's loss at its first and last logged step (metrics.csv), and its last validation loss.
struct LossSummary {
  bool known = false;            // false: no metrics.csv (or no rows)
  std::string source;            // the metrics.csv read
  int64_t first_step = 0, last_step = 0;
  double first = 0, last = 0;    // training loss of that step's batch, nats/token
  bool has_val = false;
  int64_t val_step = 0;
  double val_last = 0;           // the last validation loss
};

/// The summary of `rows` read from `source`.
LossSummary summarize_loss(const std::vector<LossRow>& rows, const std::string& source);

/// The tokens whose neighbours are shown: --query first, then the most frequent (no repeats).
std::vector<int32_t> neighbour_queries(const GeometryReportInput& in);

/// Everything the summary and the neighbour table show, and the measures of every step:
/// {"vocab_size", "d_model", "checkpoints", "first_step", "last_step", "loss" (or null),
///  "anisotropy", "anisotropy_centred", "effective_rank", "mean_norm" ({"first", "last"} each),
///  "knn_purity" ({"first", "last", "chance", "k"}, or null without labels), "never_seen" (or null
///  without a token file), "strip_steps", "steps" (one object per checkpoint), "neighbours"}.
nlohmann::json geometry_json(const GeometryReportInput& in, const LossSummary& loss,
                             const std::vector<size_t>& strip);

/// The summary box (HTML, id "summary") from `j` = geometry_json(...): every number is j's value
/// at its data-key, rounded.
std::string summary_html(const nlohmann::json& j, const std::string& run);

/// The neighbour table (HTML, id "neighbours") from j["neighbours"]: one row per query token, its
/// `shown` nearest neighbours by cosine at the first and at the last step side by side.
std::string neighbour_table_html(const nlohmann::json& j, size_t shown);

/// Writes `j` to out/geometry.json (atomically). Throws wte::Error if it cannot be written.
void write_geometry_json(const std::string& out, const nlohmann::json& j);

}  // namespace wte
