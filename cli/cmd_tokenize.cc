// `wte tokenize [--tokenizer DIR | --checkpoint C] [--json] TEXT...`: shows how a BPE vocabulary
// splits texts.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "wte/checkpoint.h"
#include "wte/error.h"
#include "wte/tokenizer.h"
#include "cli/build_info.h"
#include "cli/options.h"
#include "cli/commands.h"

namespace wte::cli {
namespace {

namespace po = boost::program_options;

namespace fs = std::filesystem;

// The places `wte tokenize` looks for GPT-2's vocabulary without --tokenizer, in order: $WTE_VOCAB;
// datasets/gpt2 under the current directory; beside the binary (BIN/../share/wte/gpt2 of an
// installed wte, BIN/datasets/gpt2, BIN/../datasets/gpt2 of a build directory inside the
// repository); the install prefix's share/wte/gpt2 and the source tree's datasets/gpt2 of this
// build. The first directory holding encoder.json is taken.
std::vector<fs::path> vocab_search_path() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("WTE_VOCAB"); env != nullptr && *env != '\0') dirs.push_back(env);
  dirs.push_back("datasets/gpt2");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path bin = exe.parent_path();
    dirs.push_back(bin.parent_path() / "share" / "wte" / "gpt2");
    dirs.push_back(bin / "datasets" / "gpt2");
    dirs.push_back(bin.parent_path() / "datasets" / "gpt2");
  }
  dirs.push_back(fs::path(build::kInstallDataDir) / "gpt2");
  dirs.push_back(fs::path(build::kSourceDir) / "datasets" / "gpt2");
  // Each directory once, under its first name: a build directory inside the source tree and a run
  // from the source tree name one directory two or three ways.
  std::vector<fs::path> unique, seen;
  for (const fs::path& d : dirs) {
    std::error_code ec;
    const fs::path key = fs::weakly_canonical(fs::absolute(d, ec), ec);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    unique.push_back(d);
  }
  return unique;
}

// Prints how `tok` splits each of `texts`: as JSON lines (`json`) or as the text followed by one
// line per token (index, id, bytes).
void print_tokens(const Tokenizer& tok, const std::vector<std::string>& texts, bool json) {
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tok.encode(text);
    if (json) {
      nlohmann::json doc;
      doc["text"] = text;
      doc["ids"] = ids;
      doc["pieces"] = nlohmann::json::array();
      doc["tokens"] = nlohmann::json::array();
      for (int32_t id : ids) {
        doc["pieces"].push_back(tok.piece(id));
        doc["tokens"].push_back(Tokenizer::to_unicode_form(tok.piece(id)));
      }
      std::cout << doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    } else {
      std::cout << '"' << escape_piece(text) << "\"\n";
      for (size_t i = 0; i < ids.size(); ++i) {
        char head[32];
        std::snprintf(head, sizeof head, "%5zu  %5d  ", i, static_cast<int>(ids[i]));
        std::cout << head << '"' << escape_piece(tok.piece(ids[i])) << "\"\n";
      }
    }
  }
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("tokenizer", po::value<std::string>(),
       "directory with encoder.json and vocab.bpe in GPT-2's format (GPT-2's own, from "
       "datasets/fetch_gpt2_vocab.sh, or RUN/tokenizer written by training). "
       "Default: GPT-2's, found in $WTE_VOCAB, ./datasets/gpt2, beside the wte binary "
       "(../share/wte/gpt2 when installed, the repository's datasets/gpt2 for a build directory) "
       "or this build's source tree")
      ("checkpoint", po::value<std::string>(),
       "use the vocabulary a trained model was trained with: a checkpoint .h5 (wte train, wte "
       "import) or a run directory (its newest checkpoint)")
      ("text", po::value<std::vector<std::string>>(), "a text to tokenize (repeatable; or give "
       "the texts as arguments)")
      ("json", "print one JSON document per text, one per line: {\"text\", \"ids\", \"pieces\" "
       "(UTF-8; bytes that are not whole characters become U+FFFD), \"tokens\" (GPT-2's "
       "encoder.json spelling, e.g. \"\\u0120bank\" for \" bank\"; lossless)}");
  // clang-format on
  po::options_description hidden;
  hidden.add_options()("texts", po::value<std::vector<std::string>>(), "texts to tokenize");
  po::positional_options_description positional;
  positional.add("texts", -1);

  CommandSpec spec;
  spec.usage =
      "Usage: wte tokenize [--tokenizer DIR | --checkpoint C] [--json] TEXT...\n\n"
      "Encodes each TEXT with GPT-2's byte-level BPE (GPT-2's pre-tokenizer regex, then the merges\n"
      "of DIR/vocab.bpe) and prints the text, then one line per token: its index in the text, its\n"
      "id, and its bytes in double quotes with C-style escapes (\\n, \\t, \\\", \\xHH for bytes that\n"
      "are not a whole UTF-8 character), so a leading space shows as \" bank\".\n"
      "A text that starts with '-' goes after \"--\".\n"
      "Without --tokenizer or --checkpoint: GPT-2's vocabulary (datasets/fetch_gpt2_vocab.sh\n"
      "downloads it). Offline, give --checkpoint runs/NAME (a trained model's vocabulary),\n"
      "--tokenizer RUN/tokenizer, or the directory of a Hugging Face GPT-2 copied from elsewhere.\n\n";
  spec.example =
      "Example:\n"
      "  datasets/fetch_gpt2_vocab.sh\n"
      "  wte tokenize \"The bank was muddy\"\n"
      "prints\n"
      "  \"The bank was muddy\"\n"
      "    0    464  \"The\"\n"
      "    1   3331  \" bank\"\n"
      "    2    373  \" was\"\n"
      "    3  39085  \" muddy\"\n";
  spec.aliases = {{"--vocab", "--tokenizer"}};
  spec.hidden = &hidden;
  spec.positional = &positional;
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  std::vector<std::string> texts;
  for (const char* k : {"text", "texts"})
    if (vm.count(k))
      for (const std::string& t : vm[k].as<std::vector<std::string>>()) texts.push_back(t);
  if (texts.empty()) throw UsageError("no TEXT given: give one or more texts to tokenize");

  if (vm.count("checkpoint") && vm.count("tokenizer"))
    throw UsageError("--checkpoint and --tokenizer exclude each other: give the vocabulary once");
  std::string dir;
  if (vm.count("checkpoint")) {
    const std::string ckpt = checkpoint_option("--checkpoint", file_option(vm, "checkpoint"));
    const CheckpointInfo info = read_checkpoint_info(ckpt);
    print_tokens(Tokenizer::from_strings(info.encoder_json, info.vocab_bpe, ckpt + " /tokenizer"),
                 texts, vm.count("json") > 0);
    return 0;
  }
  if (vm.count("tokenizer")) {
    dir = vm["tokenizer"].as<std::string>();
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
      throw Error("--tokenizer " + dir + ": '" + dir + "' is a file, not a directory; give the "
                  "directory holding encoder.json and vocab.bpe");
    if (!fs::is_directory(dir))
      throw Error("--tokenizer " + dir + ": the directory does not exist; run "
                  "datasets/fetch_gpt2_vocab.sh for GPT-2's files, or give a directory holding "
                  "encoder.json and vocab.bpe");
  } else {
    std::string looked;
    for (const fs::path& d : vocab_search_path()) {
      std::error_code ec;
      if (fs::is_regular_file(d / "encoder.json", ec)) {
        dir = d.string();
        break;
      }
      looked += "\n  " + d.string();
    }
    if (dir.empty())
      throw Error("GPT-2's vocabulary (encoder.json, vocab.bpe) was not found; looked in:" + looked +
                  "\nRun datasets/fetch_gpt2_vocab.sh in the repository (it downloads them), "
                  "or pass --tokenizer DIR (or set WTE_VOCAB); offline, --checkpoint runs/NAME "
                  "uses a trained model's vocabulary.");
  }
  print_tokens(Tokenizer::load(dir), texts, vm.count("json") > 0);
  return 0;
}

}  // namespace wte::cli
