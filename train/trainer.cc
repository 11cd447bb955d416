#include "train/trainer.h"

#include <omp.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "src/checkpoint.h"
#include "src/data.h"
#include "src/error.h"
#include "src/model.h"
#include "src/optimizer.h"
#include "src/snapshot.h"
#include "src/tokenizer.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
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

// Mean next-token loss over the non-overlapping (T+1)-windows of `tokens`, at most max_windows of
// them, in order, B windows per forward. Returns nats/token.
double evaluate(Model& model, const std::vector<int32_t>& tokens, size_t T, size_t B,
                size_t max_windows) {
  const size_t windows = std::min(max_windows, (tokens.size() - 1) / T);
  std::vector<int32_t> inputs(B * T), targets(B * T);
  std::vector<float> losses(B * T);
  double total = 0.0;
  size_t count = 0;
  for (size_t w = 0; w < windows; w += B) {
    const size_t b_now = std::min(B, windows - w);
    for (size_t b = 0; b < b_now; ++b) {
      const int32_t* src = tokens.data() + (w + b) * T;
      std::copy(src, src + T, inputs.begin() + static_cast<long>(b * T));
      std::copy(src + 1, src + T + 1, targets.begin() + static_cast<long>(b * T));
    }
    model.forward_logits(inputs.data(), b_now, T, targets.data(), losses.data());
    for (size_t i = 0; i < b_now * T; ++i) total += losses[i];
    count += b_now * T;
  }
  return total / static_cast<double>(count);
}

std::string checkpoint_path(const std::string& dir, size_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint_%08zu.h5", step);
  return (fs::path(dir) / name).string();
}

}  // namespace

RunSummary run_training(const Config& cfg, const RunOptions& opts) {
  // --- Checks that need no work: every missing path is reported before anything is computed.
  const bool from_token_files = !cfg.data.train_tokens.empty();
  auto require_file = [](const std::string& key, const std::string& path, const char* hint) {
    if (!fs::is_regular_file(path))
      throw Error(key + ": file '" + path + "' does not exist" + hint);
  };
  if (from_token_files) {
    require_file("data.train_tokens", cfg.data.train_tokens, "");
    require_file("data.val_tokens", cfg.data.val_tokens, "");
  } else if (cfg.data.text.empty()) {
    throw Error("data.text is not set: give the corpus path in the config's [data] section or as "
                "--data.text=PATH");
  } else {
    require_file("data.text", cfg.data.text,
                 cfg.data.text.find("kjv") != std::string::npos
                     ? " (make it with datasets/make_kjv.sh)"
                     : "");
  }
  if (cfg.data.tokenizer != "train") {
    for (const char* f : {"encoder.json", "vocab.bpe"})
      require_file("data.tokenizer", (fs::path(cfg.data.tokenizer) / f).string(),
                   " (a tokenizer directory holds GPT-2's encoder.json and vocab.bpe; or set "
                   "data.tokenizer = train)");
  }
  if (cfg.train.threads > 0) omp_set_num_threads(static_cast<int>(cfg.train.threads));
  const size_t B = cfg.train.batch_size, T = cfg.data.seq_len, V = cfg.model.vocab_size;
  auto say = [&](const char* fmt, auto... args) {
    if (!opts.quiet) {
      std::printf(fmt, args...);
      std::fflush(stdout);
    }
  };

  // --- Data: split, tokenizer, ids. Every id is checked before any compute.
  const auto t_prep = Clock::now();
  Tokenizer tokenizer;
  std::vector<int32_t> train_ids, val_ids;
  size_t train_bytes = 0;
  if (from_token_files) {
    tokenizer = Tokenizer::load(cfg.data.tokenizer);
    train_ids = read_token_file(cfg.data.train_tokens);
    val_ids = read_token_file(cfg.data.val_tokens);
    say("data: %zu train tokens from %s, %zu validation tokens from %s\n", train_ids.size(),
        cfg.data.train_tokens.c_str(), val_ids.size(), cfg.data.val_tokens.c_str());
  } else {
    const std::string text = read_text_file(cfg.data.text);
    const TextSplit split = split_documents(text, cfg.data.val_fraction);
    say("data: %s, %zu bytes, %zu train / %zu validation documents\n", cfg.data.text.c_str(),
        text.size(), split.train_documents, split.val_documents);
    if (cfg.data.tokenizer == "train") {
      say("tokenizer: training byte-level BPE to vocab_size %zu on the train split...\n", V);
      tokenizer = Tokenizer::train(split.train, V);
    } else {
      tokenizer = Tokenizer::load(cfg.data.tokenizer);
    }
    train_bytes = split.train.size();
    if (tokenizer.size() == V) {
      train_ids = tokenizer.encode(split.train);
      val_ids = tokenizer.encode(split.val);
    }
  }
  if (tokenizer.size() != V)
    throw Error("the tokenizer has " + std::to_string(tokenizer.size()) +
                " tokens but model.vocab_size = " + std::to_string(V) +
                "; they must be equal (set model.vocab_size = " +
                std::to_string(tokenizer.size()) + ")");
  check_token_ids(train_ids.data(), train_ids.size(), V,
                  from_token_files ? "data.train_tokens '" + cfg.data.train_tokens + "'"
                                   : std::string("the encoded train split"));
  check_token_ids(val_ids.data(), val_ids.size(), V,
                  from_token_files ? "data.val_tokens '" + cfg.data.val_tokens + "'"
                                   : std::string("the encoded validation split"));
  if (val_ids.size() < T + 1)
    throw Error("the validation split has " + std::to_string(val_ids.size()) +
                " tokens, fewer than data.seq_len + 1 = " + std::to_string(T + 1));
  BatchLoader loader(&train_ids, T, /*shuffle=*/true, cfg.train.seed ^ 0x5eed0da7aULL);
  say("tokens: %zu train, %zu validation (%.2f bytes/token); %zu train sequences of %zu; "
      "prepared in %.1f s\n",
      train_ids.size(), val_ids.size(),
      static_cast<double>(train_bytes) / static_cast<double>(train_ids.size()),
      loader.num_samples(), T, seconds_since(t_prep));

  // --- Outputs: everything a later tool needs to read this run.
  fs::create_directories(opts.out_dir);
  write_file_atomic((fs::path(opts.out_dir) / "config.ini").string(), cfg.to_ini());
  tokenizer.save((fs::path(opts.out_dir) / "tokenizer").string());
  write_token_file((fs::path(opts.out_dir) / "train.bin").string(), train_ids);
  write_token_file((fs::path(opts.out_dir) / "val.bin").string(), val_ids);
  const std::string metrics_path = (fs::path(opts.out_dir) / "metrics.csv").string();
  std::ofstream metrics(metrics_path, std::ios::trunc);
  if (!metrics) throw Error("cannot create '" + metrics_path + "'");
  metrics << "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,elapsed_s\n";

  // --- Model and optimizer.
  Model model(cfg.model);
  model.init_weights(cfg.train.seed);
  save_snapshot_if_due(cfg, opts.out_dir, model, tokenizer, 0);  // train.snapshot_steps
  AdamW optimizer(model);
  say("model: vocab_size %zu, d_model %zu, n_ctx %zu, ln_f %s, tied lm_head; %zu parameters; "
      "%d threads\n",
      V, cfg.model.d_model, cfg.model.n_ctx, cfg.model.ln_f ? "on" : "off",
      model.num_parameters(), omp_get_max_threads());

  const size_t val_windows_all = (val_ids.size() - 1) / T;
  const size_t val_windows_periodic =
      cfg.train.eval_tokens == 0 ? val_windows_all : std::max<size_t>(1, cfg.train.eval_tokens / T);
  std::vector<int32_t> inputs(B * T), targets(B * T);
  RunSummary summary;
  double step_seconds = 0.0;
  const auto t_start = Clock::now();
  for (size_t step = 0; step < cfg.train.steps; ++step) {
    const auto t0 = Clock::now();
    loader.next_batch(inputs.data(), targets.data(), B);
    const float loss = model.forward(inputs.data(), targets.data(), B, T);
    model.backward();
    const double norm = clip_grad_norm(model, cfg.optim.grad_clip);
    const float lr = learning_rate(step, cfg.train.steps, cfg.optim);
    optimizer.update(model, lr, cfg.optim);
    step_seconds += seconds_since(t0);
    save_snapshot_if_due(cfg, opts.out_dir, model, tokenizer, step + 1);  // not timed
    const size_t done = step + 1;
    const double tok_s = static_cast<double>(done * B * T) / step_seconds;

    const bool last = done == cfg.train.steps;
    const bool eval_now = last || (cfg.train.eval_interval > 0 && done % cfg.train.eval_interval == 0);
    double val_loss = -1.0;
    if (eval_now && !last) val_loss = evaluate(model, val_ids, T, B, val_windows_periodic);
    if (last) val_loss = evaluate(model, val_ids, T, B, val_windows_all);
    if (!std::isfinite(loss))
      throw Error("the training loss became " + std::to_string(loss) + " at step " +
                  std::to_string(done) + "; lower optim.lr (now " + std::to_string(cfg.optim.lr) +
                  ")");

    metrics << done << ',' << loss << ',';
    if (val_loss >= 0) metrics << val_loss;
    metrics << ',' << lr << ',' << norm << ',' << tok_s << ',' << seconds_since(t_start) << '\n';
    if (done % cfg.train.log_interval == 0 || eval_now || done == 1) {
      const double eta = step_seconds / done * static_cast<double>(cfg.train.steps - done);
      say("step %6zu/%zu | loss %.4f%s | lr %.2e | norm %.3f | %.1fk tok/s | ETA %s\n", done,
          cfg.train.steps, loss,
          val_loss >= 0 ? (" | val " + std::to_string(val_loss).substr(0, 6)).c_str() : "", lr,
          norm, tok_s / 1000.0, format_duration(eta).c_str());
      metrics.flush();
    }
    if (last || (cfg.checkpoint.interval > 0 && done % cfg.checkpoint.interval == 0)) {
      summary.last_checkpoint = checkpoint_path(opts.out_dir, done);
      save_checkpoint(summary.last_checkpoint, model, &optimizer, tokenizer, cfg,
                      static_cast<int64_t>(done));
    }
    if (last) summary.final_val_loss = val_loss;
  }
  metrics.close();
  summary.train_seconds = step_seconds;
  summary.tokens_per_second = static_cast<double>(cfg.train.steps * B * T) / step_seconds;
  // The baseline scores exactly the targets the final evaluation scored.
  const std::vector<int32_t> val_targets(val_ids.begin() + 1,
                                         val_ids.begin() + 1 + static_cast<long>(val_windows_all * T));
  summary.unigram_baseline = unigram_cross_entropy(train_ids, val_targets, V);
  std::printf(
      "final validation loss %.4f nats/token (whole validation split, %zu tokens) vs unigram "
      "baseline %.4f (train-split frequencies): %s by %.4f\n",
      summary.final_val_loss, val_windows_all * T, summary.unigram_baseline,
      summary.final_val_loss < summary.unigram_baseline ? "below" : "NOT below",
      std::fabs(summary.unigram_baseline - summary.final_val_loss));
  std::printf("trained %zu steps in %s, %.0f tokens/s; checkpoint %s; metrics %s\n",
              cfg.train.steps, format_duration(step_seconds).c_str(), summary.tokens_per_second,
              summary.last_checkpoint.c_str(), metrics_path.c_str());
  return summary;
}

}  // namespace wte
