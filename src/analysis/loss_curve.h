// The loss curve of a training run: metrics.csv (written by `wte train`) read back and drawn as
// DIR/loss.svg, training and validation loss against the step (log axis, so the first hundred
// steps and the last thousands both show) with the tokens seen along the top axis.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wte {

/// One row of metrics.csv: the step, that step's training loss (nats/token, on its batch) and the
/// validation loss if that step evaluated (NaN otherwise).
struct LossRow {
  uint64_t step = 0;
  double train_loss = 0;
  double val_loss = 0;
};

/// Reads metrics.csv. Columns are found by name in the header (step, train_loss, val_loss), so
/// files with more or reordered columns read too. Throws wte::Error naming the file and line for a
/// missing file or column, or a field that is not a number.
std::vector<LossRow> read_loss_rows(const std::string& metrics_csv);

/// read_loss_rows of the text `text` of a metrics.csv, named `name` in errors.
std::vector<LossRow> parse_loss_rows(const std::string& text, const std::string& name);

/// The loss curve as SVG (src/analysis/svg.h): the training loss of every step (thin, light; at
/// most ~2000 points drawn, all of the first 200 steps), its moving average over a window of 10 %
/// of the step (even on the log axis), and the validation losses as dots. x: step on a log axis;
/// top axis: tokens = step * tokens_per_step (B*T). Empty `rows` draw an empty frame.
std::string loss_curve_svg(const std::vector<LossRow>& rows, size_t tokens_per_step,
                           const std::string& title);

/// Reads `metrics_csv` and writes its loss curve to `svg_path` (atomically). Throws wte::Error.
void write_loss_curve(const std::string& metrics_csv, const std::string& svg_path,
                      size_t tokens_per_step, const std::string& title);

}  // namespace wte
