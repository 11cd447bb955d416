// `wte sample --checkpoint C [--prompt TEXT] [-n N --temperature T --top-k K --top-p P --stop S
// --ignore-eos --slide D --seed S --samples M]`: generates text from a trained model, one token at
// a time through the KV-cache decoder with a sliding context window (src/model/decoder.h,
// SlidingDecoder), so the user sees what the model learned.
#include <boost/program_options.hpp>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "src/io/snapshot.h"
#include "src/model/decoder.h"
#include "cli/options.h"
#include "cli/commands.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/rng.h"
#include "wte/tokenizer.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace wte::cli {
namespace {

// A checkpoint file, or a run directory's newest checkpoint_<step>.h5 (as every command).
std::string resolve_checkpoint(const std::string& arg) {
  return checkpoint_option("--checkpoint", arg);
}

// A decimal number typed for an option, or NaN if `text` is not one (empty, leading space, junk
// after it). Read with strtod, which (unlike std::stod) keeps a value below the smallest normal
// double (4.9e-324; an underflow to 0 is 0).
double parse_number(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double t = text.empty() || std::isspace(static_cast<unsigned char>(text[0]))
                       ? NAN
                       : std::strtod(begin, &end);
  const bool parsed = end != nullptr && end != begin && end == begin + text.size();
  return parsed ? t : NAN;
}

// --temperature: a finite decimal number in [0, 1e6].
double parse_temperature(const std::string& text) {
  const double t = parse_number(text);
  if (!std::isfinite(t) || t < 0 || t > 1e6)
    throw UsageError("--temperature = '" + text + "' is not allowed; allowed: a number in [0, 1e6] " +
                "(0: always the most likely token)");
  return t;
}

// --top-p: a decimal number in (0, 1].
double parse_top_p(const std::string& text) {
  const double p = parse_number(text);
  if (!(p > 0 && p <= 1))
    throw UsageError("--top-p = '" + text + "' is not allowed; allowed: a number in (0, 1] " +
                "(1: no nucleus cut)");
  return p;
}

// The generated text (the continuation, not the prompt) and what of it is on stdout. With stop
// strings, the text is printed up to the end of the first stop string it contains and nothing
// after it; until then, a tail that could be the start of a stop string is held back (printed
// once it cannot be, or at the end).
class Continuation {
 public:
  explicit Continuation(const std::vector<std::string>& stops) : stops_(stops) {}

  // Appends a token's bytes and prints what is safe to print. Returns true if the text now
  // contains a stop string (printed up to its end, not further).
  bool add(const std::string& bytes) {
    const size_t before = text_.size();
    text_ += bytes;
    size_t end = std::string::npos;  // where the first stop string to end, ends
    for (const std::string& s : stops_) {
      // Only a match that includes new bytes is new: start up to s.size() - 1 bytes earlier.
      const size_t from = before >= s.size() - 1 ? before - (s.size() - 1) : 0;
      const size_t at = text_.find(s, from);
      if (at != std::string::npos) end = std::min(end, at + s.size());
    }
    if (end != std::string::npos) {
      print_to(end);
      return true;
    }
    size_t hold = 0;  // the longest tail that is a proper prefix of a stop string
    for (const std::string& s : stops_)
      for (size_t n = std::min(s.size() - 1, text_.size() - printed_); n > hold; --n)
        if (text_.compare(text_.size() - n, n, s, 0, n) == 0) {
          hold = n;
          break;
        }
    print_to(text_.size() - hold);
    return false;
  }
  // Prints what was held back (generation ended without a stop string).
  void flush() { print_to(text_.size()); }

 private:
  void print_to(size_t end) {
    if (end > printed_) std::fwrite(text_.data() + printed_, 1, end - printed_, stdout);
    std::fflush(stdout);
    printed_ = std::max(printed_, end);
  }
  const std::vector<std::string>& stops_;
  std::string text_;
  size_t printed_ = 0;
};

}  // namespace

// wte sample --help: what the command does.
constexpr const char* kSampleUsage =
      "Usage: wte sample --checkpoint C [--prompt TEXT] [--max-new-tokens N] [--temperature T]\n"
      "                  [--top-k K] [--top-p P] [--stop STRING] [--ignore-eos] [--slide D]\n"
      "                  [--seed S] [--samples M]\n\n"
      "Encodes TEXT with the checkpoint's tokenizer, runs it through the model with a KV cache\n"
      "(each new token costs one row of every layer, not a whole forward), then draws up to N\n"
      "tokens, each from softmax(logits / T) over the K most likely, cut to the nucleus of mass P,\n"
      "and prints the prompt and the continuation on stdout as they are drawn. Generation ends\n"
      "after N tokens, at <|endoftext|> (unless --ignore-eos) or at a --stop string. A line on\n"
      "stderr says how many tokens were drawn, why generation ended and how fast.\n"
      "The sequence may grow past the model's n_ctx positions: the model then sees only the most\n"
      "recent tokens, a window that slides by D tokens whenever it is full (wpe has n_ctx rows, so\n"
      "the kept tokens are re-run at their new positions).\n\n";

// One sample: prefill the prompt's ids, print the prompt and up to n_new drawn tokens on stdout as
// they are drawn (stopping at <|endoftext|> unless ignore_eos, eot < 0: none, or at a stop
// string), then a line on stderr with why it ended and how fast.
static void print_sample(SlidingDecoder& dec, const std::vector<int32_t>& ids,
                         const std::string& prompt, size_t n_new, const SamplingParams& sp,
                         Rng& rng, const Tokenizer& tok,
                         const std::vector<std::string>& stops, int32_t eot, bool ignore_eos,
                         size_t vocab_size) {
  const auto t0 = std::chrono::steady_clock::now();
  const float* logits = dec.start(ids.data(), ids.size());
  const auto t1 = std::chrono::steady_clock::now();
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  Continuation text(stops);
  size_t drawn = 0;
  std::string ended;  // why generation ended before n_new tokens ("": it did not)
  while (drawn < n_new) {
    const int32_t next = sample_token(logits, vocab_size, sp, rng);
    ++drawn;
    if (next == eot && !ignore_eos) {
      ended = "at <|endoftext|> (new token " + std::to_string(drawn) + ", not printed)";
      break;
    }
    if (text.add(tok.piece(next))) {
      ended = "at a --stop string (new token " + std::to_string(drawn) +
              "; nothing after the string is printed)";
      break;
    }
    if (drawn == n_new) break;
    logits = dec.push(next);
  }
  text.flush();
  const auto t2 = std::chrono::steady_clock::now();
  std::printf("\n");
  std::fflush(stdout);
  const double prefill = std::chrono::duration<double>(t1 - t0).count();
  const double gen = std::chrono::duration<double>(t2 - t1).count();
  if (!ended.empty()) std::fprintf(stderr, "wte sample: stopped %s\n", ended.c_str());
  std::fprintf(stderr, "wte sample: prompt %zu tokens in %.3f s; %zu new tokens in %.3f s (%.1f "
               "tokens/s); the context window slid %zu times\n", ids.size(), prefill, drawn, gen,
               gen > 0 ? double(drawn) / gen : 0.0, dec.slides());
}

int cmd_sample(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("checkpoint", po::value<std::string>(),
       "a checkpoint .h5 written by wte train, or a run directory (its newest checkpoint)")
      ("prompt,p", po::value<std::string>()->default_value(""),
       "the text to continue; empty: start from <|endoftext|> (only if the vocabulary has it, as "
       "GPT-2's does). A prompt longer than n_ctx tokens is cropped to its last n_ctx tokens (the "
       "model's input; the whole prompt is printed), with a note on stderr")
      ("max-new-tokens,n", po::value<std::string>()->default_value("256"),
       "new tokens to generate, in [0, 2^20] (Hugging Face's name); past n_ctx "
       "the context window slides (--slide)")
      ("temperature", po::value<std::string>()->default_value("1.0"),
       "divide the logits by this before the softmax, in [0, 1e6]; 0: always the most likely token")
      ("top-k", po::value<std::string>()->default_value("40"),
       "draw only among the k most likely tokens, in [0, 2^24] (0: all; GPT-2's samples used 40)")
      ("top-p", po::value<std::string>()->default_value("1.0"),
       "nucleus sampling, in (0, 1]: after --top-k and --temperature, draw only among the most "
       "likely tokens whose probabilities add up to P (the smallest such set; 1: no cut)")
      ("stop", po::value<std::vector<std::string>>(),
       "stop when the generated text contains STRING (repeatable: any of them); the text is "
       "printed up to the end of STRING and no further. The prompt is not searched")
      ("ignore-eos", po::bool_switch(),
       "do not stop at <|endoftext|> (by default a drawn <|endoftext|> ends the text and is not "
       "printed; only vocabularies that have the token, as GPT-2's does)")
      ("slide", po::value<std::string>()->default_value("0"),
       "when the sequence fills n_ctx, the context window drops its D oldest tokens and is "
       "re-prefilled; D in [0, n_ctx]; 0: n_ctx/4. Each token past n_ctx is then predicted from "
       "the last n_ctx+1-D to n_ctx tokens; 1: always the last n_ctx (nanoGPT's window), but a "
       "prefill of n_ctx positions per token")
      ("seed", po::value<std::string>()->default_value("1337"),
       "random seed, in [0, 2^64-1]: the same seed, checkpoint and options give the same text")
      ("samples", po::value<std::string>()->default_value("1"),
       "independent samples of the same prompt, in [1, 1000], separated by a line of dashes");
  // clang-format on
  CommandSpec spec;
  spec.usage = kSampleUsage;
  spec.example =
      "Example:\n"
      "  wte train --config configs/default.ini\n"
      "  wte sample --checkpoint runs/default --prompt \"And God said\" --max-new-tokens 400 \\\n"
      "      --top-p 0.9 --stop $'\\n\\n'\n";
  spec.aliases = {{"--tokens", "--max-new-tokens"}};
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  require_options(vm, {"checkpoint"});
  const size_t n_new = whole_number_option(vm, "max-new-tokens", 0, size_t{1} << 20);
  SamplingParams sp;
  sp.temperature = parse_temperature(vm["temperature"].as<std::string>());
  sp.top_k = whole_number_option(vm, "top-k", 0, size_t{1} << 24);
  sp.top_p = parse_top_p(vm["top-p"].as<std::string>());
  const std::vector<std::string> stops =
      vm.count("stop") ? vm["stop"].as<std::vector<std::string>>() : std::vector<std::string>{};
  for (const std::string& s : stops)
    if (s.empty())
      throw UsageError("--stop = '' is not allowed; allowed: a non-empty text (every text "
                       "contains the empty one)");
  const bool ignore_eos = vm["ignore-eos"].as<bool>();
  const size_t slide_arg = whole_number_option(vm, "slide", 0, size_t{1} << 24);
  const uint64_t seed = whole_number_option(vm, "seed", 0, UINT64_MAX);
  const size_t n_samples = whole_number_option(vm, "samples", 1, 1000);

  const std::string path = resolve_checkpoint(vm["checkpoint"].as<std::string>());
  const CheckpointModel ck = load_checkpoint_model(path);
  const CheckpointInfo& info = ck.info;
  const Config& cfg = ck.config;
  const size_t n_ctx = cfg.model.n_ctx;
  // --slide is checked against the model's n_ctx, before any work on the model.
  if (slide_arg > n_ctx)
    throw UsageError("--slide = '" + vm["slide"].as<std::string>() + "' is more than the model's "
                     "n_ctx = " + std::to_string(n_ctx) + "; allowed: a whole number in [0, " +
                     std::to_string(n_ctx) + "] (0: n_ctx/4)");
  const size_t drop = slide_arg == 0 ? SlidingDecoder::default_drop(n_ctx) : slide_arg;
  const Tokenizer tok = Tokenizer::from_strings(info.encoder_json, info.vocab_bpe, path + " /tokenizer");
  // GPT-2's end-of-text token, when this vocabulary has it (a vocabulary trained by wte has not).
  int32_t eot = tok.id_of("<|endoftext|>");
  if (eot >= 0 && static_cast<size_t>(eot) >= cfg.model.vocab_size) eot = -1;
  const std::string prompt = vm["prompt"].as<std::string>();
  std::vector<int32_t> ids = tok.encode(prompt);
  if (ids.empty()) {
    if (eot < 0)
      throw UsageError("--prompt is empty (or not given): it encodes to no tokens, and the "
                       "checkpoint's vocabulary has no <|endoftext|> token to start from; give at "
                       "least one character to continue (e.g. a newline: --prompt $'\\n' in bash)");
    ids.push_back(eot);  // unconditional: as GPT-2 starts a document
  }
  check_token_ids(ids.data(), ids.size(), cfg.model.vocab_size,
                  "--prompt (encoded with the checkpoint's tokenizer)");
  if (ids.size() > n_ctx)
    std::fprintf(stderr, "wte sample: note: the prompt is %zu tokens, more than the model's n_ctx = "
                 "%zu: the model sees its last %zu tokens (the whole prompt is printed)\n",
                 ids.size(), n_ctx, n_ctx);
  SlidingDecoder dec(*ck.model, drop);
  std::string eos_note = "no <|endoftext|> in the vocabulary";
  if (eot >= 0) eos_note = ignore_eos ? "<|endoftext|> ignored" : "stop at <|endoftext|>";
  std::fprintf(stderr, "wte sample: %s (step %lld): vocab_size %zu, d_model %zu, n_layer %zu, n_ctx %zu; "
               "prompt %zu tokens%s; temperature %g, top-k %zu, top-p %g, seed %llu; %s; %zu stop "
               "string(s); the window slides by %zu token%s\n",
               path.c_str(), static_cast<long long>(info.step), cfg.model.vocab_size,
               cfg.model.d_model, cfg.model.n_layer, n_ctx, ids.size(),
               prompt.empty() ? " (<|endoftext|>)" : "", sp.temperature, sp.top_k, sp.top_p,
               static_cast<unsigned long long>(seed), eos_note.c_str(), stops.size(), drop,
               drop == 1 ? "" : "s");

  Rng rng(seed);
  for (size_t s = 0; s < n_samples; ++s) {
    if (s > 0) std::printf("\n----------------\n");
    print_sample(dec, ids, prompt, n_new, sp, rng, tok, stops, eot, ignore_eos,
                 cfg.model.vocab_size);
  }
  return 0;
}

}  // namespace wte::cli
