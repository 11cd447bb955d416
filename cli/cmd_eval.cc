// `wte eval --checkpoint C [--text FILE | --tokens FILE] [--max-tokens N] [--json]`: the loss,
// perplexity and unigram baseline of a checkpoint's model on its run's validation split or on a
// text or token file, computed as wte train's evaluation computes it.
#include <boost/program_options.hpp>
#include <omp.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "src/io/bounded_read.h"
#include "src/model/finite_check.h"
#include "wte/checkpoint.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/evaluate.h"
#include "wte/model.h"
#include "wte/tokenizer.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace wte::cli {
namespace {

constexpr const char* kEvalUsage =
    "Usage: wte eval --checkpoint C [--text FILE | --tokens FILE] [--max-tokens N] [--json]\n\n"
    "Evaluates a checkpoint's model as wte train's evaluation does: the mean next-token\n"
    "cross-entropy (nats/token) over non-overlapping windows of data.seq_len tokens (the\n"
    "checkpoint's config), train.batch_size / grad_accum_steps windows per forward pass, in\n"
    "train.threads threads. Prints the loss, the perplexity exp(loss) and the unigram\n"
    "baseline (what predicting by train-split frequencies alone scores on the same targets;\n"
    "needs the run's train.bin beside the checkpoint).\n"
    "The data: the run's validation split (val.bin beside the checkpoint; the loss then\n"
    "equals the run's final evaluation over the same tokens), or --text FILE (UTF-8, encoded\n"
    "with the checkpoint's tokenizer), or --tokens FILE (raw little-endian int32 ids, as\n"
    "train.bin and val.bin). A text shorter than one window is evaluated as one shorter window.\n"
    "With --max-tokens only the start of --text or --tokens that the windows need is read.\n"
    "A loss that is not finite (NaN or infinite) is an error (exit status 1).\n\n";

// The run's token file NAME (val.bin, train.bin) beside the checkpoint `ckpt`, or "".
std::string beside(const std::string& ckpt, const char* name) {
  std::error_code ec;
  const fs::path p = fs::path(ckpt).parent_path() / name;
  return fs::is_regular_file(p, ec) ? p.string() : "";
}

// The number `x` for JSON: shortest round-trip form (exact), "null" if not finite.
std::string json_number(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[40];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, x).ptr);
}

// A string for JSON: quotes, backslashes and control bytes escaped.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// The first `needed` tokens of the text file `path` encoded with `tok` (all of it if it encodes
// to fewer), reading only as much of the file as they need: growing prefixes are encoded until
// the pre-tokens that end at least 8 bytes before the cut give `needed` tokens. Those are the
// whole file's pre-tokens (GPT-2's pre-tokenizer looks one character, at most 4 bytes, past a
// match, and a character cut by the prefix is at most 4 bytes), so the ids are the whole file's.
std::vector<int32_t> encode_text_prefix(const Tokenizer& tok, const std::string& path,
                                        uint64_t needed) {
  uint64_t bytes = std::max<uint64_t>(uint64_t{1} << 16, std::min(needed, UINT64_MAX / 16) * 8);
  for (;;) {
    const std::string text = read_file_prefix(path, bytes);
    if (text.size() < bytes) {  // the whole file
      std::vector<int32_t> ids = tok.encode(text);
      if (ids.size() > needed) ids.resize(needed);
      return ids;
    }
    size_t keep = 0, end = 0;
    for (const std::string_view piece : Tokenizer::pretokenize(text)) {
      end += piece.size();
      if (end + 8 > text.size()) break;
      keep = end;
    }
    std::vector<int32_t> ids = tok.encode(std::string_view(text).substr(0, keep));
    if (ids.size() >= needed) {
      ids.resize(needed);
      return ids;
    }
    bytes = bytes > UINT64_MAX / 2 ? UINT64_MAX : bytes * 2;
  }
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("checkpoint", po::value<std::string>(),
       "a checkpoint .h5 (wte train, wte import), or a run directory (its newest checkpoint)")
      ("text", po::value<std::string>(), "a UTF-8 text file to evaluate on")
      ("tokens", po::value<std::string>(), "an int32 token file to evaluate on (as val.bin)")
      ("max-tokens", po::value<std::string>(),
       "evaluate on at most the first N target tokens, in whole windows (default: all; the run's "
       "train.eval_tokens is not applied)")
      ("json", "print one JSON object instead of text");
  // clang-format on
  CommandSpec spec;
  spec.usage = kEvalUsage;
  spec.example =
      "Examples:\n  wte eval --checkpoint runs/default\n"
      "  wte eval --checkpoint runs/default --text datasets/kjv/kjv.txt --max-tokens 65536 --json\n";
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  require_options(vm, {"checkpoint"});
  if (vm.count("text") && vm.count("tokens"))
    throw UsageError("--text and --tokens exclude each other: give one file to evaluate on");
  const std::string text_path = file_option(vm, "text"), tokens_path = file_option(vm, "tokens");
  const size_t max_tokens =
      vm.count("max-tokens") ? whole_number_option(vm, "max-tokens", 1, UINT64_MAX) : 0;
  const bool json = vm.count("json") > 0;
  const std::string ckpt = checkpoint_option("--checkpoint", vm["checkpoint"].as<std::string>());
  if (!text_path.empty()) io::require_input_file("--text ", text_path);
  if (!tokens_path.empty()) io::require_input_file("--tokens ", tokens_path);
  const std::string val_bin = beside(ckpt, "val.bin");
  if (text_path.empty() && tokens_path.empty() && val_bin.empty())
    throw Error("--checkpoint " + ckpt + ": no val.bin beside it (the run's validation split, "
                "as wte train writes it); give --text FILE or --tokens FILE to evaluate on");

  const CheckpointModel ck = load_checkpoint_model(ckpt);
  const Config& cfg = ck.config;
  const size_t V = cfg.model.vocab_size;
  std::string source;  // what the data is, for the output
  std::vector<int32_t> ids;
  // The ids --max-tokens needs: windows of data.seq_len targets (at least one) and the id after
  // the last; reading stops there (the windows, and so the loss, are those of the whole input).
  const uint64_t ids_needed =
      max_tokens == 0 || max_tokens >= UINT64_MAX - 1
          ? UINT64_MAX
          : std::max<uint64_t>(max_tokens, cfg.data.seq_len) + 1;
  if (!text_path.empty()) {
    const Tokenizer tok =
        Tokenizer::from_strings(ck.info.encoder_json, ck.info.vocab_bpe, ckpt + " /tokenizer");
    ids = ids_needed == UINT64_MAX ? tok.encode(read_text_file(text_path))
                                   : encode_text_prefix(tok, text_path, ids_needed);
    source = "text " + text_path;
  } else {
    const std::string path = tokens_path.empty() ? val_bin : tokens_path;
    // The run's own split is read whole: its length and hash are checked below.
    const bool own_split = tokens_path.empty() && ck.info.has_resume;
    ids = read_token_file_prefix(path, own_split ? UINT64_MAX : ids_needed);
    check_token_ids(ids.data(), ids.size(), V, path);
    source = tokens_path.empty() ? "validation split " + path : "tokens " + path;
    // The run's own split: the checkpoint records its length and hash.
    if (tokens_path.empty() && ck.info.has_resume &&
        (ids.size() != ck.info.resume.val_tokens ||
         fnv1a64(ids) != ck.info.resume.val_tokens_fnv1a64))
      throw Error(path + " is not the validation split checkpoint " + ckpt + " was trained with "
                  "(its length or hash differs from the one the checkpoint records); give "
                  "--tokens " + path + " to evaluate on it anyway");
  }
  if (ids.size() < 2)
    throw Error(source + ": " + std::to_string(ids.size()) + " token(s); evaluating needs at "
                "least 2 (an input and its next token)");
  // Windows as the trainer's: T = data.seq_len, B = the micro-batch; a shorter text is one window.
  const size_t T = std::min(cfg.data.seq_len, ids.size() - 1);
  const size_t B = std::max<size_t>(1, cfg.train.batch_size / cfg.train.grad_accum_steps);
  const size_t all_windows = (ids.size() - 1) / T;
  const size_t windows =
      max_tokens == 0 ? all_windows : std::min(all_windows, std::max<size_t>(1, max_tokens / T));
  if (cfg.train.threads > 0) omp_set_num_threads(static_cast<int>(cfg.train.threads));
  progress_note("wte eval", "scoring " + std::to_string(windows) + " windows of " +
                                std::to_string(T) + " tokens (" + std::to_string(B) +
                                " per forward pass) of the " + source);
  ProgressCounter counter("wte eval", "windows");
  const double loss = evaluate_loss(*ck.model, ids, T, B, windows,
                                    [&](size_t done, size_t total) { counter.update(done, total); });
  const size_t scored = windows * T;
  if (!std::isfinite(loss))
    throw Error("the loss of checkpoint " + ckpt + " on " + source + " is " +
                (std::isnan(loss) ? std::string("nan") : std::string(loss > 0 ? "inf" : "-inf")) +
                ", not a number a model can be judged by: " + non_finite_loss_cause(*ck.model));
  // The unigram baseline on exactly the scored targets, from the run's train split.
  const std::string train_bin = beside(ckpt, "train.bin");
  double baseline = NAN;
  if (!train_bin.empty()) {
    const std::vector<int32_t> train_ids = read_token_file(train_bin);
    check_token_ids(train_ids.data(), train_ids.size(), V, train_bin);
    const std::vector<int32_t> targets(ids.begin() + 1, ids.begin() + 1 + static_cast<long>(scored));
    baseline = unigram_cross_entropy(train_ids, targets, V);
  }
  if (json) {
    std::printf("{\"checkpoint\": %s, \"step\": %lld, \"data\": %s, \"tokens\": %zu, "
                "\"scored_tokens\": %zu, \"seq_len\": %zu, \"loss\": %s, \"perplexity\": %s, "
                "\"unigram_baseline\": %s}\n",
                json_string(ckpt).c_str(), static_cast<long long>(ck.info.step),
                json_string(source).c_str(), ids.size(), scored, T, json_number(loss).c_str(),
                json_number(std::exp(loss)).c_str(), json_number(baseline).c_str());
    return 0;
  }
  std::printf("checkpoint: %s (step %lld)\n", ckpt.c_str(), static_cast<long long>(ck.info.step));
  std::fputs(wrap_prose("data: " + source + ", " + std::to_string(ids.size()) + " tokens; scored " +
                       std::to_string(scored) + " targets in " + std::to_string(windows) +
                       " windows of " + std::to_string(T) +
                       (windows < all_windows ? " (--max-tokens)" : ""))
                 .c_str(),
             stdout);
  std::printf("loss %.4f nats/token, perplexity %.2f\n", loss, std::exp(loss));
  if (std::isfinite(baseline)) {
    char numbers[128];
    std::snprintf(numbers, sizeof numbers, "%.4f", baseline);
    std::string line = "unigram baseline " + std::string(numbers) +
                       " nats/token (train-split frequencies, " + train_bin + "): the model is ";
    std::snprintf(numbers, sizeof numbers, "%.4f", std::fabs(baseline - loss));
    line += std::string(numbers) + (loss < baseline ? " below" : " ABOVE (worse than)") + " it";
    std::fputs(wrap_prose(line).c_str(), stdout);
  } else {
    std::printf("unigram baseline: not computed (no train.bin beside the checkpoint)\n");
  }
  return 0;
}

}  // namespace wte::cli
