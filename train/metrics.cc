#include "train/metrics.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <vector>

#include "train/metrics_file.h"
#include "wte/data.h"
#include "wte/error.h"

namespace fs = std::filesystem;

namespace wte {

const char* metrics_header() {
  return "step,train_loss,val_loss,lr,grad_norm,tokens_per_s_avg,elapsed_s,ranks\n";
}

std::string without_torn_line(std::string text) {
  if (!text.empty() && text.back() != '\n') {
    const size_t end = text.rfind('\n');
    text.erase(end == std::string::npos ? 0 : end + 1);
  }
  return text;
}

// metrics.csv of a resumed run: the header and the rows of steps <= `step` (rows a stopped run
// wrote after its last checkpoint are dropped; the resumed run writes them again), rewritten
// atomically. A missing file gets just the header. A last line without its newline is a row cut
// by a kill in mid-write (wte ends every row with one): dropped, whatever step it seems to name.
// Returns the elapsed_s of the last row kept (0 if none): the resumed run's elapsed_s goes on
// from there, so the column is the run's time across resumes.
double truncate_metrics(const std::string& path, uint64_t step, const std::string& header) {
  std::string kept = header;
  double elapsed = 0;
  {
    std::istringstream in(read_resumed_metrics(path, step));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const uint64_t row_step = std::strtoull(line.c_str(), nullptr, 10);
      if (row_step >= 1 && row_step <= step) {
        kept += line + "\n";
        size_t pos = 0;  // elapsed_s: the 7th column
        for (int col = 0; col < 6 && pos != std::string::npos; ++col) pos = line.find(',', pos + 1);
        if (pos != std::string::npos) elapsed = std::strtod(line.c_str() + pos + 1, nullptr);
      }
    }
  }
  write_file_atomic(path, kept);
  return std::isfinite(elapsed) && elapsed > 0 ? elapsed : 0;
}

std::string format_duration(double s) {
  char buf[32];
  const long total = static_cast<long>(s + 0.5);
  if (total >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", total / 3600, (total / 60) % 60);
  else if (total >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", total / 60, total % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", total);
  return buf;
}


// "writing 'PATH' failed: <errno text>", for a stream write that failed (disk full, I/O error).
std::string write_failed(const std::string& path) {
  const int err = errno;
  return "writing '" + path + "' failed: " +
         (err != 0 ? std::string(std::strerror(err)) : std::string("I/O error")) +
         (err == ENOSPC ? " (the disk is full)" : "") + "; the run stops (its last checkpoint is whole)";
}

// `eval_seconds_left`: what the evaluations still to come will take (EvalClock), part of the ETA.
void log_step(std::ofstream& metrics, const Say& say, const Config& cfg, size_t done,
              size_t start_step, const StepResult& r, double val_loss, double tok_s,
              double step_seconds, double elapsed, bool force_line, int ranks,
              double eval_seconds_left) {
  metrics << done << ',' << r.loss << ',';
  if (val_loss >= 0) {  // exactly (shortest round-trip form): `wte eval` reproduces it
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, val_loss).ptr;
    metrics.write(buf, end - buf);
  }
  metrics << ',' << r.lr << ',' << r.grad_norm << ',' << tok_s << ',' << elapsed << ',' << ranks
          << '\n';
  if (done % cfg.train.log_interval == 0 || force_line || done == 1) {
    const double eta = step_seconds / static_cast<double>(done - start_step) *
                           static_cast<double>(cfg.train.steps - done) +
                       eval_seconds_left;
    char val_text[32] = "";
    if (val_loss >= 0) std::snprintf(val_text, sizeof val_text, " | val %.4f", val_loss);
    say("step %6zu/%zu | loss %.4f%s | lr %.2e | norm %.3f | %.1fk tok/s | ETA %s\n", done,
        cfg.train.steps, r.loss, val_text, r.lr, r.grad_norm, tok_s / 1000.0,
        format_duration(eta).c_str());
    metrics.flush();
  }
}

void print_summary(const Config& cfg, const RunData& d, size_t val_windows_all,
                   size_t trained, const std::string& metrics_path, TrainSummary* summary) {
  const size_t T = cfg.data.seq_len;
  summary->tokens_per_second =
      static_cast<double>(trained * cfg.train.batch_size * T) / summary->train_seconds;
  // The baseline scores exactly the targets the final evaluation scored.
  std::vector<int32_t> val_targets(val_windows_all * T);
  d.val_ids.read(1, val_targets.size(), val_targets.data());
  summary->unigram_baseline = unigram_cross_entropy(d.train_ids, val_targets, cfg.model.vocab_size);
  const size_t split_tokens = (d.val_ids.size() - 1) / T * T;
  const std::string coverage =
      val_windows_all * T == split_tokens
          ? "whole validation split, " + std::to_string(split_tokens) + " tokens"
          : "first " + std::to_string(val_windows_all * T) + " of the validation split's " +
                std::to_string(split_tokens) + " tokens, train.eval_tokens";
  std::printf(
      "final validation loss %.4f nats/token (%s) vs unigram "
      "baseline %.4f (train-split frequencies): %.4f %s the baseline.\n",
      summary->final_val_loss, coverage.c_str(), summary->unigram_baseline,
      std::fabs(summary->unigram_baseline - summary->final_val_loss),
      summary->final_val_loss < summary->unigram_baseline ? "below" : "ABOVE (worse than)");
  std::printf("trained %zu steps in %s, %.0f tokens/s; checkpoint %s; metrics %s\n", trained,
              format_duration(summary->train_seconds).c_str(), summary->tokens_per_second,
              summary->last_checkpoint.c_str(), metrics_path.c_str());
  std::printf("evaluations: %zu in %s (%.3f s), besides %.3f s of training steps\n",
              summary->evaluations, format_duration(summary->eval_seconds).c_str(),
              summary->eval_seconds, summary->train_seconds);
  std::printf("checkpoints: %zu written, %.3f s each on average (%s)\n",
              summary->checkpoints_written,
              summary->checkpoints_written
                  ? summary->checkpoint_seconds / static_cast<double>(summary->checkpoints_written)
                  : 0.0,
              fs::exists(summary->last_checkpoint)
                  ? (std::to_string(fs::file_size(summary->last_checkpoint)) + " bytes each").c_str()
                  : "");
}


}  // namespace wte
