// `wte tokenize [--vocab DIR] [--json] TEXT...`: shows how a BPE vocabulary splits texts.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "src/error.h"
#include "src/tokenizer.h"
#include "train/commands.h"

namespace wte::cli {
namespace {

namespace po = boost::program_options;

// The default vocabulary directory: $WTE_VOCAB, else datasets/gpt2 under the current directory.
std::string default_vocab_dir() {
  const char* env = std::getenv("WTE_VOCAB");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string("datasets/gpt2");
}

// Length of the valid UTF-8 character starting at s[i], or 0. (Printing only: strictness here
// decides escaping, not tokenization.)
size_t utf8_char_len(const std::string& s, size_t i) {
  const auto u = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = u(i);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (c >= 0xF5 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((u(i + k) & 0xC0) != 0x80) return 0;
  if (n == 3 && ((c == 0xE0 && u(i + 1) < 0xA0) || (c == 0xED && u(i + 1) >= 0xA0))) return 0;
  if (n == 4 && ((c == 0xF0 && u(i + 1) < 0x90) || (c == 0xF4 && u(i + 1) >= 0x90))) return 0;
  return n;
}

// A byte string in double quotes with C-style escapes: \n \r \t \" \\ and \xHH for other control
// bytes and for bytes that are not part of a complete UTF-8 character (a token can hold half of
// one). Complete non-ASCII characters are printed as they are.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c >= 0x20 && c < 0x7F) out += static_cast<char>(c);
    else if (c >= 0x80 && utf8_char_len(s, i) > 0) {
      const size_t n = utf8_char_len(s, i);
      out.append(s, i, n);
      i += n;
      continue;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
    ++i;
  }
  return out + "\"";
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
      std::cout << quoted(text) << '\n';
      for (size_t i = 0; i < ids.size(); ++i) {
        char head[32];
        std::snprintf(head, sizeof head, "%5zu  %5d  ", i, static_cast<int>(ids[i]));
        std::cout << head << quoted(tok.piece(ids[i])) << '\n';
      }
    }
  }
  return 0;
}

}  // namespace wte::cli
