// `wte tokenize [--vocab DIR] [--json] TEXT...`: shows how a BPE vocabulary splits texts.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "wte/error.h"
#include "wte/tokenizer.h"
#include "train/commands.h"

namespace wte::cli {
namespace {

namespace po = boost::program_options;

// The default vocabulary directory: $WTE_VOCAB, else datasets/gpt2 under the current directory.
std::string default_vocab_dir() {
  const char* env = std::getenv("WTE_VOCAB");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string("datasets/gpt2");
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("vocab", po::value<std::string>()->default_value(default_vocab_dir()),
       "directory with encoder.json and vocab.bpe in GPT-2's format (GPT-2's own, from "
       "datasets/fetch_gpt2_vocab.sh, or one written by training). Default: $WTE_VOCAB if set, "
       "else datasets/gpt2 under the current directory")
      ("json", "print one JSON document per text, one per line: {\"text\", \"ids\", \"pieces\" "
       "(UTF-8; bytes that are not whole characters become U+FFFD), \"tokens\" (GPT-2's "
       "encoder.json spelling, e.g. \"\\u0120bank\" for \" bank\"; lossless)}");
  // clang-format on
  po::options_description hidden;
  hidden.add_options()("text", po::value<std::vector<std::string>>(), "texts to tokenize");
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description positional;
  positional.add("text", -1);

  const char* usage =
      "Usage: wte tokenize [--vocab DIR] [--json] TEXT...\n\n"
      "Encodes each TEXT with GPT-2's byte-level BPE (GPT-2's pre-tokenizer regex, then the merges\n"
      "of DIR/vocab.bpe) and prints the text, then one line per token: its index in the text, its\n"
      "id, and its bytes in double quotes with C-style escapes (\\n, \\t, \\\", \\xHH for bytes that\n"
      "are not a whole UTF-8 character), so a leading space shows as \" bank\".\n"
      "A text that starts with '-' goes after \"--\".\n\n";
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "wte tokenize: %s\n\n%s", e.what(), usage);
    std::cerr << opts;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << usage << opts
              << "\nExample:\n"
                 "  datasets/fetch_gpt2_vocab.sh\n"
                 "  wte tokenize \"The bank was muddy\"\n"
                 "prints\n"
                 "  \"The bank was muddy\"\n"
                 "    0    464  \"The\"\n"
                 "    1   3331  \" bank\"\n"
                 "    2    373  \" was\"\n"
                 "    3  39085  \" muddy\"\n";
    return 0;
  }
  if (!vm.count("text")) {
    std::fprintf(stderr, "wte tokenize: no TEXT given\n\n%s", usage);
    std::cerr << opts;
    return 2;
  }

  const std::string dir = vm["vocab"].as<std::string>();
  if (!std::filesystem::is_directory(dir)) {
    throw Error("vocabulary directory " + dir +
                " does not exist; run datasets/fetch_gpt2_vocab.sh for GPT-2's files, or pass "
                "--vocab DIR (or set WTE_VOCAB)");
  }
  const Tokenizer tok = Tokenizer::load(dir);
  const bool json = vm.count("json") > 0;
  for (const std::string& text : vm["text"].as<std::vector<std::string>>()) {
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
  return 0;
}

}  // namespace wte::cli
