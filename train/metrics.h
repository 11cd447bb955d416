// metrics.csv and the lines that report a run: its rows (written after each step, cut back to a
// checkpoint's step on resume), the progress line, the final summary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "train/run_state.h"

namespace wte {

/// metrics.csv's header line (newline included): step,train_loss,val_loss,lr,grad_norm,
/// tokens_per_s_avg,elapsed_s,ranks.
const char* metrics_header();

/// `text` (a metrics.csv) without a last line that has no newline: a row cut by a kill in
/// mid-write ("12" of "123,4.1,..." would read as step 12).
std::string without_torn_line(std::string text);

/// metrics.csv of a resumed run: the header and the rows of steps <= `step`, rewritten atomically
/// (a missing file gets just the header). Returns the elapsed_s of the last row kept (0 if none).
double truncate_metrics(const std::string& path, uint64_t step, const std::string& header);

/// "12s", "3m05s", "1h02m".
std::string format_duration(double s);

/// "writing 'PATH' failed: <errno text>", for a stream write that failed (disk full, I/O error).
std::string write_failed(const std::string& path);

/// Step `done`'s row of metrics.csv and, every train.log_interval steps (or `force_line`), its
/// progress line; `eval_seconds_left` (EvalClock) is part of the ETA.
void log_step(std::ofstream& metrics, const Say& say, const Config& cfg, size_t done,
              size_t start_step, const StepResult& r, double val_loss, double tok_s,
              double step_seconds, double elapsed, bool force_line, int ranks,
              double eval_seconds_left);

/// The final lines of a complete run (stdout): the validation loss beside the unigram baseline,
/// speed, checkpoints; fills summary->tokens_per_second and unigram_baseline.
void print_summary(const Config& cfg, const RunData& d, size_t val_windows_all, size_t trained,
                   const std::string& metrics_path, TrainSummary* summary);

}  // namespace wte
