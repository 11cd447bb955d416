// `wte sample --checkpoint C [--prompt TEXT] [-n N --temperature T --top-k K --top-p P --stop S
// --ignore-eos --slide D --seed S --samples M]`: generates text from a trained model, one token at
// a time through the KV-cache decoder with a sliding context window (include/wte/decoder.h,
// SlidingDecoder), so the user sees what the model learned.
#include <boost/program_options.hpp>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "wte/decoder.h"
#include "wte/generate.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "cli/commands.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/rng.h"
#include "wte/tokenizer.h"

namespace po = boost::program_options;

namespace wte::cli {
namespace {

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

// One sample: print the prompt, prefill its ids, print up to opt.max_new_tokens drawn tokens on
// stdout as they are drawn (include/wte/generate.h: stopping at <|endoftext|> or a stop string),
// then a line on stderr with why it ended and how fast.
static void print_sample(SlidingDecoder& dec, const std::vector<int32_t>& ids,
                         const std::string& prompt, const GenerateOptions& opt, Rng& rng,
                         const Tokenizer& tok) {
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  const Generation g = generate(dec, ids, tok, opt, rng, [](const char* data, size_t size) {
    std::fwrite(data, 1, size, stdout);
    std::fflush(stdout);
  });
  std::printf("\n");
  std::fflush(stdout);
  if (g.end == GenerationEnd::kEndOfText)
    std::fprintf(stderr, "wte sample: stopped at <|endoftext|> (new token %zu, not printed)\n",
                 g.drawn);
  else if (g.end == GenerationEnd::kStop)
    std::fprintf(stderr, "wte sample: stopped at a --stop string (new token %zu; the text is "
                 "printed up to where the string starts)\n", g.drawn);
  const double gen = g.generate_seconds;
  char line[256];
  std::snprintf(line, sizeof line, "wte sample: prompt %zu tokens in %.3f s; %zu new tokens in "
                "%.3f s (%.1f tokens/s); the context window slid %zu times", ids.size(),
                g.prefill_seconds, g.drawn, gen, gen > 0 ? double(g.drawn) / gen : 0.0,
                dec.slides());
  std::fputs(wrap_prose(line).c_str(), stderr);
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
       "printed up to where STRING starts: STRING and the rest of its token are not printed. The "
       "prompt is not searched")
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

  const LoadedModel ck = load_model(vm["checkpoint"].as<std::string>(), "--checkpoint ");
  const std::string& path = ck.path;
  const CheckpointInfo& info = ck.info;
  const Config& cfg = ck.config;
  const size_t n_ctx = cfg.model.n_ctx;
  // --slide is checked against the model's n_ctx, before any work on the model.
  if (slide_arg > n_ctx)
    throw UsageError("--slide = '" + vm["slide"].as<std::string>() + "' is more than the model's "
                     "n_ctx = " + std::to_string(n_ctx) + "; allowed: a whole number in [0, " +
                     std::to_string(n_ctx) + "] (0: n_ctx/4)");
  const size_t drop = slide_arg == 0 ? SlidingDecoder::default_drop(n_ctx) : slide_arg;
  const Tokenizer& tok = ck.tokenizer;
  // GPT-2's end-of-text token, when this vocabulary has it (a vocabulary trained by wte has not).
  const int32_t eot = end_of_text_id(tok, cfg.model.vocab_size);
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
  char settings[1024];
  std::snprintf(settings, sizeof settings, "wte sample: %s (step %lld): vocab_size %zu, d_model %zu, "
                "n_layer %zu, n_ctx %zu; prompt %zu tokens%s; temperature %g, top-k %zu, top-p %g, "
                "seed %llu; %s; %zu stop string(s); the window slides by %zu token%s",
                path.c_str(), static_cast<long long>(info.step), cfg.model.vocab_size,
                cfg.model.d_model, cfg.model.n_layer, n_ctx, ids.size(),
                prompt.empty() ? " (<|endoftext|>)" : "", sp.temperature, sp.top_k, sp.top_p,
                static_cast<unsigned long long>(seed), eos_note.c_str(), stops.size(), drop,
                drop == 1 ? "" : "s");
  std::fputs(wrap_prose(settings).c_str(), stderr);

  GenerateOptions gen;
  gen.max_new_tokens = n_new;
  gen.sampling = sp;
  gen.eot = eot;
  gen.ignore_eos = ignore_eos;
  gen.stops = stops;
  Rng rng(seed);
  for (size_t s = 0; s < n_samples; ++s) {
    if (s > 0) std::printf("\n----------------\n");
    print_sample(dec, ids, prompt, gen, rng, tok);
  }
  return 0;
}

}  // namespace wte::cli
