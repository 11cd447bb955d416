// `wte prepare --tokenizer DIR --out DIR INPUT...`: a corpus of any size (text files, directories,
// globs; plain or gzip) tokenized on many threads into llm.c shards for data.train_tokens and
// data.val_tokens. A command of its own beside `wte tokenize` (which prints the ids of a few texts
// to read them): this one writes a corpus to files. Option parsing only; the work is
// prepare_shards (include/wte/data.h).
#include <sched.h>
#include <unistd.h>

#include <boost/program_options.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/tokenizer.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace wte::cli {
namespace {

size_t cpus_available() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return static_cast<size_t>(CPU_COUNT(&set));
  return 1;
}

std::string duration_text(double s) {
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", int(s / 3600), int(s / 60) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", int(s / 60), int(s) % 60);
  else std::snprintf(buf, sizeof buf, "%.0fs", s);
  return buf;
}

}  // namespace

int cmd_prepare(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("tokenizer", po::value<std::string>(), "directory with encoder.json and vocab.bpe (GPT-2's, "
       "from datasets/fetch_gpt2_vocab.sh, or RUN/tokenizer of a training run); copied to OUT/tokenizer")
      ("out,o", po::value<std::string>(), "the output directory (created; must hold no *.bin yet)")
      ("val-fraction", po::value<double>()->default_value(0.1),
       "share of documents for validation, dealt as data.val_fraction deals them")
      ("shard-tokens", po::value<size_t>()->default_value(100000000),
       "tokens per shard (llm.c's default; at most 2^31 - 1)")
      ("threads", po::value<size_t>(), "encoding threads (default: the CPUs this process may use)");
  // clang-format on
  po::options_description hidden;
  hidden.add_options()("inputs", po::value<std::vector<std::string>>(), "inputs");
  CommandSpec spec;
  spec.usage =
      "Usage: wte prepare --tokenizer DIR --out DIR [options] INPUT...\n\n"
      "Tokenizes text into llm.c's token shards (dev/data format: a header of 256 int32, magic\n"
      "20240520, version 1, the token count, then uint16 ids; for a vocabulary above 65536 ids\n"
      "magic 20240801, version 7, uint32 ids): OUT/train_000000.bin ... and OUT/val_000000.bin ...\n"
      "An INPUT is a file, a directory (all files under it) or a quoted glob pattern; files ending\n"
      "in .gz are gunzipped. Documents are separated by blank lines and dealt into the train and\n"
      "validation splits as data.text deals them; the ids are those of encoding each split's text\n"
      "in one piece, on any number of threads. A progress line (bytes, MB/s, ETA) goes to stderr.\n"
      "Train on the shards with data.train_tokens = OUT/train_*.bin, data.val_tokens =\n"
      "OUT/val_*.bin, data.tokenizer = OUT/tokenizer. Formats: docs/data.md.\n\n";
  spec.example =
      "Example:\n  wte prepare --tokenizer datasets/gpt2 --out shards/kjv datasets/kjv/kjv.txt\n"
      "  wte train -c configs/gpt2_vocab.ini --data.train_tokens='shards/kjv/train_*.bin' \\\n"
      "      --data.val_tokens='shards/kjv/val_*.bin' --data.tokenizer=shards/kjv/tokenizer\n";
  spec.hidden = &hidden;
  po::positional_options_description positional;
  positional.add("inputs", -1);
  spec.positional = &positional;
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  if (!vm.count("tokenizer") || !vm.count("out") || !vm.count("inputs"))
    throw UsageError("needs --tokenizer DIR, --out DIR and at least one INPUT");
  PrepareOptions p;
  p.inputs = vm["inputs"].as<std::vector<std::string>>();
  p.out_dir = vm["out"].as<std::string>();
  p.val_fraction = vm["val-fraction"].as<double>();
  if (!(p.val_fraction > 0.0 && p.val_fraction < 1.0))
    throw UsageError("--val-fraction = " + std::to_string(p.val_fraction) +
                     " is outside (0, 1)");
  p.shard_tokens = vm["shard-tokens"].as<size_t>();
  if (p.shard_tokens < 1 || p.shard_tokens > kShardMaxTokens)
    throw UsageError("--shard-tokens = " + std::to_string(p.shard_tokens) + " is outside [1, " +
                     std::to_string(kShardMaxTokens) + "]");
  p.threads = vm.count("threads") ? vm["threads"].as<size_t>() : cpus_available();
  if (p.threads < 1 || p.threads > 1024)
    throw UsageError("--threads = " + std::to_string(p.threads) + " is outside [1, 1024]");
  // About a MiB of text per task: many tasks per batch keep the threads busy to the end.
  p.chunk_bytes = size_t(1) << 20;
  const Tokenizer tok = Tokenizer::load(vm["tokenizer"].as<std::string>());

  const auto t0 = std::chrono::steady_clock::now();
  const bool tty = isatty(STDERR_FILENO) != 0;
  double last_line = 0;
  p.progress = [&](size_t text, size_t in, size_t in_total, size_t tokens) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!tty && s - last_line < 10.0 && in < in_total) return;  // a log: a line every 10 s
    last_line = s;
    const double rate = s > 0 ? static_cast<double>(text) / s / 1e6 : 0.0;
    const double in_rate = s > 0 ? static_cast<double>(in) / s : 0.0;
    const std::string eta =
        in_rate > 0 && in < in_total ? duration_text(static_cast<double>(in_total - in) / in_rate) : "0s";
    std::fprintf(stderr, "%sprepare: %.1f of %.1f MB read, %.1f MB/s of text, %zu tokens, ETA %s%s",
                 tty ? "\r" : "", static_cast<double>(in) / 1e6,
                 static_cast<double>(in_total) / 1e6, rate, tokens, eta.c_str(), tty ? "   " : "\n");
    std::fflush(stderr);
  };
  const PrepareSummary sum = prepare_shards(tok, p);
  if (tty) std::fprintf(stderr, "\n");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tok.save((fs::path(p.out_dir) / "tokenizer").string());
  std::printf("wte prepare: %zu files, %zu bytes of text in %.2f s (%.1f MB/s, %zu threads); "
              "%zu train documents -> %zu tokens in %zu shards, %zu validation documents -> %zu "
              "tokens in %zu shards (%s, magic %d); tokenizer copied to %s\n",
              sum.files, sum.text_bytes, secs, static_cast<double>(sum.text_bytes) / secs / 1e6,
              p.threads, sum.train_documents, sum.train_tokens, sum.train_shards.size(),
              sum.val_documents, sum.val_tokens, sum.val_shards.size(),
              sum.format.token_bytes == 2 ? "uint16" : "uint32", sum.format.magic,
              (fs::path(p.out_dir) / "tokenizer").string().c_str());
  return 0;
}

}  // namespace wte::cli
