// `wte sample --checkpoint C --prompt TEXT [--tokens N --temperature T --top-k K --seed S]`:
// generates text from a trained model, one token at a time through the KV-cache decoder
// (src/model/decoder.h), so the user sees what the model learned.
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

// A checkpoint file, or a run directory's newest checkpoint_<step>.h5.
std::string resolve_checkpoint(const std::string& arg) {
  if (fs::is_directory(arg)) {
    const auto list = list_snapshots(arg, "checkpoint_");
    if (list.empty())
      throw Error("--checkpoint " + arg + ": the directory has no checkpoint_<step>.h5 files");
    return list.back().second;
  }
  io::require_input_file("--checkpoint ", arg, " (give a checkpoint .h5 or a run directory)");
  return arg;
}

// --temperature: a finite decimal number in [0, 1e6]. Read with strtod, which (unlike std::stod)
// keeps a value below the smallest normal double (4.9e-324 is inside the range; an underflow to
// 0 is 0, the most likely token).
double parse_temperature(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double t = text.empty() || std::isspace(static_cast<unsigned char>(text[0]))
                       ? -1.0
                       : std::strtod(begin, &end);
  const bool parsed = end != nullptr && end != begin && end == begin + text.size();
  if (!parsed || !std::isfinite(t) || t < 0 || t > 1e6)
    throw UsageError("--temperature = '" + text + "' is not allowed; allowed: a number in [0, 1e6] " +
                "(0: always the most likely token)");
  return t;
}

// Prints a token's bytes as they are (a byte-level token may hold part of a UTF-8 character; the
// terminal sees the whole character once its last byte is printed).
void emit(const Tokenizer& tok, int32_t id) {
  const std::string& bytes = tok.piece(id);
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

int cmd_sample(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("checkpoint", po::value<std::string>(),
       "a checkpoint .h5 written by wte train, or a run directory (its newest checkpoint)")
      ("prompt,p", po::value<std::string>(), "the text to continue (at least one token)")
      ("max-new-tokens,n", po::value<std::string>()->default_value("200"),
       "new tokens to generate, in [0, 2^20] (Hugging Face's name; old name --tokens); generation "
       "also stops when the sequence fills n_ctx")
      ("temperature", po::value<std::string>()->default_value("1.0"),
       "divide the logits by this before the softmax, in [0, 1e6]; 0: always the most likely token")
      ("top-k", po::value<std::string>()->default_value("40"),
       "draw only among the k most likely tokens, in [0, 2^24] (0: all; GPT-2's samples used 40)")
      ("seed", po::value<std::string>()->default_value("1337"),
       "random seed, in [0, 2^64-1]: the same seed, checkpoint and options give the same text")
      ("samples", po::value<std::string>()->default_value("1"),
       "independent samples of the same prompt, in [1, 1000], separated by a line of dashes");
  // clang-format on
  CommandSpec spec;
  spec.usage =
      "Usage: wte sample --checkpoint C --prompt TEXT [--max-new-tokens N] [--temperature T]\n"
      "                  [--top-k K] [--seed S] [--samples M]\n\n"
      "Encodes TEXT with the checkpoint's tokenizer, runs it through the model one position at a\n"
      "time with a KV cache (each new token costs one row of every layer, not a whole forward),\n"
      "then draws N tokens, each from softmax(logits / T) over the K most likely, and prints the\n"
      "prompt and the continuation on stdout as they are drawn. A line on stderr says how many\n"
      "tokens were drawn and how fast. The sequence cannot grow past the model's n_ctx positions\n"
      "(wpe has no row for later ones): generation then stops with a note.\n\n";
  spec.example =
      "Example:\n"
      "  wte train --config configs/default.ini\n"
      "  wte sample --checkpoint runs/default --prompt \"And God said\" --max-new-tokens 100\n";
  spec.aliases = {{"--tokens", "--max-new-tokens"}};
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  require_options(vm, {"checkpoint", "prompt"});
  const size_t n_new = whole_number_option(vm, "max-new-tokens", 0, size_t{1} << 20);
  SamplingParams sp;
  sp.temperature = parse_temperature(vm["temperature"].as<std::string>());
  sp.top_k = whole_number_option(vm, "top-k", 0, size_t{1} << 24);
  const uint64_t seed = whole_number_option(vm, "seed", 0, UINT64_MAX);
  const size_t n_samples = whole_number_option(vm, "samples", 1, 1000);

  const std::string path = resolve_checkpoint(vm["checkpoint"].as<std::string>());
  const CheckpointModel ck = load_checkpoint_model(path);
  const CheckpointInfo& info = ck.info;
  const Config& cfg = ck.config;
  const Tokenizer tok = Tokenizer::from_strings(info.encoder_json, info.vocab_bpe, path + " /tokenizer");
  const std::string prompt = vm["prompt"].as<std::string>();
  const std::vector<int32_t> ids = tok.encode(prompt);
  if (ids.empty())
    throw UsageError("--prompt is empty: it encodes to no tokens; give at least one character to "
                "continue (e.g. a newline: --prompt $'\\n' in bash)");
  if (ids.size() > cfg.model.n_ctx)
    throw UsageError("--prompt is " + std::to_string(ids.size()) + " tokens, more than the model's n_ctx = " +
                std::to_string(cfg.model.n_ctx) + " positions; shorten it");
  check_token_ids(ids.data(), ids.size(), cfg.model.vocab_size,
                  "--prompt (encoded with the checkpoint's tokenizer)");
  Decoder dec(*ck.model);
  std::fprintf(stderr, "wte sample: %s (step %lld): vocab_size %zu, d_model %zu, n_layer %zu, n_ctx %zu; "
               "prompt %zu tokens; temperature %g, top-k %zu, seed %llu\n",
               path.c_str(), static_cast<long long>(info.step), cfg.model.vocab_size,
               cfg.model.d_model, dec.n_layer(), cfg.model.n_ctx, ids.size(), sp.temperature,
               sp.top_k, static_cast<unsigned long long>(seed));

  Rng rng(seed);
  for (size_t s = 0; s < n_samples; ++s) {
    if (s > 0) std::printf("\n----------------\n");
    const auto t0 = std::chrono::steady_clock::now();
    dec.reset();
    // The prompt in one pass (each weight read once, not once per token), then its last token
    // alone for the logits: the same bits as stepping through the prompt (Decoder::prefill).
    if (ids.size() > 1) dec.prefill(ids.data(), ids.size() - 1, /*logits=*/false);
    const float* logits = dec.step(ids.back());
    const auto t1 = std::chrono::steady_clock::now();
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    size_t drawn = 0;
    bool full = false;
    for (; drawn < n_new; ++drawn) {
      const int32_t next = sample_token(logits, cfg.model.vocab_size, sp, rng);
      emit(tok, next);
      if (drawn + 1 == n_new) {
        ++drawn;
        break;
      }
      if (dec.position() == dec.n_ctx()) {
        ++drawn;
        full = true;
        break;
      }
      logits = dec.step(next);
    }
    const auto t2 = std::chrono::steady_clock::now();
    std::printf("\n");
    std::fflush(stdout);
    const double prefill = std::chrono::duration<double>(t1 - t0).count();
    const double gen = std::chrono::duration<double>(t2 - t1).count();
    if (full)
      std::fprintf(stderr, "wte sample: stopped after %zu new tokens: the sequence fills n_ctx = %zu "
                   "positions (wpe has no row for more)\n", drawn, dec.n_ctx());
    std::fprintf(stderr, "wte sample: prompt %zu tokens in %.3f s; %zu new tokens in %.3f s (%.1f "
                 "tokens/s)\n", ids.size(), prefill, drawn, gen, gen > 0 ? double(drawn) / gen : 0.0);
  }
  return 0;
}

}  // namespace wte::cli
